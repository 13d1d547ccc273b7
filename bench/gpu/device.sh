#!/usr/bin/env bash
# The lent GPU machine's steps (issue 32 items 7-9, issue 33 item 8), one per device call, run from the repo's root
# there: it reaches no registry, holds a machine for 30 minutes at most, and keeps /tmp between calls made back to
# back. What each step measures comes back as one .tgz under $OUT (the device tool returns at most 8 files).
#
#   part                copy the carried bundle parts (.gpu/dev/*) to /tmp/bundle (one call per part: 64 MiB a call)
#   setup               install the bundle (make bundle's install.py, --no-index), the model folder, and serve vLLM
#                       (the last part's call also carries .gpu/dev/model: the tokenizer and its config)
#   warm                send loads until vLLM's JIT monitor logs no new compile
#   grid                the calibration grid's cold runs (bench/gpu/calibration-1k.yaml, -4k.yaml), each cell twice
#   bench               vLLM's own bench at three cells, beside the suite, each on its own fresh prompts (crosscheck)
#   tune                stop the grid's server; make tune over --max-num-batched-tokens and --async-scheduling
#
# The server: gpt-oss-20b's architecture with dummy bf16 weights (bench/gpu/gpt-oss-20b-bf16.config.json, no
# quantization_config), the suite's o200k_harmony tokenizer, --load-format dummy, prefix caching on (vLLM's default),
# VLLM_SERVER_DEV_MODE=1 (POST /reset_prefix_cache), no FlashInfer (not carried: VLLM_USE_FLASHINFER_SAMPLER=0).
set -u
STEP=${1:?step}
SITE=/tmp/site
MODEL=/tmp/model
PORT=8000
HOST=http://127.0.0.1:$PORT
export PYTHONPATH=$PWD:$SITE PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       VLLM_SYSTEM_START_DATE=2025-08-05 VLLM_SERVER_DEV_MODE=1 TIKTOKEN_CACHE_DIR=/tmp/tiktoken \
       TIKTOKEN_ENCODINGS_BASE=/root/.cache/llmload
SERVE="python3 -m vllm.entrypoints.openai.api_server --model $MODEL --served-model-name openai/gpt-oss-20b \
--load-format dummy --max-model-len 16384 --gpu-memory-utilization 0.85 --enable-prompt-tokens-details \
--jit-monitor-verbose"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

pack() {  # what a step measured, as one file back
    tar czf "$OUT/$1.tgz" -C /tmp/results "$1" 2>/dev/null; ls -la "$OUT"
}

wait_ready() {
    for _ in $(seq 1 300); do
        curl -sf "$HOST/v1/models" >/dev/null && { log "vLLM ready"; return 0; }
        sleep 1
    done
    log "vLLM not ready after 300 s"; tail -30 /tmp/vllm.log; return 1
}

case "$STEP" in
part)
    mkdir -p /tmp/bundle && cp -rv .gpu/dev/* /tmp/bundle/ && ls /tmp/bundle && df -h /tmp | tail -1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader ;;
setup)
    mkdir -p $MODEL /tmp/tiktoken
    cp bench/gpu/gpt-oss-20b-bf16.config.json $MODEL/config.json
    cp /tmp/bundle/model/tokenizer_config.json /tmp/bundle/model/chat_template.jinja /tmp/bundle/model/generation_config.json $MODEL/
    gunzip -c /tmp/bundle/model/tokenizer.json.gz > $MODEL/tokenizer.json
    log "install"; python3 /tmp/bundle/install.py $SITE --model $MODEL 2>&1 | tail -15
    log "serve"; setsid $SERVE --port $PORT > /tmp/vllm.log 2>&1 < /dev/null &
    wait_ready; grep -E "non-default args|KV cache size|attention backend|Maximum concurrency|compile" /tmp/vllm.log | cut -c1-300 | tail -12
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader ;;
warm)
    mkdir -p /tmp/results/warm
    for users in 64 256 1 16; do
        before=$(grep -ci "jit" /tmp/vllm.log)
        python3 -m llmload load HOST=$HOST PROMPTS=random:4096:256:$((users * 2)) USERS=$users REQUESTS=$((users * 2)) \
            EFFORT=none OUT=/tmp/results/warm/u$users > /tmp/results/warm/u$users.log 2>&1
        log "warm-up u$users: exit $?, JIT lines $before -> $(grep -ci jit /tmp/vllm.log)"
    done
    grep -i "jit" /tmp/vllm.log | cut -c1-200 | tail -8; cp /tmp/vllm.log /tmp/results/warm/vllm.log; pack warm ;;
restart)  # vLLM's harmony needs o200k_base offline: TIKTOKEN_ENCODINGS_BASE (the suite's own copy)
    python3 -c "from llmload.promptsets.tokens import o200k_base_file; print(o200k_base_file())"
    pkill -INT -f "vllm.entrypoints.openai.api_server"; sleep 8; pkill -KILL -f "vllm.entrypoints.openai.api_server"; sleep 2
    setsid $SERVE --port $PORT > /tmp/vllm.log 2>&1 < /dev/null &
    wait_ready
    python3 -m llmload load HOST=$HOST PROMPTS=random:1024:256:32 PROMPT_START=100000 USERS=16 REQUESTS=32 EFFORT=none OUT=/tmp/results/check 2>&1 | grep -E "Successful|Failed|THE SERVER|x http" ;;
grid)
    for name in calibration-1k calibration-4k; do
        before=$(grep -ci jit /tmp/vllm.log)
        python3 -m llmload sweep SCENARIO=bench/gpu/$name.yaml HOST=$HOST CACHE_RESET=on OUT=/tmp/results/$name METRICS_INTERVAL=1 2>&1 | tail -20
        log "$name: JIT lines during it: $before -> $(grep -ci jit /tmp/vllm.log)"
        cp /tmp/vllm.log /tmp/results/$name/vllm.log; pack $name
    done ;;
bench)
    export LLMLOAD_VLLM_BENCH="python3 -m vllm.entrypoints.cli.main bench serve --tokenizer $MODEL"
    for cell in "1 16" "16 128" "64 256"; do
        set -- $cell
        python3 -m llmload crosscheck HOST=$HOST PROMPTS=random:1024:256 USERS=$1 REQUESTS=$2 REPEATS=1 EFFORT=none \
            PROMPT_START=$((1000 + $1)) OUT=/tmp/results/bench/u$1 2>&1 | tail -25
    done
    pack bench ;;
tune)
    pkill -INT -f "vllm.entrypoints.openai.api_server" ; sleep 10; pkill -KILL -f "vllm.entrypoints.openai.api_server"
    for _ in $(seq 1 30); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . || break; sleep 1; done
    python3 -m llmload tune SERVE="$SERVE" GRID="max-num-batched-tokens=2048,8192 async-scheduling=off,on" \
        PROMPTS=random:1024:256:192 USERS=64 REQUESTS=192 EFFORT=none SEARCH=grid OUT=/tmp/results/tune 2>&1 | tail -60
    pack tune ;;
*) echo "unknown step $STEP"; exit 2 ;;
esac
