"""A sweep's own files read back: the cells scenario.json plans, a finished cell's cell.json, capacity.json.

Only what readers use is typed here; the files hold more (see llmload/sweep/runner.py and capacity.py, their writers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from llmload.errors import ResultsError
from llmload.results.decision import CapacityPoint
from llmload.results.decode import check_schema_version, decode
from llmload.results.server_metrics import MetricsSummary
from llmload.results.slo import SloResult
from llmload.results.storage import CAPACITY_FILE, CAPACITY_SCHEMA_VERSION, CELL_FILE, SCENARIO_FILE

__all__ = ["CELL_SCHEMA_VERSION", "PlannedCell", "ScenarioRecord", "CellMarker", "Step", "CapacityResult", "read_json",
           "read_scenario", "read_cell_marker", "read_capacity"]

CELL_SCHEMA_VERSION = 1
T = TypeVar("T")


@dataclass(frozen=True)
class PlannedCell:
    """One cell as scenario.json lists it."""

    key: str
    index: int | None = None
    label: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    server: dict[str, str] = field(default_factory=dict)
    """The scenario's server block with this cell's {KEY} placeholders filled in: what the study declares."""


@dataclass(frozen=True)
class ScenarioRecord:
    """scenario.json: the scenario as the sweep ran it."""

    name: str = ""
    description: str = ""
    server: dict[str, str] = field(default_factory=dict)
    cells: list[PlannedCell] = field(default_factory=list)


@dataclass(frozen=True)
class CellMarker:
    """cell.json: written when a cell finished (its presence marks the cell complete)."""

    key: str
    index: int | None
    label: str
    settings: dict[str, str]
    repeat: int = 1
    """Which run of the cell (REPEATS): 1, then 2, 3, ..."""
    declared_server: dict[str, str] = field(default_factory=dict)
    server_metrics: MetricsSummary | None = None
    """The server's /metrics series over the cell, summarised."""
    schema_version: int = CELL_SCHEMA_VERSION


@dataclass(frozen=True)
class Step:
    """One step of a capacity search: a load and whether its run met every SLO (capacity.json's ``steps``)."""

    load: float
    """USERS or RATE (requests/s)."""
    passed: bool
    certain: bool
    """Every SLO's 95% interval lies on its verdict's side of the limit."""
    key: str = ""
    stopped_early: str | None = None
    requests_ok: int = 0
    slo: tuple[SloResult, ...] = ()


@dataclass(frozen=True)
class CapacityResult:
    """capacity.json: the largest load meeting the SLO, its interval, why the search stopped, every step."""

    by: str
    """users or rate: the answer is ``max_users`` or ``max_rate``."""
    stopped_because: str
    steps: list[Step]
    max_users: int | None = None
    max_users_ci95: list[int | None] | None = None
    max_rate: float | None = None
    max_rate_ci95: list[float | None] | None = None
    at_capacity: CapacityPoint | None = None
    """The run at the capacity found: its rates (predicted for the GPU in a rehearsal) and its cost."""
    schema_version: int = CAPACITY_SCHEMA_VERSION

    @property
    def answer(self) -> float | None:
        return self.max_users if self.by == "users" else self.max_rate

    @property
    def answer_ci95(self) -> tuple[float | None, float | None]:
        low, high = (self.max_users_ci95 if self.by == "users" else self.max_rate_ci95) or (None, None)
        return low, high


def read_json(path: Path) -> Any:
    """A JSON file's contents; ResultsError (one line) when it cannot be read or is not JSON."""
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise ResultsError(f"{path}: not valid JSON ({e})") from None
    except OSError as e:
        raise ResultsError(f"{path}: cannot be read ({e.strerror})") from None


def _read_record(cls: type[T], path: Path, what: str, version: int | None = None) -> T:
    """``path`` decoded into ``cls``, its schema version checked when ``version`` is given; ResultsError (one line) else."""
    data = read_json(path)
    if version is not None:
        check_schema_version(data, path, version)
    try:
        return decode(cls, data)
    except ResultsError as e:
        raise ResultsError(f"{path}: not {what} ({e})") from None


def read_scenario(sweep_dir: Path) -> ScenarioRecord:
    """A sweep's scenario.json; an empty record when it has none (cells found on disk only)."""
    path = sweep_dir / SCENARIO_FILE
    return _read_record(ScenarioRecord, path, "a scenario record") if path.exists() else ScenarioRecord()


def read_cell_marker(cell_dir: Path) -> CellMarker:
    """A finished cell's cell.json, its schema version checked."""
    return _read_record(CellMarker, cell_dir / CELL_FILE, "a cell marker", CELL_SCHEMA_VERSION)


def read_capacity(out: Path) -> CapacityResult:
    """A `make capacity` OUT's capacity.json, its schema version checked."""
    return _read_record(CapacityResult, out / CAPACITY_FILE, "a capacity result", CAPACITY_SCHEMA_VERSION)
