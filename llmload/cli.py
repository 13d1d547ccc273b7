"""``python -m llmload``: the commands the Makefile runs.

    load [KEY=VALUE ...]    a headless run; prints the result block, writes OUT/summary.json and OUT/vllm_bench.json
    ui [KEY=VALUE ...]      Locust's web UI on WEB_HOST:WEB_PORT (127.0.0.1:8089) with the same options filled in
    prompts [KEY=VALUE ...] write prompts/2k.jsonl, 4k.jsonl, 8k.jsonl from templates/ (VERIFY=host checks them)
    sweep [KEY=VALUE ...]   every cell of SCENARIO, resumable, into OUT/cells.csv
    capacity [KEY=VALUE ...] the largest USERS (or RATE) meeting SLO, by an adaptive search; OUT/capacity.json
    crosscheck [KEY=VALUE ...] vLLM's bench and llmload on one server and workload, side by side
    calibrate RESULTS="dir ..." PROFILE=name|path [OUT=file]  fit the built-in target's profile to a real server's results
    bundle PLATFORM=tag PYTHON=3.12 [EXTRA=...] [FREEZE=file]  an offline bundle of the suite (and EXTRA) for a host without a registry
    report RUN_DIR          print a run's result block again; a killed run's summary is rebuilt (partial)
    worker MASTER=host:port Locust worker(s) here for a master run elsewhere (make load EXPECT_WORKERS=N)
    monitor [MONITOR_PORT=9090] Prometheus on 127.0.0.1 scraping the suite (METRICS_PORT) and the target (monitoring/)
    serve-sim [FLAGS ...]   the built-in vLLM-compatible target (python -m llmload.sim --help)
    help                    every setting of every command (also: load --help, sweep --help, prompts --help)

Without HOST, load and ui start the built-in target for GPU and MODEL and stop it afterwards.
The API key comes from $API_KEY, $OPENAI_API_KEY or API_KEY_FILE, never from a command line.
The first Ctrl-C (or SIGTERM) stops sending and lets streams in flight finish (STOP_TIMEOUT), then
every file is written and the result block printed; a second one cuts the streams. Exit code
128 + the signal (130, 143); summary.json says ``interrupted_by``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from llmload import options as opts
from llmload.credentials import check_metrics_host, read_api_key, web_login
from llmload.errors import ConfigError, Interrupted, LoadTestError
from llmload.system.listening import check_port_free, free_loopback_port
from llmload.loadtest.console import Progress, banner_lines
from llmload.loadtest.preflight import check_api, check_prefix_fits, continuous_usage, probe_server, resolve_model, served_by
from llmload.loadtest.runconfig import RECORDED_OPTIONS, LaunchConfig, parse_run_args
from llmload.loadtest.target import target
from llmload.loadtest.workload import workload_of
from llmload.timescale import TimeScale, resolve_time_scale
from llmload.loadtest.monitor import serve_prometheus
from llmload.system.processes import SignalForwarder, stoppable_child
from llmload.promptsets.catalog import GENERATED_DIR, load_prompt_set, prompt_overrides
from llmload.results.provenance import bare_model_name
from llmload.results.report import fail_ratio_line, format_result
from llmload.results.storage import (SAMPLES_FILE, SUMMARY_FILE, default_run_dir, older_summary_version, read_summary,
                                     rebuild_summary, recompute_summary, write_summary)
from llmload.settings import FIXED_IN_WEB_UI_ENV, help_lines, host_port, parse_settings

__all__ = ["main", "EXIT_BAD_INPUT", "EXIT_FAIL_RATIO"]

EXIT_BAD_INPUT = 2
EXIT_FAIL_RATIO = 3
"""The run stopped (or ended) with more failed requests than MAX_FAIL_RATIO allows."""


def _locust_argv(options: LaunchConfig, host: str, model: str, continuous: bool, out: Path | None,
                 scale: TimeScale) -> list[str]:
    """Locust's command line: its own flags for the options it owns, the suite's for the rest.

    ``out`` None leaves the folder to the test, named from the values it starts with (the web UI's form); ``scale``:
    the run's time scale, resolved from its target (DURATION on the target's clock).
    """
    # RATE or TRACE: one user per process dispatches that process's share of the schedule
    users = (options.workers or options.expect_remote_workers or 1) if options.open_loop else options.num_users
    values = {**vars(options), "host": host, "model": model, "out": str(out or ""), "num_users": users,
              "continuous_usage": "on" if continuous else "off",
              "spawn_rate": options.spawn_rate or float(users),
              "run_time": f"{max(1, math.ceil(scale.target_s(options.duration_s or 0.0)))}s"}  # Locust takes whole seconds
    argv = [sys.executable, "-m", "locust", "-f", str(_locustfile())]
    for o in RECORDED_OPTIONS:  # the API key goes in the environment, not on a command line that ps can read
        if o.dest == "run_time" and options.ends_with_last_request:
            continue  # with REQUESTS (or TRACE) the test ends when the last request does
        argv.append(f"{o.flag}={values[o.dest]}")
    if options.workers:
        # Locust forks the workers; this process is their master, on a free loopback port (Locust's default,
        # *:5557, would listen on every interface and make two runs at once collide)
        port = free_loopback_port()
        argv += [f"--processes={options.workers}", "--master-bind-host=127.0.0.1", f"--master-bind-port={port}",
                 f"--master-port={port}"]
    if options.expect_remote_workers:
        bind_host, bind_port = host_port(options.master_bind, "MASTER_BIND")
        argv += ["--master", f"--expect-workers={options.expect_remote_workers}",
                 f"--master-bind-host={bind_host}", f"--master-bind-port={bind_port}"]
    return argv


def _worker(settings: Sequence[str]) -> int:
    """Locust worker process(es) on this machine for a master elsewhere; the master sends every option."""
    options = parse_settings(settings, opts.WORKER_OPTIONS)
    if not options.master:
        raise ConfigError("MASTER is missing: give the master's address:port, e.g. MASTER=10.0.0.5:5557")
    host, port = host_port(options.master, "MASTER")
    argv = [sys.executable, "-m", "locust", "-f", str(_locustfile()), "--worker", f"--master-host={host}",
            f"--master-port={port}"]
    if options.workers:
        argv.append(f"--processes={options.workers}")
    with SignalForwarder("stopped before the worker started") as signals:
        locust = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=stoppable_child)
        code = signals.wait(locust)
    return 128 + signals.first if signals.first else code



def _locust_output_argv(options: LaunchConfig, out: Path) -> list[str]:
    """Locust's own console table and CSV files, as LOCUST_TABLE and LOCUST_HISTORY ask."""
    argv = [] if options.locust_table == "on" else ["--only-summary"]
    if options.locust_history == "on":
        argv += ["--csv", str(out / "locust_history"), "--csv-full-history"]
    return argv


def profile_gpu(profile: str, settings: Sequence[str]) -> str | None:
    """PROFILE without GPU: the profile's GPU, which labels (and prices) the run instead of GPU's default; else None."""
    if not profile or any(w.startswith(("GPU=", "--gpu")) for w in settings):
        return None
    from llmload.sim.profiles import load_profile

    return load_profile(profile).gpu


def _locustfile() -> Path:
    path = Path(__file__).resolve().parents[1] / "locustfile.py"
    if not path.is_file():
        raise ConfigError(f"{path} is missing; run from a checkout of the suite (pip install -e .)")
    return path


def _prepare(settings: Sequence[str], headless: bool) -> tuple[LaunchConfig, dict[str, str], int]:
    """The run's options, the body fields its prompts set themselves and its measured requests (REQUESTS, or TRACE's
    rows; 0: DURATION decides), checked before any server starts."""
    options = parse_run_args(settings)
    if (gpu := profile_gpu(options.target_profile, settings)) is not None:
        options = dataclasses.replace(options, gpu=gpu)
    workload = workload_of(options)
    overrides = prompt_overrides(workload.prompts)
    _check_out(options.out)
    if options.out and (Path(options.out) / SAMPLES_FILE).exists():
        raise ConfigError(f"OUT={options.out} already holds a run ({SAMPLES_FILE}); choose another OUT")
    if not headless:
        check_port_free("WEB_PORT", options.web_host, options.web_port, "another `make ui`?")
        if options.metrics_port == options.web_port:
            raise ConfigError(f"METRICS_PORT={options.metrics_port} is WEB_PORT too; give METRICS_PORT another port")
    _check_metrics_port(options)
    return options, overrides, len(workload.trace.rows) - options.warmup_requests if workload.trace else options.requests


def _check_out(out: str) -> None:
    """OUT (or results/, its default's parent) must be a folder this user can create and write in."""
    setting = f"OUT={out}" if out else "OUT (default results/...)"
    path = Path(out or "results")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{setting} is a file, not a folder; choose another OUT")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{setting}: {existing} is a file, not a folder; choose another OUT")
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        raise ConfigError(f"{setting}: cannot write in {existing} ({e.strerror or e}); choose another OUT") from None


def _check_metrics_port(options: LaunchConfig | argparse.Namespace) -> None:
    """METRICS_PORT, when on, is free where METRICS_HOST says (which parse_run_args, or here a sweep's or capacity's
    settings, checked for METRICS_LOGIN first)."""
    if options.metrics_port:
        check_port_free("METRICS_PORT", options.metrics_host, options.metrics_port, "another run's METRICS_PORT?")


def _made_dirs(path: Path) -> list[Path]:
    """Create ``path`` and return the folders that did not exist before, outermost first."""
    missing = [p for p in (path, *path.parents) if not p.exists()][::-1]
    path.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_if_empty(made: list[Path], out: Path) -> None:
    """A run refused inside Locust leaves no folder behind: only the empty page Locust wrote is removed
    from a folder this run made, and rmdir never removes a folder holding anything else."""
    if out in made and not (out / SAMPLES_FILE).exists():
        (out / "locust.html").unlink(missing_ok=True)
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            return


def _run(settings: Sequence[str], headless: bool) -> int:
    options, overrides, requests = _prepare(settings, headless)
    key = read_api_key(options.api_key_file)
    env = {**os.environ, "API_KEY": key}  # Locust's session reads it there; API_KEY_FILE is resolved here
    with SignalForwarder() as signals, target(options) as host:
        info = probe_server(host, key)
        model = resolve_model(options.model, info)
        check_api(info, options.api, key)
        check_prefix_fits(options.prefix_tokens, info, model)
        served = served_by(info, model)
        scale = resolve_time_scale(options.speedup, served)  # Locust's test resolves the same scale again
        out = Path(options.out) if options.out else default_run_dir(options.gpu, model, options.effort, options.num_users)
        continuous = continuous_usage(options.continuous_usage, info)
        progress = Progress(out / SAMPLES_FILE, None if requests else scale.target_s(options.duration_s or 0.0), requests)
        if headless:
            argv = _locust_argv(options, host, model, continuous, out, scale) + _locust_output_argv(options, out)
            argv += ["--headless", "--html", str(out / "locust.html"), "--exit-code-on-error", "0"]
            print("\n".join(banner_lines(options, host, model, served, f"{out}/", overrides, scale)), flush=True)
            made = _made_dirs(out)
            progress.start()
        else:
            if not options.host:  # the built-in target plays one profile on one time scale: the form does not offer them
                env[FIXED_IN_WEB_UI_ENV] = "GPU,SPEEDUP,PROFILE"
            named = Path(options.out) if options.out else None  # else the test names it from the form's values
            argv = _locust_argv(options, host, model, continuous, named, scale) + _locust_output_argv(options, named or Path("results"))
            argv += ["--web-host", options.web_host, "--web-port", str(options.web_port)]
            if web_login() is not None:
                argv.append("--web-login")  # user:password stays in the environment (WEB_LOGIN)
            later = f"{named}/" if named else "results/<time>-<gpu>-<model>-<effort>-u<users>/, named when the test starts"
            print("\n".join(banner_lines(options, host, model, served, later, overrides, scale)), flush=True)
            print(f"Locust web UI on http://{options.web_host}:{options.web_port} (target {host}); Ctrl-C stops it", flush=True)
            made = _made_dirs(named) if named else []
        # Locust's own session: only we signal it, once per Ctrl-C; the built-in target outlives it.
        locust = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=stoppable_child)
        try:
            code = signals.wait(locust)
        finally:
            progress.stop()
            _remove_if_empty(made, out)
    if not headless:
        return 0 if code == 0 or signals.first else code
    if not (out / SUMMARY_FILE).exists():
        if signals.first:
            raise Interrupted(signals.first, "stopped before the test started; nothing was measured")
        raise LoadTestError(f"Locust exited with code {code} before writing {out / SUMMARY_FILE}; see its output above")
    summary = read_summary(out)
    print(format_result(summary))
    print(f"Results: {out}/ (samples.jsonl, summary.json, vllm_bench.json, locust_*.csv, locust.html)")
    if signals.first:
        return 128 + signals.first
    if code != 0:
        return code
    too_many = fail_ratio_line(summary, options.max_fail_ratio)
    if too_many:
        print(f"error: {too_many}", file=sys.stderr)
        return EXIT_FAIL_RATIO
    return 0 if summary.requests_ok > 0 else 1


def _prompts(settings: Sequence[str]) -> int:
    import random

    from llmload.loadtest.preflight import tokenize_count
    from llmload.promptsets.write import write_prompt_sets

    options = parse_settings(settings, opts.PROMPT_OPTIONS)
    sizes = [s.strip() for s in options.sizes.split(",") if s.strip()]
    out = Path(options.out) if options.out else GENERATED_DIR
    key = read_api_key(options.api_key_file)
    info = probe_server(options.verify, key, setting="VERIFY") if options.verify else None  # before any set is written
    for stats in write_prompt_sets(sizes, options.count, options.seed, Path(options.templates), out):
        print(f"{out}/{stats.size}.jsonl: {stats.count} prompts, {stats.prompt_tokens_min}-{stats.prompt_tokens_max} tokens "
              f"(target {stats.target_tokens}, within {stats.max_deviation_ratio:.2%}), "
              f"mean shared prefix {stats.shared_prefix_tokens_mean:.0f} tokens")
    if info is None:
        return 0
    model = resolve_model(options.model, info)
    mismatches = 0
    for size in sizes:
        prompts = load_prompt_set(str(out / f"{size}.jsonl"))
        for prompt in random.Random(options.seed).sample(prompts, min(20, len(prompts))):
            served = tokenize_count(info, model, prompt.messages, key)
            if served != prompt.meta["prompt_tokens"]:
                mismatches += 1
                print(f"{prompt.id}: offline {prompt.meta['prompt_tokens']} tokens, {info.base_url} counts {served}")
    print(f"VERIFY {info.base_url}: {'all counts equal' if not mismatches else f'{mismatches} counts differ'}")
    return 1 if mismatches else 0


def _sweep(settings: Sequence[str]) -> int:
    from llmload.sweep.scenarios import load_scenario
    from llmload.sweep.runner import run_sweep

    options = parse_settings(settings, opts.SWEEP_OPTIONS)
    if not options.scenario:
        raise ConfigError("SCENARIO is missing: give a scenario file, e.g. SCENARIO=scenarios/h100-grid.yaml")
    scenario = load_scenario(Path(options.scenario))
    check_metrics_host(options.metrics_host, options.metrics_port)
    _check_metrics_port(options)
    out = Path(options.out) if options.out else Path("results") / scenario.name
    return run_sweep(scenario, out, options.host, options.speedup, options.metrics_interval, read_api_key(options.api_key_file),
                     repeats=options.repeats, exported=_exported(options))


def _exported(options: argparse.Namespace) -> dict[str, str]:
    """The runner's settings each cell's `make load` takes (no part of a cell's settings or key): METRICS_HOST and
    METRICS_PORT, CACHE_RESET."""
    exported = {"CACHE_RESET": options.cache_reset} if getattr(options, "cache_reset", "off") == "on" else {}
    if getattr(options, "prompt_start", 0):
        exported["PROMPT_START"] = str(options.prompt_start)
    if options.metrics_port:
        exported |= {"METRICS_HOST": options.metrics_host, "METRICS_PORT": str(options.metrics_port)}
    return exported


def _capacity(settings: Sequence[str]) -> int:
    from llmload.sweep.capacity import check_capacity_settings, run_capacity

    parsed = parse_settings(settings, (*opts.OPTIONS, *opts.CAPACITY_OPTIONS))
    if any("=" not in word or word.startswith("-") for word in settings):
        raise ConfigError("capacity takes KEY=VALUE settings only, e.g. SLO='ttft_p90<=2s' EFFORT=high")
    words = dict(word.split("=", 1) for word in settings)
    if (gpu := profile_gpu(parsed.target_profile, settings)) is not None:
        parsed.gpu = words["GPU"] = gpu
    own = {o.key for o in opts.CAPACITY_OPTIONS} | set(opts.RUNNER_KEYS)
    step_words = {k: v for k, v in words.items() if k not in own}
    check_capacity_settings(step_words, parsed)
    check_metrics_host(parsed.metrics_host, parsed.metrics_port)
    _check_metrics_port(parsed)
    effort = parsed.effort.partition(":")[0]
    out = Path(parsed.out) if parsed.out else Path("results") / f"capacity-{parsed.gpu}-{bare_model_name(parsed.model) or 'model'}-{effort}-{parsed.capacity_by}"
    code = run_capacity(step_words, parsed, out, parsed.host, parsed.speedup, read_api_key(parsed.api_key_file),
                        exported=_exported(parsed))
    if code == 0:
        from plots.capacity import load_capacity
        from plots.capacity_figure import capacity_figure

        drawn = capacity_figure(load_capacity(out), out)
        print(f"Figure: {drawn.files[0]}" if drawn.files else f"No figure: {drawn.note}")
    return code


def _tune(settings: Sequence[str]) -> int:
    """`make tune`: each server configuration started, loaded, stopped; the best named at the objective."""
    from llmload.sweep.capacity import check_capacity_settings
    from llmload.tune.plan import plan_tune
    from llmload.results.tunereport import tune_lines
    from llmload.tune.runner import run_tune

    parsed = parse_settings(settings, (*opts.OPTIONS, *opts.TUNE_OPTIONS))
    if any("=" not in word or word.startswith("-") for word in settings):
        raise ConfigError("tune takes KEY=VALUE settings only, e.g. GRID='max-num-batched-tokens=2048,4096' SLO='ttft_p90<=2s'")
    words = dict(word.split("=", 1) for word in settings)
    if parsed.host:
        raise ConfigError("HOST with tune: the tune starts each configuration's server itself; give its command as SERVE "
                          "(or leave SERVE out to rehearse on the built-in target)")
    if parsed.serve and parsed.speedup != 1.0:
        raise ConfigError("SPEEDUP rehearses on the built-in target; leave it out with SERVE")
    own = {o.key for o in opts.TUNE_OPTIONS if not o.key.startswith("CAPACITY_")} | set(opts.RUNNER_KEYS)
    load = {k: v for k, v in words.items() if k not in own}
    plan = plan_tune(parsed, load)
    if plan.capacity_words:
        capacity_keys = {o.key for o in opts.CAPACITY_OPTIONS}
        check_capacity_settings({k: v for k, v in plan.capacity_words.items() if k not in capacity_keys}, parsed)
    out = Path(parsed.out) if parsed.out else Path("results") / f"tune-{parsed.gpu}-{bare_model_name(parsed.model) or 'model'}"
    # SIGTERM, like Ctrl-C, while a server starts or stops (the loads forward their own): the server in hand is
    # stopped by the unwinding, measured rungs stay, and the tune exits with one line.
    with SignalForwarder("stopped between loads; measured rungs are kept: rerun the same command to resume"):
        result = run_tune(plan, out, read_api_key(parsed.api_key_file))
    print("\n".join(tune_lines(result)))
    from plots.tune import tune_figures

    drawn = tune_figures(out)
    print(f"Tune: {out}/tune.json, {out}/configs.csv; figures and report: {drawn}")
    return 0 if result.ranking else 1


def _report(run_dirs: Sequence[str]) -> int:
    """Print each run's result block; a run killed before its summary gets one rebuilt from samples.jsonl, and one
    an older suite summed up is computed again from it."""
    for run_dir in map(Path, run_dirs):
        if (version := older_summary_version(run_dir)) is not None:
            summary = recompute_summary(run_dir)
            print(f"{run_dir / SUMMARY_FILE}: schema version {version}, older than this suite's: computed again from "
                  f"{SAMPLES_FILE} (the file is left as it is)")
        elif (run_dir / SUMMARY_FILE).exists() or not (run_dir / SAMPLES_FILE).is_file():
            summary = read_summary(run_dir)
        else:
            summary = rebuild_summary(run_dir)
            path = write_summary(run_dir, summary)
            print(f"{path}: rebuilt from {SAMPLES_FILE}, marked partial (missing {'; '.join(summary.missing)})")
        print(format_result(summary))
    return 0


def _help(command: str) -> int:
    """``python -m llmload CMD --help`` (one command's settings) or ``help`` (every command's)."""
    print(__doc__.strip().replace("``", "") + "\n")
    print("\n".join(help_lines([command] if command in opts.COMMANDS else opts.COMMANDS)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command, rest = (args[0], args[1:]) if args else ("", [])
    if command in ("help", "-h", "--help") or (command != "serve-sim" and ("-h" in rest or "--help" in rest)):
        return _help(command)
    try:
        if command == "load":
            return _run(rest, headless=True)
        if command == "ui":
            return _run(rest, headless=False)
        if command == "prompts":
            return _prompts(rest)
        if command == "sweep":
            return _sweep(rest)
        if command == "capacity":
            return _capacity(rest)
        if command == "crosscheck":
            from llmload.crosscheck.runner import run_crosscheck

            return run_crosscheck(parse_settings(rest, opts.CROSSCHECK_OPTIONS))
        if command == "calibrate":
            from llmload.calibrate.command import run_calibrate

            return run_calibrate(parse_settings(rest, opts.CALIBRATE_OPTIONS), rest)
        if command == "bundle":
            from llmload.bundle.command import run_bundle

            return run_bundle(parse_settings(rest, opts.BUNDLE_OPTIONS))
        if command == "tune":
            return _tune(rest)
        if command == "report" and rest:
            return _report(rest)
        if command == "worker":
            return _worker(rest)
        if command == "monitor":
            return serve_prometheus(rest)
        if command == "serve-sim":
            from llmload.sim.__main__ import main as sim_main

            return sim_main(rest)
    except LoadTestError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Interrupted as e:
        print(f"interrupted by {signal.Signals(e.signum).name}: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:  # a command that runs no load: nothing to keep
        print("interrupted by SIGINT", file=sys.stderr)
        return 128 + signal.SIGINT
    print(__doc__.strip().split("\n\n")[0].replace("``", "") + "\n\nusage: python -m llmload {load,ui,prompts,sweep,capacity,crosscheck,calibrate,bundle,report,worker,monitor,serve-sim} ...", file=sys.stderr)
    return 2
