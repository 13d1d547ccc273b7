# Every target sets itself up: the first run creates .venv and installs the suite into it.
# Settings are the suite's options as KEY=VALUE (see `python -m llmload` and llmload/options.py):
#   make load GPU=a100 EFFORT=medium USERS=8
PYTHON ?= python3
# make bundle's PYTHON=3.12 names the host's Python version, not an interpreter here: python3 makes the venv then.
BASE_PYTHON = $(if $(filter 2.% 3.%,$(PYTHON)),python3,$(PYTHON))
VENV := .venv
PY := $(VENV)/bin/python
# The secret options of llmload/options.py (and OPENAI_API_KEY): make exports command-line variables to the
# recipe's environment, where llmload reads them, and they stay out of the echoed, ps-visible command line.
SECRETS := API_KEY WEB_LOGIN METRICS_LOGIN OPENAI_API_KEY
# The KEY=VALUE words given on make's command line, passed on as they are; llmload checks them.
SETTINGS = $(strip $(foreach v,$(filter-out $(SECRETS),$(sort $(.VARIABLES))),$(if $(filter command line,$(origin $v)),'$v=$($v)')))

# PROMPTS=2k|4k|8k needs its generated set; make writes it first when it is missing or older than templates/.
GENERATED_SET = $(if $(filter 2k 4k 8k,$(PROMPTS)),prompts/$(PROMPTS).jsonl)

.DEFAULT_GOAL := help
.PHONY: help load ui worker prompts sweep capacity tune calibrate figures compare serve-sim serve-vllm-cpu stop-vllm-cpu vllm-cpu-models vllm-bench crosscheck bundle monitor prometheus test test-fast test-integration test-vllm bench bench-product bench-peers clean-venv

help:  ## this list: every target, then every setting (from llmload/options.py, the one option table)
	@echo "usage: make TARGET [KEY=VALUE ...], e.g. make load GPU=a100 EFFORT=high USERS=8"
	@echo
	@awk -F':.*## ' '/^[a-z][a-z.-]*:.*## /{printf "  make %-16s %s\n", $$1, $$2}' $(firstword $(MAKEFILE_LIST))
	@echo
	@$(BASE_PYTHON) -c 'from llmload.settings import help_lines; print("\n".join(help_lines()))'

$(VENV)/.installed: pyproject.toml
	$(BASE_PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

load: $(VENV)/.installed $(GENERATED_SET)  ## a headless run; without HOST against the built-in target
	$(PY) -m llmload load $(SETTINGS)

ui: $(VENV)/.installed $(GENERATED_SET)  ## Locust's web UI on WEB_HOST:WEB_PORT (127.0.0.1:8089) with the same settings
	$(PY) -m llmload ui $(SETTINGS)

worker: $(VENV)/.installed  ## Locust worker(s) here for a master elsewhere: MASTER=host:port [WORKERS=N]
	$(PY) -m llmload worker $(SETTINGS)

prompts: $(VENV)/.installed  ## prompts/2k.jsonl, 4k.jsonl, 8k.jsonl from templates/ (VERIFY=host checks counts)
	$(PY) -m llmload prompts $(SETTINGS)

sweep: $(VENV)/.installed  ## every cell of SCENARIO (resumable): HOST, OUT, SPEEDUP, METRICS_INTERVAL, REPEATS
	$(PY) -m llmload sweep $(SETTINGS)

capacity: $(VENV)/.installed $(GENERATED_SET)  ## the largest USERS (or RATE, CAPACITY_BY=rate) meeting SLO: adaptive search, OUT/capacity.json
	$(PY) -m llmload capacity $(SETTINGS)

figures: $(VENV)/.installed  ## figures/ and report.html from results folders: RESULTS="dir [dir ...]"
	$(if $(RESULTS),,$(error RESULTS is missing: make figures RESULTS="results/<sweep> [more results folders]"))
	$(PY) -m plots figures $(RESULTS)

compare: $(VENV)/.installed  ## Markdown: B (tuned) against A (baseline), per workload
	$(if $(and $(A),$(B)),,$(error A and B are needed: make compare A=results/<baseline> B=results/<tuned>))
	$(PY) -m plots compare $(A) $(B)

prompts/%.jsonl: $(wildcard templates/*/*) | $(VENV)/.installed
	$(PY) -m llmload prompts SIZES=$*

serve-sim: $(VENV)/.installed  ## the built-in vLLM-compatible target: GPU, MODEL (or PROFILE), PORT
	$(PY) -m llmload.sim $(SETTINGS)

serve-vllm-cpu: $(VENV)/.installed  ## a real vLLM (CPU build) serving MODEL=tiny-gptoss|tiny-llama on 127.0.0.1:PORT
	$(PY) -m llmload.vllm_cpu serve $(SETTINGS)

stop-vllm-cpu: $(VENV)/.installed  ## stop the vLLM started by serve-vllm-cpu on PORT
	$(PY) -m llmload.vllm_cpu stop $(SETTINGS)

vllm-cpu-models: $(VENV)/.installed  ## the vLLM venv and both tiny models, built into ~/.cache/llmload once
	$(PY) -m llmload.vllm_cpu build --model tiny-gptoss --model tiny-llama

vllm-bench: $(VENV)/.installed  ## vLLM's own `vllm bench serve $(ARGS)` from the vLLM venv, offline (local tokenizer)
	$(PY) -m llmload.vllm_cpu bench $(ARGS)

calibrate: $(VENV)/.installed  ## fit a profile to a real server's results: RESULTS="dir|file ...", PROFILE (the one refitted), OUT
	$(PY) -m llmload calibrate $(SETTINGS)

tune: $(VENV)/.installed $(GENERATED_SET)  ## each server configuration (SERVE, GRID) started, loaded, stopped; the best at OBJECTIVE, beyond noise or not: OUT/tune.json
	$(PY) -m llmload tune $(SETTINGS)

crosscheck: $(VENV)/.installed  ## vLLM's bench and llmload side by side: HOST, PROMPTS=random:IN:OUT, USERS, REQUESTS, REPEATS, OUT
	$(PY) -m llmload crosscheck $(SETTINGS)

bundle: $(VENV)/.installed  ## an offline bundle for a host without a registry: PLATFORM, PYTHON, EXTRA="vllm==0.25.0", FREEZE=host-freeze.txt, PART_MB, OUT
	$(PY) -m llmload bundle $(SETTINGS)

monitor: $(VENV)/.installed prometheus  ## Prometheus on 127.0.0.1:MONITOR_PORT (9090) scraping the suite (METRICS_PORT=9400) and the target: monitoring/
	$(PY) -m llmload monitor $(SETTINGS)

# Debian's prometheus package where the command is missing: as root, or through sudo without a password; else one line.
APT_PROMETHEUS = apt-get install -y --no-install-recommends prometheus
prometheus:  ## install Prometheus (Debian's package) if it is missing: make monitor and the tests that scrape a run use it
	@command -v prometheus >/dev/null 2>&1 || command -v apt-get >/dev/null 2>&1 || { echo "error: prometheus is missing and this is no Debian/Ubuntu: put a prometheus binary (2.42 or later) on PATH" >&2; exit 2; }
	@command -v prometheus >/dev/null 2>&1 || if [ "$$(id -u)" = 0 ]; then $(APT_PROMETHEUS) || { apt-get update && $(APT_PROMETHEUS); }; \
	  elif sudo -n true 2>/dev/null; then sudo $(APT_PROMETHEUS) || { sudo apt-get update && sudo $(APT_PROMETHEUS); }; \
	  else echo "error: prometheus is missing: install it with sudo apt-get install -y prometheus, then run make again" >&2; exit 2; fi

test: $(VENV)/.installed vllm-cpu-models prometheus  ## every test of every tier, the real vLLM ones included (what CI runs)
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed  ## the pure tier: no process, no socket, no generated file; well under a minute
	$(PY) -m pytest -q -m pure

test-integration: $(VENV)/.installed prometheus  ## the integration tier: the built-in target, Locust and the CLI as processes
	$(PY) -m pytest -q -m integration

test-vllm: $(VENV)/.installed vllm-cpu-models prometheus  ## the vllm tier: the real vLLM (CPU build) serving the tiny models
	$(PY) -m pytest -q -m vllm

bench: $(VENV)/.installed  ## client capacity and timing error, prompt-set speed, the calibration's held-out error (bench/RESULTS.md)
	$(PY) bench/client_bench.py
	$(PY) bench/prompts_bench.py
	$(PY) bench/figures_bench.py
	$(PY) bench/calibration_bench.py

bench-product: $(VENV)/.installed  ## make load itself against the target's send log: 16, 256, 1,000 streams started together, WORKERS 0-2, beside the bare client (bench/RESULTS.md)
	$(PY) bench/product_bench.py --bare

bench-peers: $(VENV)/.installed  ## vllm bench serve, AIPerf and GuideLLM beside the raw client against the target's send log (AIPerf and GuideLLM go into throwaway venvs under /tmp/llmload-peers)
	$(PY) bench/peers_bench.py

clean-venv:  ## remove .venv (the next target recreates it)
	rm -rf $(VENV)
