"""The calibration's error on measured cells it was not fitted to (bench/RESULTS.md, "Calibration").

    nice -n 19 .venv/bin/python bench/calibration_bench.py > /tmp/calibration.md

For the H200 (gpt-oss-20b shape, bf16 dummy weights, vLLM 0.25) and the A100 (gpt-oss-120b, vLLM 0.11) measurements:

  repeats    the H200's second runs of concurrency 16 (suite and vLLM bench), predicted by a fit to the rest
  tuned      the A100's tuned runs (--max-num-batched-tokens 4096 or 8192, --async-scheduling), predicted by the fit
             to the baseline runs (the model has no async scheduling: it predicts them as synchronous)
  repeats, the other way  the first runs of concurrency 16 predicted by a fit to the rest (the second runs in it)
  leave-one-out  each operating point (concurrency x lengths) predicted by a fit to the others: the model carried to
             a load it never saw (the H200 has three operating points: 1, 16 and 256 users)

For the H100 (gpt-oss-20b shape, bf16 dummy weights, vLLM 0.25, measurements/h100-2026-12-06: 1k and 4k prompts x
users 1-256, each twice, cold):

  before     each cell as the rehearsal would have predicted it before the H100 was measured: the H200 fit carried to
             the H100 by published figures (llmload/calibrate/extrapolate.py), how every extrapolated profile is made
  repeats    the second run of each operating point predicted by a fit to the first runs
  lengths    the 4k-prompt cells predicted by a fit to the 1k-prompt cells, and the other way
  leave-one-out  as above: each of the 14 operating points predicted by a fit to the other 13

Then the server's own account of each run at 16 users, from its /metrics counters: the suite's runs scraped them
before and after (server_window.jsonl); vLLM bench's second run lies between the last scrape of the 256-user run and
the first of the suite's second run at 16 users, which is checked (its requests and tokens, exactly, in that gap).

Errors are (predicted - measured) / measured of request throughput, TTFT, TPOT and E2E: the client's medians where the
client saw them, the server's own means where the answers came in one burst (the H200 suite's folders). Each cell's
requests prefill only what its prefix-cache hit rate leaves uncached (llmload/calibrate/hitrate.py): 64 of 1,091
tokens cached on the H200, the chat frame, as its counters say; the A100 table's are assumed the same frame.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmload.calibrate.cells import Cell, read_cells  # noqa: E402
from llmload.calibrate.extrapolate import extrapolate  # noqa: E402
from llmload.calibrate.fit import Model, fit, held_out_predictions, predict, relative_error  # noqa: E402
from llmload.calibrate.hardware import PRIOR_FRONTEND, prior_step  # noqa: E402
from llmload.results.reconcile import ServerAccount, server_account  # noqa: E402
from llmload.results.records import read_records  # noqa: E402
from llmload.results.server_metrics import read_samples  # noqa: E402
from llmload.results.storage import SAMPLES_FILE, SERVER_WINDOW_FILE  # noqa: E402
from llmload.sim.replay import replay_closed_loop  # noqa: E402
from llmload.sim.profiles import load_profile  # noqa: E402

H200 = ROOT / "measurements" / "h200-2026-12-04"
H100 = ROOT / "measurements" / "h100-2026-12-06"
H100_SUSPECT = "4dfbb0adc84f"
"""The u1 1k cell's first run met a warm cache (measurements/README.md): left out, as bench/build_profiles.py does."""
A100 = ROOT / "measurements" / "a100-gpt-oss-120b-000-report.json"
METRICS = {"rps": "req/s", "ttft_median_ms": "TTFT median", "server_ttft_mean_ms": "TTFT mean (server)",
           "tpot_median_ms": "TPOT median", "server_itl_mean_ms": "ITL mean (server)", "e2e_median_ms": "E2E median"}


def _start(name: str) -> Model:
    base = load_profile(name)
    return Model(base.engine, prior_step(base.gpu, base.model, base.weights), PRIOR_FRONTEND)


def _rows(what: str, cells: list[Cell], predicted: dict[str, dict[str, float]]) -> list[str]:
    rows = []
    for cell in cells:
        if cell.name not in predicted:
            continue
        errors = [f"{METRICS[m]} {relative_error(predicted[cell.name][m], v) * 100:+.1f}%" for m, v in cell.observed.items()
                  if m in METRICS]
        rows.append(f"| {what} | {cell.name} | {'; '.join(errors)} |")
    return rows


def _summary(label: str, cells: list[Cell], predicted: dict[str, dict[str, float]]) -> str:
    errors = [abs(relative_error(predicted[c.name][m], v)) for c in cells if c.name in predicted
              for m, v in c.observed.items() if m in METRICS]
    within = sum(e <= 0.15 for e in errors)
    return f"| {label} | {len(errors)} | {within} | {sorted(errors)[len(errors) // 2] * 100:.1f}% | {max(errors) * 100:.1f}% |"


def _server_accounts() -> list[tuple[str, ServerAccount, float]]:
    """(run, the server's account of it, the client's mean E2E in ms) for the H200 runs at 16 users."""
    accounts = []
    for run in ("suite-c16-run1", "suite-c16-run2"):
        scrapes = read_samples(H200 / run / SERVER_WINDOW_FILE)
        client_e2e_s = [r.e2e_s for r in read_records(H200 / run / SAMPLES_FILE) if r.ok]
        accounts.append((run, server_account(scrapes[0], scrapes[-1]), 1e3 * sum(client_e2e_s) / len(client_e2e_s)))
    bench = json.loads((H200 / "vllm-bench" / "c16-run2.json").read_text())
    gap = server_account(read_samples(H200 / "suite-u256" / SERVER_WINDOW_FILE)[-1],
                         read_samples(H200 / "suite-c16-run2" / SERVER_WINDOW_FILE)[0])
    counted = (gap.requests, gap.prompt_tokens, gap.generation_tokens)
    if counted != (bench["completed"], bench["total_input_tokens"], bench["total_output_tokens"]):
        raise SystemExit(f"the server counted {counted} between the 256-user run and the suite's second run: not "
                         "vLLM bench's second run alone")
    accounts.append(("c16-run2 (vLLM bench)", gap, bench["mean_e2el_ms"]))
    return accounts


def _server_rows(model: Model, cell: Cell) -> list[str]:
    """The server's TTFT, queue and E2E beside the client's wait outside its clock, measured and as replayed."""
    rows = [f"| {run} | {a.mean_ttft_ms:.1f} | {a.mean_queue_ms:.1f} | {a.mean_e2e_ms:.1f} | {client_e2e_ms - a.mean_e2e_ms:.1f} |"
            for run, a, client_e2e_ms in _server_accounts()]
    runs = replay_closed_loop(model.limits, model.step, model.frontend, cell.users, cell.prompt_tokens, cell.output_tokens,
                              cell.cached_tokens(model.limits.block_size))
    ttft, outside = (1e3 * sum(values) / len(runs) for values in
                     ([r.server_ttft_s for r in runs], [r.engine_arrival_s - r.sent_s for r in runs]))
    e2e = 1e3 * sum(r.last_delivered_s - r.engine_arrival_s for r in runs) / len(runs)
    return rows + [f"| replay of the fit that held the second runs out | {ttft:.1f} | - | {e2e:.1f} | {outside:.1f} |"]


def _h100() -> list[tuple[str, list[Cell], dict[str, dict[str, float]]]]:
    """The H100 grid's protocols: (label, cells, predictions by cell name)."""
    paths = [str(cell) for grid in ("calibration-1k", "calibration-4k") for cell in sorted((H100 / grid / "cells").iterdir())
             if cell.name != H100_SUSPECT]
    cells, refused = read_cells(paths)
    if refused:
        raise SystemExit("cells refused: " + "; ".join(f"{r.cell}: {r.reason}" for r in refused))
    named = [replace(c, name=f"u{c.users} in{np.mean(c.prompt_tokens):.0f}" + (" (2)" if "repeat-2" in c.name else ""))
             for c in cells]
    start = _start("h100-gpt-oss-20b-bf16")
    h200 = load_profile("h200-gpt-oss-20b-bf16")
    before = extrapolate("h100", "gpt-oss-20b", "bf16-dummy", h200, h200)
    before_model = Model(before.engine, before.step, before.frontend)
    firsts = [c for c in named if not c.name.endswith("(2)")]
    seconds = [c for c in named if c.name.endswith("(2)")]
    by_firsts = fit(start, firsts)
    short = [c for c in named if np.mean(c.prompt_tokens) < 2000]
    long = [c for c in named if c not in short]
    by_short, by_long = fit(start, short), fit(start, long)
    return [
        ("H100, predicted before it was measured (the H200 fit extrapolated)", named,
         {c.name: predict(before_model, c) for c in named}),
        ("H100, repeats held out (second runs; fit: first runs)", seconds, {c.name: predict(by_firsts, c) for c in seconds}),
        ("H100, 4k prompts held out (fit: 1k)", long, {c.name: predict(by_short, c) for c in long}),
        ("H100, 1k prompts held out (fit: 4k)", short, {c.name: predict(by_long, c) for c in short}),
        ("H100, leave one operating point out", named, held_out_predictions(start, named)),
    ]


def main() -> int:
    started = time.monotonic()
    h200_paths = [H200 / "suite-c16-run1", H200 / "suite-c16-run2", H200 / "suite-u256", H200 / "vllm-bench" / "c1.json",
                  H200 / "vllm-bench" / "c16-run1.json", H200 / "vllm-bench" / "c16-run2.json"]
    (h200, h200_refused), (a100, a100_refused) = read_cells([str(p) for p in h200_paths]), read_cells([str(A100)])
    if h200_refused or a100_refused:
        raise SystemExit("cells refused: " + "; ".join(f"{r.cell}: {r.reason}" for r in h200_refused + a100_refused))
    h200_start, a100_start = _start("h200-gpt-oss-20b-bf16"), _start("a100-gpt-oss-120b")

    repeats = [c for c in h200 if c.name.endswith("run2")]
    rest = fit(h200_start, [c for c in h200 if c not in repeats])
    repeat_predictions = {c.name: predict(rest, c) for c in repeats}
    firsts = [c for c in h200 if c.name.endswith("run1")]
    other_way = fit(h200_start, [c for c in h200 if c not in firsts])
    first_predictions = {c.name: predict(other_way, c) for c in firsts}
    baseline = fit(a100_start, a100)  # fits the baseline cells only (the tuned ones are marked not fitted)
    tuned = [c for c in a100 if not c.fitted]
    tuned_predictions = {c.name: predict(baseline, c) for c in tuned}
    h200_loo = held_out_predictions(h200_start, h200)
    a100_loo = held_out_predictions(a100_start, a100)

    print("| protocol | figures | within 15% | median error | worst |")
    print("|---|---:|---:|---:|---:|")
    print(_summary("H200, repeats held out (c16 run 2 of the suite and of vLLM bench)", repeats, repeat_predictions))
    print(_summary("H200, repeats held out the other way (c16 run 1 of each)", firsts, first_predictions))
    print(_summary("A100, tuned runs held out (fit: baseline; async scheduling not modelled)", tuned, tuned_predictions))
    print(_summary("H200, leave one operating point out", h200, h200_loo))
    print(_summary("A100, leave one operating point out (baseline)", a100, a100_loo))
    h100_rows = _h100()
    for label, cells, predicted in h100_rows:
        print(_summary(label, cells, predicted))
    print()
    print("| protocol | cell | error of each figure |")
    print("|---|---|---|")
    for line in (_rows("H200 repeats", repeats, repeat_predictions) + _rows("H200 repeats, other way", firsts, first_predictions)
                 + _rows("A100 tuned", tuned, tuned_predictions)
                 + _rows("H200 leave-one-out", h200, h200_loo) + _rows("A100 leave-one-out", a100, a100_loo)
                 + [line for label, cells, predicted in h100_rows for line in _rows(label, cells, predicted)]):
        print(line)
    print()
    print("| H200, 16 users: the server's own account | TTFT mean ms | queue mean ms | E2E mean ms | client E2E - server E2E ms |")
    print("|---|---:|---:|---:|---:|")
    for line in _server_rows(rest, next(c for c in repeats if c.name == "c16-run2")):
        print(line)
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
