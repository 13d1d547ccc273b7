"""Files of a run's folder: samples.jsonl (one RequestRecord a line) and summary.json.

Records are buffered in memory and appended by a background thread (a greenlet under Locust)
every FLUSH_INTERVAL seconds, so a ``kill -9`` loses at most that much; on close they are
flushed and fsynced. A run killed before its summary gets one rebuilt from samples.jsonl,
marked partial. Nothing here rewrites a file that holds results.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import orjson

from llmload.errors import ResultsError
from llmload.system.files import write_atomic
from llmload.results.decode import check_schema_version, decode
from llmload.results.efforts import mixed_efforts
from llmload.results.generator import GeneratorCheck
from llmload.results.metrics import METRICS
from llmload.results.predicted import scaled_distribution, validation_words
from llmload.results.provenance import bare_model_name
from llmload.results.records import RequestRecord, read_records, tpot_s
from llmload.results.server_metrics import MetricsSample, read_samples
from llmload.results.slo import slos_of
from llmload.results.summary import SUMMARY_SCHEMA_VERSION, Summary, distribution, summarize

__all__ = ["SAMPLES_FILE", "SUMMARY_FILE", "CONFIG_FILE", "CELL_FILE", "METRICS_FILE", "SERVER_WINDOW_FILE", "SCENARIO_FILE", "CAPACITY_FILE", "CAPACITY_SCHEMA_VERSION", "LOCUST_FILES", "SampleWriter",
           "default_run_dir", "fresh_run_dir", "write_summary", "read_summary", "rebuild_summary",
           "older_summary_version", "recompute_summary"]

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.json"
CELL_FILE = "cell.json"
"""A sweep cell is complete when this marker exists."""
METRICS_FILE = "server_metrics.jsonl"
SERVER_WINDOW_FILE = "server_window.jsonl"
"""A run's two /metrics scrapes, just before its first request and after its last: the server's own account."""
SCENARIO_FILE = "scenario.json"
CAPACITY_FILE = "capacity.json"
"""`make capacity`'s answer and steps, in its OUT beside cells/."""
CAPACITY_SCHEMA_VERSION = 1
LOCUST_FILES = ("locust_stats.csv", "locust_failures.csv", "locust.html")
"""Locust's own tables, written once the test has stopped."""
RUN_END_MISSING = "the end of the run (streams in flight when it died left no record)"


class SampleWriter:
    """Appends records to a samples.jsonl, off the request path.

    Each record is serialised when it is added (a few µs, once per request), so the periodic flush only
    writes bytes: a flush that serialised a second's records at once would hold the event loop for
    milliseconds while streams wait to be read.
    """

    def __init__(self, path: Path, flush_interval_s: float = 1.0) -> None:
        self.path = path
        self._pending: list[bytes] = []
        self._interval_s = flush_interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, record: RequestRecord) -> None:
        self._pending.append(record.to_json_line())

    def add_lines(self, lines: bytes) -> None:
        """Records already serialised (samples.jsonl lines, e.g. a worker's batch)."""
        if lines:
            self._pending.append(lines if lines.endswith(b"\n") else lines + b"\n")

    def flush(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            with self.path.open("ab") as f:
                f.write(b"".join(batch))

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self._thread = threading.Thread(target=self._run, name="llmload-samples", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.flush()

    def close(self) -> None:
        """Stop the thread, write what is pending and sync the file to disk."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()
        with self.path.open("ab") as f:
            os.fsync(f.fileno())


def default_run_dir(gpu: str, model: str, effort: str, users: int) -> Path:
    """results/<time>-<gpu>-<model>-<effort>-u<users>, the run folder when OUT is not given (a mix: ``mix``)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    effort = effort.partition(":")[0]
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


def _run_folder(run_dir: Path) -> Path:
    if not run_dir.is_dir():
        raise ResultsError(f"{run_dir}: no such folder" if not run_dir.exists()
                           else f"{run_dir} is a file; give the run's folder (the one holding samples.jsonl)")
    return run_dir


def read_summary(run_dir: Path) -> Summary:
    """A run's summary.json, its schema version checked; ResultsError (one line) when the folder or the file is not one."""
    path = _run_folder(run_dir) / SUMMARY_FILE
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ResultsError(f"{path} does not exist: the run wrote no summary") from None
    except orjson.JSONDecodeError as e:
        raise _kept_aside(path, f"is not valid JSON ({e})") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise _kept_aside(path, "is not a run summary (no schema_version)")
    check_schema_version(data, path, SUMMARY_SCHEMA_VERSION)  # a newer suite's summary is read by that suite, not rebuilt
    try:
        return decode(Summary, _filled(data))
    except ResultsError as e:
        raise _kept_aside(path, f"is not a run summary ({e})") from None


def _filled(data: dict[str, Any]) -> dict[str, Any]:
    """A summary's JSON with what its version lacks and decode cannot default: the first ones had no slo list; a
    metric added to the metric table since the file was written reads as measured on no request."""
    if data.get("schema_version") == SUMMARY_SCHEMA_VERSION:
        return data
    none_measured = dataclasses.asdict(distribution([]))

    def every_metric(measures: Any) -> Any:  # what is not a mapping is left for decode to name
        return {**{m.summary: none_measured for m in METRICS}, **measures} if isinstance(measures, dict) else measures

    filled = {"slo": [], **every_metric(data)}
    if isinstance(filled.get("by_effort"), dict):
        filled["by_effort"] = {effort: every_metric(part) for effort, part in filled["by_effort"].items()}
    if isinstance(filled.get("predicted"), dict):  # a rehearsal's predicted times: none for a newer metric
        none_predicted = dataclasses.asdict(scaled_distribution(distribution([]), 1.0))
        old = filled["predicted"]
        unrecorded = {"status": "unvalidated", "method": "written by a suite that did not record its profile's validation"}
        filled["predicted"] = {**{m.summary: none_predicted for m in METRICS}, "scaled_by": old.get("speedup", 1.0),
                               "validated": False, "validation": validation_words(unrecorded), "model_error": {}, **old}
    return filled


def _kept_aside(path: Path, what: str) -> ResultsError:
    return ResultsError(f"{path} {what}; it is left as it is: move it aside, and `python -m llmload report "
                        f"{path.parent}` rebuilds it from {SAMPLES_FILE}")


def rebuild_summary(run_dir: Path) -> Summary:
    """The Summary of a run that died before writing one: from its samples.jsonl and config.json, marked partial."""
    samples = _run_folder(run_dir) / SAMPLES_FILE
    if not samples.is_file():
        raise ResultsError(f"{run_dir} holds neither {SUMMARY_FILE} nor {SAMPLES_FILE}: not a run folder")
    missing = [RUN_END_MISSING]
    try:
        config = orjson.loads((run_dir / CONFIG_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        config = None
    if not isinstance(config, dict):
        config, missing = {}, [*missing, CONFIG_FILE]
    missing += [name for name in LOCUST_FILES if not (run_dir / name).exists()]
    return dataclasses.replace(_summarize(_records(samples), config), partial=True, missing=missing)


def _records(samples: Path) -> list[RequestRecord]:
    try:
        return list(read_records(samples))
    except (ValueError, TypeError) as e:
        raise ResultsError(f"{samples} is not a samples file ({e})") from None


def _summarize(records: list[RequestRecord], config: dict[str, Any], generator: GeneratorCheck | None = None,
               window: Sequence[MetricsSample] = ()) -> Summary:
    """summarize, judged by the SLOs and effort mix of the run's recorded config (parsed once, here)."""
    return summarize(records, config, generator, window, slos=slos_of(config),
                     mix_efforts=mixed_efforts(str(config.get("effort", ""))))


def older_summary_version(run_dir: Path) -> int | None:
    """The schema version of the run's summary.json when an older suite wrote it and its samples.jsonl is there
    to compute it again; None otherwise (no summary, a current or newer one, or one that is not a summary)."""
    try:
        version = orjson.loads((run_dir / SUMMARY_FILE).read_bytes()).get("schema_version")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    older = isinstance(version, int) and not isinstance(version, bool) and version < SUMMARY_SCHEMA_VERSION
    return version if older and (run_dir / SAMPLES_FILE).is_file() else None


def recompute_summary(run_dir: Path) -> Summary:
    """An older suite's summary computed again by this one from the run's samples.jsonl and server_window.jsonl,
    with what only the old summary.json holds (config, the generator's state, how the run ended); the file is
    left as it is."""
    path = run_dir / SUMMARY_FILE
    try:
        old = decode(Summary, _filled(orjson.loads(path.read_bytes())))  # an older version lacks only fields with defaults
    except (OSError, orjson.JSONDecodeError, ResultsError) as e:
        raise _kept_aside(path, f"is not a run summary ({e})") from None
    window = run_dir / SERVER_WINDOW_FILE
    # An older suite gave answers sent in one event a TPOT of about 0: their TPOT is taken again by today's formula.
    records = [dataclasses.replace(r, tpot_s=tpot_s(r.e2e_s, r.ttft_s, r.completion_tokens, r.token_events))
               for r in _records(run_dir / SAMPLES_FILE)]
    summary = _summarize(records, old.config, old.generator, read_samples(window) if window.is_file() else ())
    return dataclasses.replace(summary, interrupted_by=old.interrupted_by, partial=old.partial, missing=old.missing,
                               stopped_early=old.stopped_early)
