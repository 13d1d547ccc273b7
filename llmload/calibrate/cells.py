"""Measured cells a profile is fitted to: one load on a real server, its workload and what it measured.

Read from results folders this suite wrote against a real server (a run, a sweep's or a capacity search's
cells), from ``vllm bench serve --save-result`` JSON files, and from measurement tables transcribed from reports
(a cells file: llmload/data/measurements/). A rehearsal's results are refused: a profile fitted to the built-in
target's own output would only return the profile it played.

A run whose answers came in one burst (vLLM's harmony parser holds back the whole answer of a model with dummy
weights) has no client TTFT or TPOT worth the name: its cell uses the server's own TTFT and inter-token latency
(server_window.jsonl, in summary.json's server_vs_client) and the client's E2E and throughput.

Each cell carries its prefix-cache hit rate and where it came from (hitrate.py); a cell whose rate cannot be accounted
for is refused with the reason, and the others are read on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from llmload.errors import ConfigError
from llmload.results.provenance import is_rehearsal, served_by_of
from llmload.results.records import read_records
from llmload.results.storage import SAMPLES_FILE, SUMMARY_FILE, older_summary_version, read_summary, recompute_summary

from .hitrate import Refused, bench_hit_rate, cached_tokens, run_hit_rate, table_hit_rate

__all__ = ["Cell", "METRICS", "read_cells", "burst_answers", "lengths"]

METRICS = ("rps", "ttft_median_ms", "tpot_median_ms", "e2e_median_ms", "server_ttft_mean_ms", "server_itl_mean_ms")
"""What a cell may have measured (and a replay predicts): requests/s; client TTFT, TPOT, E2E medians; the server's means."""
MEASUREMENTS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Cell:
    """One measured load: closed-loop ``users`` sending ``len(prompt_tokens)`` requests, and what was measured."""

    name: str
    source: str
    users: int
    prompt_tokens: tuple[int, ...]
    """As the server counted them (chat template included), per request in send order."""
    output_tokens: tuple[int, ...]
    observed: dict[str, float]
    hit_rate: float
    """The share of its prompt tokens the server's prefix cache held (hits over queries, in tokens)."""
    hit_rate_source: str
    """Where ``hit_rate`` comes from: the server's counters, a declaration beside a bench file, a table."""
    engine: dict[str, int] = field(default_factory=dict)
    """Server limits that differ from the profile's (e.g. max_num_batched_tokens of a tuned run)."""
    fitted: bool = True
    """False: predicted and reported, never fitted (a configuration the model lacks, e.g. async scheduling)."""
    note: str = ""

    @property
    def group(self) -> str:
        """The operating point: runs of the same load, share cached and limits are held out together."""
        return (f"u{self.users}/in{np.mean(self.prompt_tokens):.0f}/out{np.mean(self.output_tokens):.0f}"
                f"/hit{self.hit_rate:.2f}/{sorted(self.engine.items())}")

    def cached_tokens(self, block_size: int) -> tuple[int, ...]:
        """Each request's cached prompt tokens: ``hit_rate`` of its prompt, down to whole blocks of ``block_size``."""
        return cached_tokens(self.hit_rate, self.prompt_tokens, block_size)


def _bad(path: Path, why: str) -> ConfigError:
    return ConfigError(f"RESULTS: {path}: {why}")


def read_cells(paths: list[str]) -> tuple[list[Cell], list[Refused]]:
    """Every cell in ``paths`` (folders or JSON files), in the order given, and the cells refused for want of a hit
    rate; ConfigError (one line) on the first bad input, or when ``paths`` hold no cell at all."""
    read: list[Cell | Refused] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            read += _read_folder(path)
        elif path.is_file():
            read += _read_json_file(path)
        else:
            raise _bad(path, "no such folder or file")
    if not read:
        raise ConfigError("RESULTS holds no measured cell; give results folders of runs against a real server")
    return [c for c in read if isinstance(c, Cell)], [c for c in read if isinstance(c, Refused)]


def _read_folder(path: Path) -> list[Cell | Refused]:
    if (path / SUMMARY_FILE).exists() or (path / SAMPLES_FILE).exists():
        return [_run_cell(path)]
    runs = sorted(d for d in (path / "cells").glob("*") if (d / SUMMARY_FILE).exists()) if (path / "cells").is_dir() else []
    if not runs:
        raise _bad(path, "not a results folder (no summary.json, no cells/<key>/summary.json)")
    return [_run_cell(d) for d in runs]


def burst_answers(summary: Any) -> bool:
    """Every answer came in one burst: no inter-token gap although requests got several tokens."""
    delivery = getattr(summary, "delivery", None)
    if delivery is not None and delivery.requests:
        return delivery.every_answer_in_one_event
    return summary.itl_ms.count == 0 and (summary.output_tokens.mean or 0) > 1


def _run_cell(path: Path) -> Cell | Refused:
    """A run of this suite against a real server."""
    summary = recompute_summary(path) if older_summary_version(path) else read_summary(path)  # the H200 runs' is v1
    config = summary.config
    served = served_by_of(config)
    if served is None:
        raise _bad(path, "says nothing of what served it (results older than served_by); calibrate needs a real server's")
    if is_rehearsal(served):
        raise _bad(path, "is a rehearsal on the built-in target (served_by.rehearsal): a profile fitted to the "
                         "simulator's own output is circular; give runs against a real server")
    if config.get("rate"):
        raise _bad(path, "is an open-loop run (RATE); calibrate reads closed-loop runs (USERS)")
    records = sorted((r for r in read_records(path / SAMPLES_FILE) if not r.warmup), key=lambda r: r.start_monotonic_s)
    ok = [r for r in records if r.ok and r.prompt_tokens and r.completion_tokens]
    if not ok:
        raise _bad(path, "has no successful request with token counts")
    mean_prompt = round(float(np.mean([r.prompt_tokens for r in ok])))
    mean_output = round(float(np.mean([r.completion_tokens for r in ok])))
    prompts = tuple(r.prompt_tokens if r.ok and r.prompt_tokens else mean_prompt for r in records)
    outputs = tuple(r.completion_tokens if r.ok and r.completion_tokens else mean_output for r in records)
    observed = {"rps": summary.rps, "e2e_median_ms": summary.response_time_ms.median}
    account = summary.server_vs_client
    if burst_answers(summary):
        if account is None or account.server_mean_ttft_ms is None or account.server_mean_itl_ms is None:
            raise _bad(path, "answers came in one burst and the server's own TTFT and ITL are missing (server_window.jsonl)")
        observed |= {"server_ttft_mean_ms": account.server_mean_ttft_ms, "server_itl_mean_ms": account.server_mean_itl_ms}
        note = "answers came in one burst: the server's own TTFT and ITL"
    else:
        observed |= {"ttft_median_ms": summary.ttft_ms.median, "tpot_median_ms": summary.tpot_ms.median}
        note = ""
    hit = run_hit_rate(summary, str(path))
    if isinstance(hit, Refused):
        return hit
    users = int(config.get("users") or 1)
    return Cell(name=path.name, source=str(path), users=min(users, len(records)), prompt_tokens=prompts,
                output_tokens=outputs, observed={k: float(v) for k, v in observed.items() if v is not None},
                hit_rate=hit.rate, hit_rate_source=hit.source, note=note)


def _read_json_file(path: Path) -> list[Cell | Refused]:
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise _bad(path, f"not valid JSON ({e})") from None
    if isinstance(data, dict) and "request_throughput" in data:
        return [_bench_cell(path, data)]
    if isinstance(data, dict) and data.get("kind") == "llmload.measurements":
        return _table_cells(path, data)
    raise _bad(path, "neither vLLM bench's --save-result JSON nor a measurements file (kind: llmload.measurements)")


def _bench_cell(path: Path, data: dict[str, Any]) -> Cell | Refused:
    """``vllm bench serve --save-result``: fixed-length requests at --max-concurrency (none: all at once)."""
    try:
        requests = int(data["completed"]) + int(data.get("failed") or 0)
        if data.get("request_rate") not in ("inf", None, math.inf):
            raise _bad(path, f"request_rate {data['request_rate']}: calibrate reads closed-loop loads (request rate inf)")
        prompts = data.get("input_lens") or [round(data["total_input_tokens"] / data["completed"])] * requests
        outputs = data.get("output_lens") or [round(data["total_output_tokens"] / data["completed"])] * requests
        observed = {"rps": data["request_throughput"], "ttft_median_ms": data["median_ttft_ms"],
                    "tpot_median_ms": data["median_tpot_ms"], "e2e_median_ms": data.get("median_e2el_ms")}
    except (KeyError, TypeError, ZeroDivisionError) as e:
        raise _bad(path, f"vLLM bench result without {e}") from None
    hit = bench_hit_rate(path)
    if isinstance(hit, Refused):
        return hit
    users = int(data.get("max_concurrency") or requests)
    return Cell(name=path.stem, source=str(path), users=users, prompt_tokens=tuple(int(p) for p in prompts),
                output_tokens=tuple(int(o) for o in outputs),
                observed={k: float(v) for k, v in observed.items() if v is not None},
                hit_rate=hit.rate, hit_rate_source=hit.source,
                note="vLLM bench: TTFT at its first chunk with choices (the role chunk)")


def lengths(spec: Any, count: int, seed: int, where: str) -> tuple[int, ...]:
    """Per-request token counts from a table's description: a number (every request), or a lognormal of ``mean``
    and ``sigma`` clipped to [min, max] (the mean matched after clipping): reports give totals, not each request."""
    if isinstance(spec, (int, float)):
        return (int(spec),) * count
    try:
        mean, sigma, low, high = float(spec["mean"]), float(spec.get("sigma", 0)), int(spec.get("min", 1)), int(spec["max"])
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{where}: token counts need mean, max (and sigma, min): {e}") from None
    if sigma == 0:
        return (int(round(min(max(mean, low), high))),) * count
    draws = np.random.default_rng(seed).standard_normal(count)
    lo, hi = math.log(max(low, 1)) - 5 * sigma, math.log(high) + 5 * sigma
    for _ in range(60):  # bisect the log-mean so the clipped sample's mean is the reported one
        mu = (lo + hi) / 2
        if np.clip(np.exp(mu + sigma * draws), low, high).mean() < mean:
            lo = mu
        else:
            hi = mu
    values = np.rint(np.clip(np.exp((lo + hi) / 2 + sigma * draws), low, high)).astype(int)
    return tuple(int(v) for v in values)


def _table_cells(path: Path, data: dict[str, Any]) -> list[Cell | Refused]:
    """A measurements file: cells transcribed from a report, each with its workload and what was measured."""
    if data.get("schema_version") != MEASUREMENTS_SCHEMA_VERSION:
        raise _bad(path, f"schema_version {data.get('schema_version')!r} is not {MEASUREMENTS_SCHEMA_VERSION}")
    frame = int(data.get("chat_frame_tokens", 0))
    cells: list[Cell | Refused] = []
    for index, row in enumerate(data.get("cells") or []):
        where = f"RESULTS: {path}: cells[{index}]"
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: not a JSON object")
        hit = table_hit_rate(row, data, f"{path}: cells[{index}] ({row.get('name', index)})")
        if isinstance(hit, Refused):
            cells.append(hit)
            continue
        try:
            requests, users = int(row["requests"]), int(row.get("concurrency") or row["requests"])
            # One seed per side, not per cell: runs of one data set (vLLM bench samples it with seed 0) draw alike.
            prompts = lengths(row["prompt_tokens"], requests, 1, where)
            outputs = lengths(row["output_tokens"], requests, 2, where)
            observed = {k: float(v) for k, v in row["observed"].items() if k in METRICS}
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"{where}: {e!r} is missing or malformed") from None
        cells.append(Cell(name=str(row.get("name", index)), source=f"{path}: {data.get('source', '')}".strip(": "),
                          users=users, prompt_tokens=tuple(p + frame for p in prompts), output_tokens=outputs,
                          observed=observed, hit_rate=hit.rate, hit_rate_source=hit.source,
                          engine={k: int(v) for k, v in (row.get("engine") or {}).items()},
                          fitted=bool(row.get("fitted", True)), note=str(row.get("note", ""))))
    if not cells:
        raise _bad(path, "lists no cells")
    return cells
