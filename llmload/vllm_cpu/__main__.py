"""make serve-vllm-cpu / stop-vllm-cpu / vllm-bench: `python -m llmload.vllm_cpu serve MODEL=tiny-gptoss PORT=8000`.

`python -m llmload.vllm_cpu bench ARGS` runs vLLM's own `vllm bench serve ARGS` from the vLLM venv, offline.
"""

from __future__ import annotations

import argparse
import sys

from llmload.errors import ConfigError
from llmload.options import VLLM_CPU_OPTIONS
from llmload.settings import add_suite_options, settings_to_argv
from llmload.vllm_cpu.launcher import MODELS, ensure_model, run_bench, start, stop


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m llmload.vllm_cpu")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="build the model if needed, start vLLM, wait for /health")
    add_suite_options(serve, table=VLLM_CPU_OPTIONS)
    build = commands.add_parser("build", help="install the vLLM venv and build models into the cache")
    build.add_argument("--model", choices=MODELS, action="append", required=True)
    halt = commands.add_parser("stop", help="stop the server started on PORT")
    add_suite_options(halt, table=tuple(o for o in VLLM_CPU_OPTIONS if o.key == "PORT"))
    commands.add_parser("bench", help="vLLM's `vllm bench serve` with the words that follow, offline")
    try:
        if argv[:1] == ["bench"]:  # every later word is vLLM's own: parsing them here would take --help and the like
            return run_bench(argv[1:])
        args = parser.parse_args(settings_to_argv(argv, VLLM_CPU_OPTIONS))
        if args.command == "serve":
            if args.model and args.model not in MODELS:
                raise ConfigError(f"MODEL={args.model} is not a tiny local model; choose {' or '.join(MODELS)}")
            server = start(args.model or MODELS[0], args.port)
            print(f"vLLM serving {server.model} at {server.base_url} (pid {server.pid}, log {server.log}); "
                  f"stop it with: make stop-vllm-cpu PORT={server.port}")
        elif args.command == "build":
            for model in args.model:
                print(f"{model}: {ensure_model(model)}")
        elif not stop(args.port):
            print(f"no vLLM CPU server was running on port {args.port}")
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
