"""How long `python -m plots figures` (every figure, PNG and SVG, plus report.html) takes for a full
90-cell study (scenarios/h100-grid.yaml's cells).

The results folder is synthetic but in the real formats: one real cell is measured first (a 1-cell
sweep against the built-in target, not timed), then its files are copied into each of the 90 cells
with the cell's settings, request counts that grow with users (as 120 s of a closed loop gives), output
token counts that grow with effort (every record's ITL list as long as its tokens, as the real files
are), 120 server-metrics samples a cell, and summary numbers rewritten to match.

    python bench/figures_bench.py [--keep DIR] [--runs 1]

Prints a Markdown row: date, cells, seconds (the best of --runs), samples.jsonl MB in all.
Goal: at most 10 s on the 2-core machine of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmload.results.efforts import mixed_efforts  # noqa: E402
from llmload.results.slo import slos_of  # noqa: E402
from llmload.results.summary import summarize  # noqa: E402
from llmload.results.records import read_records  # noqa: E402
from llmload.sweep.scenarios import load_scenario  # noqa: E402
from llmload.results.server_metrics import read_samples, summarize_samples  # noqa: E402

SEED_SCENARIO = """
name: bench-seed
server: {engine: llmload-sim, gpu: h100}
defaults: {DURATION: 2s, MAX_TOKENS: 40, PROMPTS: builtin, MODEL: gpt-oss-20b, EFFORT: low}
grid: {USERS: [2]}
"""
EFFORT_TOKENS = {"low": 300, "medium": 900, "high": 2400}
MODEL_SPEED = {"gpt-oss-20b": 1.0, "gpt-oss-120b": 1.6}
PROMPT_TOKENS = {"2k": 2000, "4k": 4000, "8k": 8000}


def seed_cell(work: Path) -> Path:
    scenario = work / "seed.yaml"
    scenario.write_text(SEED_SCENARIO)
    done = subprocess.run([sys.executable, "-m", "llmload", "sweep", f"SCENARIO={scenario}", f"OUT={work / 'seed'}", "SPEEDUP=4",
                           "METRICS_INTERVAL=0.2"], cwd=REPO, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"error: the seed sweep failed:\n{done.stdout}{done.stderr}")
    return next(d for d in (work / "seed" / "cells").iterdir() if (d / "cell.json").exists())


def build(out: Path, seed: Path) -> float:
    """The 90-cell folder; returns the samples.jsonl megabytes written."""
    scenario = load_scenario(REPO / "scenarios" / "h100-grid.yaml")
    template = next(r for r in read_records(seed / "samples.jsonl") if r.ok)
    metrics = read_samples(seed / "server_metrics.jsonl")[-1]
    config = orjson.loads((seed / "summary.json").read_bytes())["config"]
    rng = random.Random(0)
    (out / "cells").mkdir(parents=True)
    written = 0
    for cell in scenario.cells:
        s = cell.settings
        users, effort, model = int(s["USERS"]), s["EFFORT"], s["MODEL"]
        d = out / "cells" / cell.key
        d.mkdir()
        tokens_mean = EFFORT_TOKENS[effort] * (0.8 if model == "gpt-oss-120b" else 1.0)
        itl_s = 0.004 * MODEL_SPEED[model] * (1 + 0.08 * users)
        ttft_s = 0.05 * PROMPT_TOKENS[s["PROMPTS"]] / 2000 * (1 + 0.2 * users)
        records, clock = [], 1000.0
        for n in range(12 * users):
            out_tokens = max(8, int(rng.gauss(tokens_mean, tokens_mean * 0.3)))
            e2e = ttft_s + itl_s * (out_tokens - 1)
            reasoning = int(out_tokens * {"low": 0.5, "medium": 0.75, "high": 0.9}[effort])
            records.append(replace(template, request_id=f"r{n}", start_monotonic_s=clock + (n // users) * e2e, e2e_s=e2e,
                                   ttft_s=ttft_s, ttfvt_s=ttft_s + itl_s * reasoning, tpot_s=itl_s,
                                   itl_s=[round(rng.uniform(0.5, 1.5) * itl_s, 6) for _ in range(out_tokens - 1)],
                                   prompt_tokens=PROMPT_TOKENS[s["PROMPTS"]], completion_tokens=out_tokens,
                                   reasoning_tokens=reasoning, answered=True, finish_reason="stop"))
        data = b"".join(r.to_json_line() for r in records)
        (d / "samples.jsonl").write_bytes(data)
        written += len(data)
        series = [asdict(replace(metrics, t_s=float(t), running=float(min(users, t % 30 + 1)), waiting=0.0,
                                 kv_cache_usage=min(1.0, 0.002 * users * (1 + t % 10)))) for t in range(120)]
        (d / "server_metrics.jsonl").write_bytes(b"".join(orjson.dumps({"schema_version": 1, **row}) + b"\n" for row in series))
        cfg = {**config, "gpu": "h100", "model": f"openai/{model}", "effort": effort, "users": users, "prompts": s["PROMPTS"],
               "max_tokens": 0, "out": str(d)}
        summary = summarize(records, cfg, slos=slos_of(cfg), mix_efforts=mixed_efforts(effort))
        (d / "summary.json").write_bytes(orjson.dumps(summary.to_dict(), option=orjson.OPT_INDENT_2))
        marker = {"schema_version": 1, "index": cell.index, "key": cell.key, "label": cell.label, "settings": cell.settings,
                  "server": {**cell.server, "version": "bench"}, "finished_unix_s": time.time(),
                  "server_metrics": asdict(summarize_samples([replace(metrics, **{k: v for k, v in r.items() if k != "schema_version"})
                                                              for r in series]))}
        (d / "cell.json").write_bytes(orjson.dumps(marker, option=orjson.OPT_INDENT_2))
    (out / "scenario.json").write_bytes(orjson.dumps({"name": scenario.name, "description": scenario.description,
                                                      "path": str(scenario.path), "server": scenario.server,
                                                      "cells": [asdict(c) for c in scenario.cells]}, option=orjson.OPT_INDENT_2))
    return written / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="build the folder here (kept) instead of a temporary one")
    parser.add_argument("--runs", type=int, default=1, help="time the figures this many times, report the best")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="figures-bench-") as tmp:
        work = Path(tmp)
        results = args.keep or work / "results"
        if results.exists():
            sys.exit(f"error: {results} exists; give a new --keep folder")
        megabytes = build(results, seed_cell(work))
        best = None
        for _ in range(max(1, args.runs)):
            shutil.rmtree(results / "figures", ignore_errors=True)
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "plots", "figures", str(results)], cwd=REPO, capture_output=True, text=True)
            elapsed = time.perf_counter() - started
            if done.returncode != 0:
                sys.exit(f"error: plots failed: {done.stderr.strip()}")
            best = elapsed if best is None else min(best, elapsed)
        report_mb = (results / "report.html").stat().st_size / 1e6
        print("| date | cells | seconds (figures + report.html) | samples.jsonl MB | report.html MB |")
        print("|---|---:|---:|---:|---:|")
        print(f"| {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | 90 | {best:.2f} | {megabytes:.0f} | {report_mb:.1f} |")
        print(done.stdout.strip().splitlines()[0], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
