#!/usr/bin/env python3
"""tiny-gptoss under sampling: well-formed share and median reasoning per effort, through `llmload load`.

    python bench/gptoss_format_bench.py HOST [--requests 1000] [--prompts builtin PATH ...] [--efforts low ...]

HOST serves tiny-gptoss (make serve-vllm-cpu). Each effort and prompt set gets one run at temperature
1.0 and top_p 1.0; a request is well formed when it succeeded, reasoned on the analysis channel, then
answered on the final channel, and finished with `stop`. Prints one Markdown row per run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmload.results.records import RequestRecord, read_records  # noqa: E402


def well_formed(record: RequestRecord) -> bool:
    """Reasoning, then a visible answer, then `stop`, with the server's own reasoning count."""
    return (record.ok and record.finish_reason == "stop" and record.answered
            and record.reasoning_source == "server" and (record.reasoning_tokens or 0) > 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--prompts", nargs="+", default=["builtin"])
    parser.add_argument("--efforts", nargs="+", default=["low", "medium", "high"], choices=["low", "medium", "high"])
    args = parser.parse_args()
    print("| prompts | effort | requests | well formed | median reasoning tokens |\n|---|---|---:|---:|---:|")
    for prompts in args.prompts:
        for effort in args.efforts:
            with tempfile.TemporaryDirectory() as out:
                subprocess.run([sys.executable, "-m", "llmload", "load", f"HOST={args.host}", f"OUT={out}/run",
                                f"PROMPTS={prompts}", f"EFFORT={effort}", "TEMPERATURE=1.0",
                                'EXTRA_BODY={"top_p": 1.0}', f"REQUESTS={args.requests}", f"USERS={args.users}"],
                               cwd=REPO, check=True, capture_output=True)
                records = [r for r in read_records(Path(out) / "run" / "samples.jsonl") if not r.warmup]
            good = sum(map(well_formed, records))
            median = statistics.median(r.reasoning_tokens or 0 for r in records)
            print(f"| {Path(prompts).name} | {effort} | {len(records)} | {good / len(records):.2%} | {median:g} |",
                  flush=True)


if __name__ == "__main__":
    main()
