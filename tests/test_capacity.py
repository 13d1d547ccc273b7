"""The capacity search: its steps (pure), its answer's interval, bad input, and a search with a known answer."""

import json
from dataclasses import replace

import pytest

from conftest import run_cli
from factories import make_record
from llmload.results.slo import certain_failure
from llmload.results.summary import summarize
from llmload.results.slo import parse_slos
from llmload.sim import start_sim, stop_sim
from llmload.sweep.capacity import Step, answer, next_load, step_of
from plots.capacity import WHOLE_RUN, load_capacity
from plots.capacity_figure import capacity_figure


def search(capacity: float, start: float = 1.0, maximum: float = 1024.0, precision: float = 0.1, whole: bool = True):
    """The loads tried against a system that passes up to ``capacity``."""
    steps: list[Step] = []
    while (load := next_load(steps, start, maximum, precision, whole)) is not None:
        assert len(steps) < 40
        steps.append(Step(load, load <= capacity, True))
    return [s.load for s in steps], answer(steps, whole)


@pytest.mark.pure
def test_grows_geometrically_then_bisects_to_one_user():
    loads, (best, interval) = search(13, start=4)
    assert loads == [4, 8, 16, 12, 14, 13]
    assert best == 13 and interval == [13, 13]


@pytest.mark.parametrize("capacity", [1, 2, 3, 7, 50, 100, 511, 1000])
@pytest.mark.pure
def test_every_capacity_is_found_within_precision(capacity):
    loads, (best, _) = search(capacity)
    assert best <= capacity and capacity - best <= max(1, 0.1 * best)
    assert len(loads) <= 2 * 11


@pytest.mark.pure
def test_a_max_that_passes_and_a_start_that_fails():
    loads, (best, interval) = search(5000, maximum=100)
    assert loads[-1] == 100 and best == 100 and interval == [100, None]  # no certain failure bounds it
    loads, (best, interval) = search(3, start=16)
    assert loads == [16, 8, 4, 2, 3] and best == 3
    assert search(0)[1][0] is None  # even one user fails


@pytest.mark.pure
def test_rates_bisect_to_the_precision_asked():
    loads, (best, _) = search(7.3, start=1.0, precision=0.05, whole=False)
    assert best <= 7.3 and (7.3 - best) / best <= 0.05


@pytest.mark.pure
def test_the_interval_comes_from_certain_verdicts_only():
    steps = [Step(4, True, True), Step(8, True, False), Step(16, False, True), Step(12, False, False)]
    assert answer(steps, whole=True) == (8, [4, 15])
    assert answer([Step(4, True, True), Step(8, True, False), Step(16, False, True)], whole=False) == (8, [4, 16])


@pytest.mark.pure
def test_certain_failure_needs_the_whole_interval_over_the_limit():
    def rec(tpot_s, effort=None):
        return make_record(e2e_s=1.0, tpot_s=tpot_s, effort=effort)
    slos = parse_slos("tpot_median<=30ms")
    assert certain_failure(slos, [rec(0.031)] * 5) is None  # too few samples for a 99.5% interval
    reason = certain_failure(slos, [rec(0.031)] * 20)
    assert reason.startswith("tpot_median<=30ms fails: its median is at least 31.0 ms (99.5% confidence) after 20")
    assert certain_failure(slos, [rec(0.029 if i % 2 else 0.031) for i in range(40)]) is None  # straddles: unsure
    mixed = [rec(0.01, "low")] * 20 + [rec(0.05, "high")] * 20
    assert "(effort high)" in certain_failure(slos, mixed)
    assert certain_failure(parse_slos("tpot_mean<=1ms"), [rec(0.05)] * 50) is None  # a mean has no interval


@pytest.mark.pure
@pytest.mark.parametrize("settings, message", [
    ([], "SLO is missing"),
    (["SLO=tpot_p50<=30ms", "USERS=4"], "USERS is what CAPACITY_BY=users searches"),
    (["SLO=tpot_p50<=30ms", "CAPACITY_BY=rate", "RATE=4"], "RATE is what CAPACITY_BY=rate searches"),
    (["SLO=tpot_p50<=30ms", "CAPACITY_START=0"], "CAPACITY_START=0 is out of range: it must be a finite number more than 0"),
    (["SLO=tpot_p50<=30ms", "CAPACITY_START=8", "CAPACITY_MAX=4"], "CAPACITY_START=8 is above CAPACITY_MAX=4"),
    (["SLO=tpot_p50<=30ms", "CAPACITY_STEPS=0"], "CAPACITY_STEPS=0 is out of range"),
    (["SLO=tpot_p50<=30ms", "CAPACITY_START=2.5"], "must be a whole number of users"),
    (["SLO=tpot_p50<=30ms", "REQUESTS=100"], "REQUESTS does not apply"),
    (["SLO=tpot_p50<=30"], "needs a unit"),
    (["SLO=tpot_p50<=30ms", "CAPACITY_BY=speed"], "CAPACITY_BY (--capacity-by): invalid choice"),
])
def test_bad_capacity_settings_give_one_line_and_exit_2(cli, settings, message):
    done = cli("capacity", *settings)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


@pytest.mark.integration
def test_the_search_finds_the_known_crossing_of_a_target_whose_gap_grows_per_sequence(tmp_path):
    # TPOT = 1 ms + 3 ms per running sequence: 40 ms at 13 users, 43 ms at 14, so 41.5 ms allows 13 users
    process, url = start_sim(["--fixed-ttft-ms", "10", "--fixed-itl-ms", "1", "--itl-per-seq-ms", "3"])
    try:
        out = tmp_path / "capacity"
        settings = [f"HOST={url}", "SLO=tpot_median<=41.5ms", "CAPACITY_START=4", "DURATION=6s", "MAX_TOKENS=40",
                    "EFFORT=low", f"OUT={out}"]
        done = run_cli("capacity", *settings, timeout_s=600)
        assert done.returncode == 0, done.stdout + done.stderr[-2000:]
        result = json.loads((out / "capacity.json").read_text())
        assert abs(result["max_users"] - 13) <= 1  # within one step of the crossing
        assert result["max_users_ci95"][0] <= result["max_users"] <= (result["max_users_ci95"][1] or 10**9)
        steps = result["steps"]
        assert [s["load"] for s in steps[:3]] == [4, 8, 16] and not steps[2]["passed"]
        assert any(s["stopped_early"] for s in steps if not s["passed"])  # failures end before DURATION
        assert all((out / "cells" / s["key"] / "cell.json").exists() for s in steps)
        assert "Capacity: USERS=" in done.stdout and f"Figure: {out / 'capacity.png'}" in done.stdout
        at = result["at_capacity"]  # what the capacity delivers and costs, priced at the GPU label's default
        figures = {f["name"]: f["value"] for f in at["figures"]}
        assert at["load"] == result["max_users"] and figures["output_throughput_tok_s"] > 0
        assert figures["usd_per_million_output_tokens"] > 0 and at["usd_per_gpu_hour"] == 11.06
        assert "At that load (predicted for h100 (built-in target" in done.stdout and "USD per million output tokens " in done.stdout
        plot = load_capacity(out)  # the figure's data: every step's TPOT median against its users, the limit, the answer
        (panel,) = plot.panels
        assert panel.limit_ms == 41.5 and [p.load for p in panel.lines[WHOLE_RUN]] == sorted(s["load"] for s in steps)
        assert plot.answer == result["max_users"] and (out / "capacity.svg").exists()
        again = run_cli("capacity", *settings, timeout_s=120)  # every step is a finished cell: reused
        assert again.returncode == 0 and again.stdout.count("(finished before, reused)") == len(steps)
        assert json.loads((out / "capacity.json").read_text())["max_users"] == result["max_users"]
    finally:
        stop_sim(process)


@pytest.mark.integration
def test_an_early_stop_while_duration_ends_still_writes_the_summary(tmp_path):
    # 16 requests/s against a gap that grows 3 ms per running sequence: TPOT passes 30 ms after a few seconds, and the
    # early stop came while DURATION's own stop was draining the streams. Locust then stops twice; the second stop
    # returned at once and Locust exited before the first had written summary.json (it must wait for it).
    process, url = start_sim(["--fixed-ttft-ms", "10", "--fixed-itl-ms", "1", "--itl-per-seq-ms", "3"])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "RATE=16", "DURATION=6s", "MAX_TOKENS=40", "EFFORT=low", "EARLY_STOP=on",
                       "SLO=tpot_median<=30ms", f"OUT={out}")
    finally:
        stop_sim(process)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["slo_met"] is False and summary["stopped_early"].startswith("tpot_median<=30ms fails")


@pytest.mark.integration
def test_a_rehearsal_judges_the_played_gpu(tmp_path):
    # Without HOST the built-in target plays the GPU SPEEDUP times faster: the SLO's limit shrinks as much, and the
    # search says so before its first step.
    out = tmp_path / "cap"
    done = run_cli("capacity", "SLO=ttft_p90<=2s", "SPEEDUP=20", "DURATION=20s", "CAPACITY_MAX=1", "MAX_TOKENS=20",
                   f"OUT={out}", timeout_s=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Times below are the built-in target's (SPEEDUP 20x); each SLO limit is put on its clock" in done.stdout
    (step,) = json.loads((out / "capacity.json").read_text())["steps"]
    assert step["slo"][0]["limit_ms"] == pytest.approx(100.0)


@pytest.mark.pure
def test_one_sure_miss_makes_a_failing_step_certain():
    def rec(ttft_s, tpot_s):
        return make_record(start_monotonic_s=float(ttft_s), e2e_s=1.0, ttft_s=ttft_s, tpot_s=tpot_s, completion_tokens=10,
                           answered=True)
    # TTFT always 0.5 s: surely over 0.1 s. TPOT straddles 30 ms: unsure. The step surely fails all the same.
    records = [rec(0.5, 0.029 if i % 2 else 0.031) for i in range(40)]
    summary = summarize(records, slos=parse_slos("ttft_median<=100ms,tpot_median<=30ms"))
    ttft, tpot = summary.slo
    assert (ttft.passed, ttft.certain, tpot.certain) == (False, True, False)
    assert step_of(8, "k", summary) == Step(8, False, True, "k", None, 40, tuple(summary.slo))
    # Passing needs every SLO sure; a step EARLY_STOP ended was ended by a sure miss.
    loose = summarize(records, slos=parse_slos("ttft_median<=1s,tpot_median<=30.5ms"))
    assert loose.slo_met and not step_of(8, "k", loose).certain
    unsure = summarize(records, slos=parse_slos("tpot_median<=29.5ms"))  # median 30 ms, interval 29-31 ms: fails, unsure
    assert not unsure.slo_met and not step_of(8, "k", unsure).certain
    stopped = replace(unsure, stopped_early="tpot_median<=29.5ms fails")
    assert step_of(8, "k", stopped).certain


@pytest.mark.integration
def test_with_turns_the_search_counts_conversations_started_per_second(tmp_path):
    out = tmp_path / "cap"
    done = run_cli("capacity", "CAPACITY_BY=rate", "TURNS=3", "SLO=ttft_p90<=10s", "SPEEDUP=20", "DURATION=20s",
                   "CAPACITY_START=1", "CAPACITY_MAX=2", "MAX_TOKENS=20", f"OUT={out}", timeout_s=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads((out / "capacity.json").read_text())
    assert [s["load"] for s in result["steps"]] == [1, 2] and result["max_rate"] == 2
    assert "Capacity: RATE=2 conversations/s meets SLO" in done.stdout
    summary = json.loads((out / "cells" / result["steps"][-1]["key"] / "summary.json").read_text())
    assert summary["config"]["turns"] == "3" and "1" in summary["by_turn"]  # each step's users held conversations
    plot = load_capacity(out)
    assert plot.conversations and capacity_figure(plot, tmp_path).xlabel == "conversations started per second (RATE)"
