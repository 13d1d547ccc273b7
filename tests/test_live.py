"""The web UI's streaming table: what it shows for the records it was given."""

import pytest

from llmload.loadtest.live import LiveStats
from llmload.timescale import TimeScale
from factories import make_record

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


def _record(ttft_s: float, itl_s: list[float], tokens: int, error: str | None = None):
    return make_record(ttft_s=ttft_s, ttfvt_s=ttft_s, itl_s=itl_s, prompt_tokens=100, completion_tokens=tokens,
                       reasoning_tokens=1, error=error)


def test_rows_in_milliseconds_and_failures_left_out():
    live = LiveStats()
    live.add(_record(0.100, [0.010, 0.030], 3))
    live.add(_record(0.300, [0.020], 2))
    live.add(_record(0.200, [], 1))
    live.add(_record(9.0, [], 1, error="http_500"))
    rows = {row["metric"]: row for row in live.rows()}
    # Quantiles come from log-spaced buckets (within 2.2%); counts, means and maxima are exact.
    assert rows["TTFT (ms)"]["count"] == 3 and rows["TTFT (ms)"]["median"] == pytest.approx(200.0, rel=0.025)
    assert rows["TTFT (ms)"]["mean"] == pytest.approx(200.0)
    assert rows["ITL (ms)"]["count"] == 3 and rows["ITL (ms)"]["max"] == pytest.approx(30.0)
    assert rows["output tokens"]["mean"] == pytest.approx(2.0) and rows["prompt tokens"]["max"] == 100
    live.clear()
    assert all(row["count"] == 0 for row in live.rows())


def test_a_rehearsal_adds_rows_predicted_for_the_gpu_it_plays():
    live = LiveStats()
    live.played = ("predicted for h200 (profile h200-gpt-oss-20b-bf16, measured; SPEEDUP 20x scaled back)", TimeScale(20.0))
    live.validation = {"status": "validated", "errors": {"ttft_median_ms": {"worst_abs": 0.27}, "rps": {"worst_abs": 0.58}}}
    live.add(_record(0.010, [0.001, 0.001], 3))
    rows = {row["metric"]: row for row in live.rows()}
    predicted = "TTFT (ms) predicted for h200 (profile h200-gpt-oss-20b-bf16, measured; SPEEDUP 20x scaled back) [model ±27%]"
    assert rows[predicted]["mean"] == pytest.approx(20 * rows["TTFT (ms)"]["mean"], rel=0.01)  # the raw row stays
    assert any(name.startswith("output tokens/s predicted for h200") and name.endswith("[model ±58%]") for name in rows)
    live.validation = {"status": "unvalidated"}
    assert any(row["metric"].endswith("[UNVALIDATED model]") for row in live.rows())
