"""tune.json and configs.csv: a tune's result, one record per server configuration, read back by the figures.

    1  2026-12-06: the first tunes.

Each configuration keeps what it ran (its command, environment, what its log says it ran with), its startup time,
its status (measured, or failed with its log's tail), its objective with the 95% interval, its difference from the
baseline with an interval and the verdict (beyond the run-to-run spread or not), and each workload cell's figures
(output and total tokens/s, mean TPOT, medians, cost) for the baseline-against-configuration table and the Pareto
frontier. A rehearsal's figures are predictions for the GPU its profile plays (``predicted``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from llmload.errors import ResultsError
from llmload.results.decode import check_schema_version, decode
from llmload.system.files import write_atomic, write_csv_atomic

__all__ = ["TUNE_FILE", "CONFIGS_FILE", "TUNE_SCHEMA_VERSION", "CellFigures", "ConfigResult", "TuneResult",
           "write_tune", "read_tune", "MEASURED"]

TUNE_FILE = "tune.json"
CONFIGS_FILE = "configs.csv"
TUNE_SCHEMA_VERSION = 1
MEASURED = "measured"


@dataclass(frozen=True)
class CellFigures:
    """One workload cell's figures on one configuration (a rehearsal's predicted for the GPU played)."""

    label: str
    key: str
    basis: str
    """``measured``, or a rehearsal's ``predicted for <gpu> (...)``."""
    users: float
    """Its load: USERS (closed loop), or RATE."""
    duration_s: float
    """Its load time on the server's clock (what the tune's BUDGET counts)."""
    output_throughput_tok_s: float | None
    output_throughput_tok_s_ci95: list[float] | None
    total_throughput_tok_s: float | None
    total_throughput_tok_s_ci95: list[float] | None
    tpot_mean_ms: float | None
    tpot_mean_ms_ci95: list[float] | None
    """From every request's TPOT (the mean's normal interval)."""
    ttft_median_ms: float | None
    tpot_median_ms: float | None
    usd_per_million_output_tokens: float | None
    usd_per_million_output_tokens_ci95: list[float] | None


@dataclass(frozen=True)
class ConfigResult:
    """One server configuration of the tune."""

    name: str
    slug: str
    settings: dict[str, str]
    command: list[str]
    env: dict[str, str]
    status: str
    """measured, failed to start, died mid-run, left by the search (its interval fell behind the leader's), not run."""
    reason: str | None = None
    log_tail: list[str] = field(default_factory=list)
    startup_s: float | None = None
    version: str | None = None
    effective: dict[str, Any] = field(default_factory=dict)
    not_modelled: list[str] = field(default_factory=list)
    """A rehearsal: flags and variables the built-in target does not play (they predict the baseline)."""
    notes: list[str] = field(default_factory=list)
    """What the client sees differently (--stream-interval), and what the server's log says of a flag."""
    objective: float | None = None
    objective_ci95: list[float | None] | None = None
    vs_baseline_pct: float | None = None
    vs_baseline_ci95: list[float | None] | None = None
    beyond_noise: bool | None = None
    capacity: float | None = None
    capacity_ci95: list[float | None] | None = None
    rungs: int = 0
    load_s: float = 0.0
    cells: list[CellFigures] = field(default_factory=list)


@dataclass(frozen=True)
class TuneResult:
    """A tune: every configuration, the ranking, and why the search stopped."""

    objective: str
    """capacity, throughput or cost."""
    unit: str
    search: str
    slo: str
    gpus: int
    rehearsal: bool
    label: str
    """``measured`` or the rehearsal's ``predicted for <gpu> (...)``."""
    configurations: list[ConfigResult]
    """The baseline first."""
    ranking: list[str]
    best: str | None
    best_beyond_noise: bool | None
    """The best leads every other configuration beyond its interval."""
    stopped_because: str
    load_s: float
    budget_s: float | None
    schema_version: int = TUNE_SCHEMA_VERSION


def _row(config: ConfigResult) -> dict[str, Any]:
    cells = config.cells
    ci = config.objective_ci95 or [None, None]
    return {"name": config.name, **{f"setting {k}": v for k, v in config.settings.items()}, "status": config.status,
            "objective": config.objective, "objective_lo": ci[0], "objective_hi": ci[1],
            "vs_baseline_pct": config.vs_baseline_pct, "beyond_noise": config.beyond_noise, "capacity": config.capacity,
            "output_tok_s": cells[0].output_throughput_tok_s if len(cells) == 1 else None,
            "ttft_median_ms": cells[0].ttft_median_ms if len(cells) == 1 else None,
            "tpot_median_ms": cells[0].tpot_median_ms if len(cells) == 1 else None,
            "startup_s": config.startup_s, "load_s": config.load_s, "not_modelled": " ".join(config.not_modelled),
            "reason": config.reason}


def write_tune(out: Path, result: TuneResult) -> Path:
    """OUT/tune.json and OUT/configs.csv (one row per configuration), both whole or not at all."""
    write_csv_atomic(out / CONFIGS_FILE, [_row(c) for c in result.configurations])
    return write_atomic(out / TUNE_FILE, orjson.dumps(asdict(result), option=orjson.OPT_INDENT_2) + b"\n")


def read_tune(out: Path) -> TuneResult:
    """OUT/tune.json; ResultsError (one line) when it is missing or not a tune's."""
    path = Path(out) / TUNE_FILE
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ResultsError(f"{path} does not exist: not a tune's folder") from None
    except orjson.JSONDecodeError as e:
        raise ResultsError(f"{path} is not valid JSON ({e})") from None
    check_schema_version(data, path, TUNE_SCHEMA_VERSION)
    return decode(TuneResult, data)
