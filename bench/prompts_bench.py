#!/usr/bin/env python3
"""Prompt-set benchmark: wall time of writing the three sets (3 x 5,000 prompts) from templates/.

    python bench/prompts_bench.py [--count 5000]

Runs what `make prompts` runs, into a temporary folder, and prints one Markdown row.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmload.promptsets.write import write_prompt_sets  # noqa: E402
from llmload.promptsets.tokens import harmony_encoding  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    args = parser.parse_args()
    harmony_encoding()  # the one-off tokenizer load (~1 s) is not part of the figure
    with tempfile.TemporaryDirectory() as out:
        start_s, cpu_start_s = time.perf_counter(), os.times()
        stats = write_prompt_sets(["2k", "4k", "8k"], args.count, 0, REPO / "templates", Path(out))
        wall_s = time.perf_counter() - start_s
        end = os.times()
    cpu_s = (end.user + end.system + end.children_user + end.children_system) - (
        cpu_start_s.user + cpu_start_s.system + cpu_start_s.children_user + cpu_start_s.children_system)
    prompts = sum(s.count for s in stats)
    worst = max(s.max_deviation_ratio for s in stats)
    print(f"| {datetime.date.today()} | {prompts} | {wall_s:.1f} | {cpu_s:.1f} | {prompts / wall_s:.0f} | {worst:.2%} | "
          f"{os.cpu_count()} cores, Python {platform.python_version()} |")


if __name__ == "__main__":
    main()
