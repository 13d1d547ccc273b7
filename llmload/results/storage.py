"""Files of a run's folder: samples.jsonl (one RequestRecord a line) and summary.json.

Records are buffered in memory and appended by a background thread (a greenlet under Locust)
once a second, and on close, so nothing measured is lost when the run ends. Nothing here
rewrites a file that holds results.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson

from llmload.errors import ResultsError
from llmload.files import write_atomic
from llmload.options import bare_model_name
from llmload.results.summary import SUMMARY_SCHEMA_VERSION, Summary
from llmload.results.records import RequestRecord

__all__ = ["SAMPLES_FILE", "SUMMARY_FILE", "CONFIG_FILE", "CELL_FILE", "METRICS_FILE", "SCENARIO_FILE", "SampleWriter", "default_run_dir", "fresh_run_dir", "write_summary", "read_summary", "check_schema_version"]

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.json"
CELL_FILE = "cell.json"
"""A sweep cell is complete when this marker exists."""
METRICS_FILE = "server_metrics.jsonl"
SCENARIO_FILE = "scenario.json"


class SampleWriter:
    """Appends records to a samples.jsonl, off the request path."""

    def __init__(self, path: Path, flush_interval_s: float = 1.0) -> None:
        self.path = path
        self._pending: list[RequestRecord] = []
        self._interval_s = flush_interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, record: RequestRecord) -> None:
        self._pending.append(record)

    def flush(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            with self.path.open("ab") as f:
                f.write(b"".join(r.to_json_line() for r in batch))

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self._thread = threading.Thread(target=self._run, name="llmload-samples", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()


def default_run_dir(gpu: str, model: str, effort: str, users: int) -> Path:
    """results/<time>-<gpu>-<model>-<effort>-u<users>, the run folder when OUT is not given."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{stamp}-{gpu}-{bare_model_name(model) or 'model'}-{effort}-u{users}"


def fresh_run_dir(base: Path) -> Path:
    """``base`` if it holds no samples yet, else the first free ``base-2``, ``base-3``, ..."""
    candidate, n = base, 1
    while (candidate / SAMPLES_FILE).exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def write_summary(run_dir: Path, summary: Summary) -> Path:
    return write_atomic(run_dir / SUMMARY_FILE, orjson.dumps(summary.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")


def check_schema_version(data: dict[str, Any], path: Path) -> None:
    """Raise ResultsError when a summary was written by a newer suite (or is no summary at all)."""
    version = data.get("schema_version")
    if version != SUMMARY_SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema_version {version!r} is not {SUMMARY_SCHEMA_VERSION}, the one this suite "
                           "reads; read it with the suite that wrote it")


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A run's summary.json, its schema version checked."""
    path = run_dir / SUMMARY_FILE
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ResultsError(f"{path} does not exist: the run wrote no summary") from None
    except orjson.JSONDecodeError as e:
        raise ResultsError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: not a run summary")
    check_schema_version(data, path)
    return data
