"""Result files read back into typed records: one decoder, schema versions checked, misnamed metrics refused."""

from dataclasses import dataclass, field

import orjson
import pytest

from factories import make_record
from llmload.errors import ResultsError
from llmload.results.decode import decode
from llmload.results.efforts import mixed_efforts
from llmload.results.generator import ProcessLoad, check
from llmload.results.server_metrics import MetricsSample
from llmload.results.slo import parse_slos
from llmload.results.storage import SUMMARY_FILE, read_summary, write_summary
from llmload.results.summary import SUMMARY_SCHEMA_VERSION, Summary, metric_ci95, metric_value, summarize
from llmload.results.sweepfiles import CellMarker, read_cell_marker, read_scenario

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


def _record(i: int, effort: str):
    start_s = 100.0 + 0.25 * i
    return make_record(request_id=f"r{i}", start_unix_s=1.7e9 + start_s, start_monotonic_s=start_s, e2e_s=1.0 + 0.01 * i,
                       ttft_s=0.2, ttfvt_s=0.5, tpot_s=0.8 / 9, itl_s=[0.1] * 9, prompt_tokens=40, completion_tokens=10,
                       reasoning_tokens=4, finish_reason="stop", answered=True, effort=effort,
                       scheduled_monotonic_s=start_s - 0.001, slot_wait_s=0.0, error="timeout" if i == 7 else None)


def _full_summary() -> Summary:
    """A summary with every optional block: efforts, SLOs, arrivals, the generator and the server's account."""
    records = [_record(i, ("low", "high")[i % 2]) for i in range(40)]
    window = (MetricsSample(0.0, e2e_count=3.0, e2e_sum_s=2.0, ttft_count=3.0, ttft_sum_s=0.5, prompt_tokens_total=7.0),
              MetricsSample(9.0, e2e_count=42.0, e2e_sum_s=43.0, ttft_count=42.0, ttft_sum_s=8.0, prompt_tokens_total=1567.0))
    mix, slo = "mix:low=1,high=1", "ttft_p90<=2s,e2e_median<=900ms"
    return summarize(records, {"effort": mix, "slo": slo, "users": 4},
                     check([ProcessLoad("load process", 10.0, 1.0, wakeups=10, events=20)]), window,
                     slos=parse_slos(slo), mix_efforts=mixed_efforts(mix))


def test_a_summary_reads_back_as_the_record_it_was_written_from(tmp_path):
    summary = _full_summary()
    assert summary.by_effort and summary.slo and summary.arrivals and summary.generator and summary.server_vs_client
    written = write_summary(tmp_path, summary).read_bytes()
    back = read_summary(tmp_path)
    assert back == summary
    assert orjson.dumps(back.to_dict(), option=orjson.OPT_INDENT_2) + b"\n" == written  # the file format is unchanged


def _write(tmp_path, data) -> None:
    (tmp_path / SUMMARY_FILE).write_bytes(orjson.dumps(data))


def test_a_summary_of_a_newer_schema_version_is_one_line(tmp_path):
    _write(tmp_path, {**summarize([]).to_dict(), "schema_version": SUMMARY_SCHEMA_VERSION + 1})
    newer = rf"schema_version {SUMMARY_SCHEMA_VERSION + 1} is newer than this llmload reads \(up to {SUMMARY_SCHEMA_VERSION}\)"
    with pytest.raises(ResultsError, match=newer) as caught:
        read_summary(tmp_path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("change,message", [
    ({"ttft_ms": {"median": 5.0}}, r"not a run summary \(no ttft_ms\.count\)"),
    ({"requests_ok": 1.5}, r"requests_ok: 1\.5 is not an int"),
    ({"slo": [{"slo": "ttft_p90<=2s", "passed": "yes"}]}, r"no slo\[0\]\.limit_ms"),
    ({"by_effort": {"low": {"requests_ok": True}}}, r"by_effort\.low\.requests_ok: True is not an int"),
])
def test_a_malformed_summary_names_the_field(tmp_path, change, message):
    _write(tmp_path, {**summarize([]).to_dict(), **change})
    with pytest.raises(ResultsError, match=message):
        read_summary(tmp_path)


def test_what_a_file_may_leave_out_or_add():
    @dataclass(frozen=True)
    class Part:
        n: int
        ci95: list[float] | None
        names: tuple[str, ...] = ()
        by: dict[str, float] = field(default_factory=dict)

    # A key the record does not name is left out; an absent field that may be None reads as None.
    assert decode(Part, {"n": 3, "later": "x"}) == Part(3, None)
    assert decode(Part, {"n": 3, "ci95": [1, 2.5], "names": ["a"], "by": {"x": 1}}) == Part(3, [1, 2.5], ("a",), {"x": 1})
    with pytest.raises(ResultsError, match=r"^names: 'ab' is not a list$"):
        decode(Part, {"n": 1, "names": "ab"})
    with pytest.raises(ResultsError, match=r"^no n$"):
        decode(Part, {})


def test_a_metric_is_read_by_its_path_and_a_misnamed_one_raises():
    summary = _full_summary()
    assert metric_value(summary, "ttft_ms.median") == summary.ttft_ms.median == pytest.approx(200.0)
    assert metric_value(summary, "requests_ok") == 39.0  # 40, less the one that timed out
    assert metric_value(summary, "arrivals.dispatch_lag_ms.median") == pytest.approx(1.0)
    assert metric_value(summarize([]), "arrivals.dispatch_lag_ms.median") is None  # closed loop: no arrivals block
    assert metric_ci95(summary, "ttft_ms.median") == tuple(summary.ttft_ms.median_ci95)
    assert metric_ci95(summary, "ttft_ms.mean") is None  # a mean has no interval
    with pytest.raises(ResultsError, match="unknown metric 'ttft_ms.medain'"):
        metric_value(summary, "ttft_ms.medain")
    with pytest.raises(ResultsError, match="'ttft_ms' is not a number but Distribution"):
        metric_value(summary, "ttft_ms")


def test_sweep_files_read_back_typed(tmp_path):
    marker = {"schema_version": 1, "index": 2, "key": "abc", "label": "u2", "settings": {"USERS": "2"},
              "declared_server": {"gpu": "h100"}, "finished_unix_s": 1.0, "server_metrics": {"samples": 3, "running_mean": 1.5},
              "server_metrics_failures": 0, "server_metrics_error": None}
    (tmp_path / "cell.json").write_bytes(orjson.dumps(marker))
    cell = read_cell_marker(tmp_path)
    assert isinstance(cell, CellMarker) and (cell.index, cell.settings, cell.server_metrics.running_mean) == (2, {"USERS": "2"}, 1.5)
    (tmp_path / "cell.json").write_bytes(orjson.dumps({**marker, "schema_version": 3}))
    with pytest.raises(ResultsError, match="schema_version 3 is newer than this llmload reads"):
        read_cell_marker(tmp_path)
    assert read_scenario(tmp_path).cells == []  # no scenario.json: the cells on disk only
    (tmp_path / "scenario.json").write_bytes(orjson.dumps({"name": "s", "cells": [{"index": 0, "label": "u1"}]}))
    with pytest.raises(ResultsError, match=r"scenario.json: not a scenario record \(no cells\[0\]\.key\)"):
        read_scenario(tmp_path)
