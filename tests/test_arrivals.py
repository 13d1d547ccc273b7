"""RATE: the arrival schedule (pure), its checks, and open-loop runs against the built-in target."""

import itertools
import json

import numpy as np
import pytest

from conftest import run_cli
from factories import make_record
from llmload.errors import ConfigError
from llmload.loadtest.arrivals import Arrivals
from llmload.loadtest.runconfig import parse_run_args
from llmload.results.records import read_records
from llmload.results.report import format_result
from llmload.results.summary import arrival_stats, summarize
from llmload.sim import start_sim, stop_sim


def gaps(arrivals: Arrivals, n: int, seed: int = 1) -> np.ndarray:
    return np.diff(list(itertools.islice(arrivals.offsets_s(seed), n + 1)))


@pytest.mark.pure
def test_constant_arrivals_are_exact_and_do_not_drift():
    offsets = list(itertools.islice(Arrivals(3.0, "constant").offsets_s(0), 30_001))
    assert offsets[:4] == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    assert offsets[-1] == 10_000.0


@pytest.mark.parametrize("kind, burstiness, cv", [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 1.0, 1.0),
                                                  ("gamma", 4.0, 0.5)])
@pytest.mark.pure
def test_random_arrivals_have_the_rate_and_spread_asked(kind, burstiness, cv):
    g = gaps(Arrivals(20.0, kind, burstiness), 50_000)
    assert g.mean() == pytest.approx(1 / 20.0, rel=0.03)
    assert g.std() / g.mean() == pytest.approx(cv, rel=0.05)


@pytest.mark.pure
def test_a_schedule_depends_only_on_its_seed():
    a = Arrivals(5.0, "poisson")
    assert list(itertools.islice(a.offsets_s(7), 50)) == list(itertools.islice(a.offsets_s(7), 50))
    assert list(itertools.islice(a.offsets_s(7), 50)) != list(itertools.islice(a.offsets_s(8), 50))


@pytest.mark.parametrize("settings, message", [
    (["RATE=-1"], "RATE=-1 is out of range: it must be a finite number at least 0"),
    (["RATE=inf"], "RATE=inf is out of range: it must be a finite number"),
    (["RATE=5", "BURSTINESS=0"], "BURSTINESS=0 is out of range: it must be a finite number more than 0"),
    (["RATE=5", "BURSTINESS=0.5"], "BURSTINESS applies to ARRIVALS=gamma only"),
    (["RATE=5", "USERS=4"], "USERS=4 with RATE"),
    (["MAX_CONCURRENCY=4"], "MAX_CONCURRENCY applies with RATE"),
    (["RATE=5", "WORKERS=3", "MAX_CONCURRENCY=2"], "MAX_CONCURRENCY=2 is split over 3 workers, so each needs one"),
    (["RATE=5", "MAX_CONCURRENCY=-1"], "MAX_CONCURRENCY=-1 is out of range: it must be a finite number at least 0"),
    (["RATE=5", "ARRIVALS=uniform"], "ARRIVALS (--arrivals): invalid choice"),
])
@pytest.mark.pure
def test_bad_open_loop_settings(settings, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_run_args(settings)
    assert parse_run_args(["RATE=5", "ARRIVALS=gamma", "BURSTINESS=0.5", "MAX_CONCURRENCY=8"]).rate == 5.0
    assert parse_run_args(["RATE=5", "WORKERS=2", "MAX_CONCURRENCY=2"]).workers == 2


def _sent(scheduled_s: float, lag_s: float, wait_s: float = 0.0):
    return make_record(start_monotonic_s=scheduled_s + lag_s, e2e_s=1.0, ttfvt_s=0.1, tpot_s=None, answered=True,
                       scheduled_monotonic_s=scheduled_s, slot_wait_s=wait_s)


@pytest.mark.pure
def test_arrival_stats_from_scheduled_and_actual_send_times():
    records = [_sent(0.0, 0.001), _sent(1.0, 0.002), _sent(2.0, 0.5, wait_s=0.49), _sent(3.0, 0.001), _sent(4.0, 0.001)]
    a = arrival_stats(records)
    assert (a.requests_scheduled, a.late_requests, a.late_after_ms) == (5, 1, 10.0)
    assert a.scheduled_rate_rps == 1.0 and a.send_rate_rps == pytest.approx(4 / 4.0)
    assert a.dispatch_lag_ms.median == pytest.approx(1.0) and a.dispatch_lag_ms.max == pytest.approx(500.0)
    assert a.slot_wait_ms.max == pytest.approx(490.0)
    gaps_s = np.diff([0.001, 1.002, 2.5, 3.001, 4.001])
    assert a.send_interval_cv == pytest.approx(gaps_s.std() / gaps_s.mean())
    closed = make_record(e2e_s=1.0, ttft_s=None)
    assert arrival_stats([closed]) is None and summarize([closed]).arrivals is None
    block = format_result(summarize(records, {"rate": 1.0, "arrivals": "gamma", "burstiness": 0.5, "max_concurrency": 4}))
    assert "Sent over 10 ms late:" in block and "1 of 5" in block
    assert "rate=1/s gamma burstiness=0.5 max_concurrency=4" in block


def _max_in_flight(records) -> int:
    events = sorted([(r.start_monotonic_s, 1) for r in records] + [(r.start_monotonic_s + r.e2e_s, -1) for r in records])
    level = peak = 0
    for _, step in events:  # an end sorts before a start at the same instant
        level += step
        peak = max(peak, level)
    return peak


@pytest.fixture(scope="module")
def slow_sim():
    """Answers take about 0.3 s (TTFT 200 ms, then 10 tokens 10 ms apart with MAX_TOKENS=10)."""
    process, url = start_sim(["--fixed-ttft-ms", "200", "--fixed-itl-ms", "10"])
    yield url
    stop_sim(process)


@pytest.mark.integration
def test_slow_answers_do_not_slow_poisson_arrivals(slow_sim, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={slow_sim}", "RATE=40", "REQUESTS=200", "MAX_TOKENS=10", "EFFORT=low", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    records = list(read_records(out / "samples.jsonl"))
    assert len(records) == 200 and all(r.scheduled_monotonic_s is not None and r.slot_wait_s == 0.0 for r in records)
    assert _max_in_flight(records) >= 6  # 40/s of 0.3 s answers: about 12 at once, never one after another
    a = json.loads((out / "summary.json").read_text())["arrivals"]
    # the same seeded schedule as Arrivals(40, "poisson").offsets_s(SEED=0): its rate, sent on time
    planned = list(itertools.islice(Arrivals(40.0, "poisson").offsets_s(0), 200))
    sent = sorted(r.scheduled_monotonic_s for r in records)
    assert np.allclose(np.array(sent) - sent[0], planned, atol=1e-6)
    assert a["scheduled_rate_rps"] == pytest.approx(199 / planned[-1])
    # Sends waiting on answers (one after another) would make about 3 a second; how near 40 they come is the
    # machine's load (bench/ measures it): the bound only tells the two apart.
    assert a["send_rate_rps"] == pytest.approx(a["scheduled_rate_rps"], rel=0.25)
    assert 0.7 <= a["send_interval_cv"] <= 1.3
    assert min(r.start_monotonic_s - r.scheduled_monotonic_s for r in records) >= 0.0  # none before its due time
    assert "Open-loop arrivals" in done.stdout


@pytest.mark.integration
def test_max_concurrency_caps_requests_in_flight_and_records_the_wait(slow_sim, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={slow_sim}", "RATE=20", "ARRIVALS=constant", "MAX_CONCURRENCY=2", "REQUESTS=24",
                   "MAX_TOKENS=10", "EFFORT=low", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    records = list(read_records(out / "samples.jsonl"))
    assert len(records) == 24 and _max_in_flight(records) == 2
    # two slots of ~0.3 s serve ~7 requests/s, not 20: the queue grows, each late request records its wait
    waited = [r for r in records if r.slot_wait_s > 0.05]
    assert len(waited) >= 15
    for r in waited:
        assert r.start_monotonic_s - r.scheduled_monotonic_s >= r.slot_wait_s
    a = json.loads((out / "summary.json").read_text())["arrivals"]
    assert a["late_requests"] >= 15 and a["slot_wait_ms"]["max"] > 1000.0
