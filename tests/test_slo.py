"""SLO parsing, verdicts with intervals, vLLM's per-request goodput, and SLOs per effort."""

import pytest

from factories import make_record
from llmload.errors import ConfigError
from llmload.loadtest.runconfig import parse_run_args
from llmload.results.efforts import mixed_efforts
from llmload.results.records import tpot_s
from llmload.results.report import format_result
from llmload.results.slo import Slo, check_slo, is_good, parse_slos, slos_of
from llmload.results.summary import summarize


@pytest.mark.pure
def test_slos_parse_with_units():
    assert parse_slos("ttft_p90<=2s, tpot_p90<=50ms,ttfvt_p50<=10s,itl_mean<=.5s") == (
        Slo("ttft_p90<=2s", "ttft", "p90", 2.0), Slo("tpot_p90<=50ms", "tpot", "p90", 0.05),
        Slo("ttfvt_p50<=10s", "ttfvt", "median", 10.0), Slo("itl_mean<=.5s", "itl", "mean", 0.5))
    assert parse_slos("") == ()


@pytest.mark.parametrize("text, message", [
    ("ttft_p90<=2", "'ttft_p90<=2' needs a unit, ms or s: ttft_p90<=2s or ttft_p90<=2ms"),
    ("ttft_p90<=2min", "needs a unit, ms or s"),
    ("ttft_p95<=2s", "names no known statistic; use one of mean, median, p50, p90, p99"),
    ("latency_p90<=2s", "names no known metric; use one of e2e, ttft, ttfvt, tpot, itl"),
    ("ttft_p90<2s", "'ttft_p90<2s' is not <metric>_<stat><=<number><unit>"),
    ("ttft_p90<=2s,", "'' is not <metric>_<stat><=<number><unit>"),
    ("ttft_p50<=1s,ttft_median<=2s", "ttft_median is given twice"),
])
@pytest.mark.pure
def test_bad_slos_are_refused(text, message):
    with pytest.raises(ConfigError) as caught:
        parse_run_args([f"SLO={text}"])
    assert str(caught.value).startswith(f"SLO={text!r}: ") and message in str(caught.value)


@pytest.mark.pure
def test_the_cli_refuses_a_bad_slo_with_exit_2_and_one_line(cli):
    done = cli("load", "SLO=ttft_p90<=2")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "needs a unit" in done.stderr


@pytest.mark.pure
def test_verdicts_and_their_certainty():
    slo = Slo("ttft_p90<=2s", "ttft", "p90", 2.0)
    assert check_slo(slo, 1500.0, [1400.0, 1900.0]).passed and check_slo(slo, 1500.0, [1400.0, 1900.0]).certain
    unsure = check_slo(slo, 1900.0, [1800.0, 2100.0])
    assert unsure.passed and not unsure.certain
    failed = check_slo(slo, 2500.0, [2100.0, 2900.0])
    assert not failed.passed and failed.certain and failed.limit_ms == 2000.0
    assert not check_slo(slo, 2500.0, None).certain
    nothing = check_slo(slo, None, None)
    assert not nothing.passed and not nothing.certain


def rec(ttft_s=0.5, e2e_s=2.0, out=20, answered=True, error=None, itl_s=(), effort=None, start_s=0.0):
    return make_record(start_monotonic_s=start_s, e2e_s=e2e_s, ttft_s=ttft_s, ttfvt_s=ttft_s if answered else None,
                       tpot_s=tpot_s(e2e_s, ttft_s, out, out),  # token by token
                       itl_s=list(itl_s), completion_tokens=out, answered=answered, error=error, effort=effort)


@pytest.mark.pure
def test_a_good_request_meets_every_limit_and_has_an_answer():
    slos = parse_slos("ttft_p90<=1s,tpot_p90<=100ms")
    assert is_good(rec(), slos)  # TTFT 0.5 s, TPOT 1.5 / 19 = 79 ms
    assert not is_good(rec(ttft_s=1.5), slos)
    assert not is_good(rec(e2e_s=3.0), slos)  # TPOT 132 ms
    assert not is_good(rec(answered=False), slos)  # vLLM's goodput, with an answer included
    assert not is_good(rec(error="http_500"), slos)
    assert not is_good(rec(out=1, e2e_s=0.5), slos)  # one token: no TPOT, so not measurable, never good
    itl = parse_slos("itl_p90<=50ms")
    assert is_good(rec(itl_s=[0.01] * 9 + [0.2]), itl) and not is_good(rec(itl_s=[0.01] * 8 + [0.2] * 2), itl)


@pytest.mark.pure
def test_summary_reports_goodput_and_each_slo():
    records = [rec(ttft_s=0.1 * (i % 10 + 1), start_s=float(i)) for i in range(100)]  # TTFT 0.1 .. 1.0 s
    s = summarize(records, slos=parse_slos("ttft_p90<=0.95s,e2e_median<=3s"))
    assert s.duration_s == 101.0
    assert s.goodput_rps == pytest.approx(90 / 101.0)  # TTFT 1.0 s misses in one request of ten
    low, high = s.goodput_rps_ci95
    assert low < s.goodput_rps < high
    ttft, e2e = s.slo
    assert (ttft.slo, ttft.limit_ms, ttft.value_ms, ttft.passed) == ("ttft_p90<=0.95s", 950.0, s.ttft_ms.p90, True)
    assert ttft.value_ms_ci95 == s.ttft_ms.p90_ci95 and not ttft.certain  # p90 within 900..1000 ms: unsure
    assert e2e.passed and e2e.certain and s.slo_met is True
    assert summarize(records, slos=parse_slos("ttft_p90<=0.5s")).slo_met is False
    none = summarize(records)
    assert (none.goodput_rps, none.slo, none.slo_met) == (None, [], None)


@pytest.mark.pure
def test_with_a_mix_every_effort_that_ran_must_meet_the_slo():
    records = [rec(ttft_s=0.2, effort="low", start_s=float(i)) for i in range(40)]
    records += [rec(ttft_s=3.0, e2e_s=6.0, effort="high", start_s=float(i)) for i in range(40)]
    mix, slos = "mix:low=1,medium=0,high=1", parse_slos("ttft_p90<=1s")
    s = summarize(records, {"effort": mix, "slo": "ttft_p90<=1s"}, slos=slos, mix_efforts=mixed_efforts(mix))
    low, high = s.by_effort["low"], s.by_effort["high"]
    assert low.slo[0].passed and not high.slo[0].passed and s.slo_met is False
    assert low.goodput_rps == pytest.approx(40 / s.duration_s) and high.goodput_rps == 0.0
    assert s.by_effort["medium"].requests_ok == 0  # drew nothing: not judged
    only_low = summarize(records[:40], slos=slos, mix_efforts=mixed_efforts(mix))
    assert only_low.slo_met is True
    block = format_result(s)
    assert "SLOs met by every effort:" in block and "no" in block.split("SLOs met by every effort:")[1].split("\n")[0]
    assert block.count("SLO ttft_p90<=1s:") == 4  # the whole run and each of three efforts
    high_rows = block.split("Effort high")[1]
    assert "FAIL  3000.00 ms" in high_rows and "Goodput (req/s):" in high_rows


@pytest.mark.pure
def test_cells_csv_gets_a_column_per_slo_figure_and_two_per_interval():
    from llmload.sweep.runner import _flatten

    records = [rec(ttft_s=0.1 * (i % 10 + 1), start_s=float(i)) for i in range(100)]
    row: dict = {}
    _flatten("", summarize(records, slos=parse_slos("ttft_p90<=0.95s")).to_dict(), row)
    assert row["slo_ttft_p90<=0.95s_passed"] is True and row["slo_ttft_p90<=0.95s_limit_ms"] == 950.0
    assert row["slo_ttft_p90<=0.95s_value_ms_ci95_lo"] <= row["ttft_ms_p90"] <= row["slo_ttft_p90<=0.95s_value_ms_ci95_hi"]
    assert row["ttft_ms_p99_ci95_lo"] is None and row["ttft_ms_p99_ci95_hi"] is None  # 100 samples: no p99 interval


@pytest.mark.pure
def test_a_rehearsals_limits_go_on_the_targets_clock_by_its_time_scale():
    # The built-in target playing a GPU 20x faster answers 20x sooner: ttft_p90<=2s of the GPU is 100 ms on it, as RATE
    # and DURATION are scaled; a real server (no rehearsal) keeps the limit whatever SPEEDUP says.
    assert slos_of({"slo": "ttft_p90<=2s", "served_by": {"rehearsal": True, "speedup": 20.0}})[0].limit_s == pytest.approx(0.1)
    assert parse_slos("ttft_p90<=2s")[0].limit_s == 2.0
    records = [rec(ttft_s=0.1 * (i % 10 + 1), start_s=float(i)) for i in range(100)]  # TTFT 0.1 .. 1.0 s, p90 ~0.9-1 s
    rehearsal = {"slo": "ttft_p90<=10s", "served_by": {"rehearsal": True, "speedup": 20.0}}
    (ttft,) = summarize(records, rehearsal, slos=slos_of(rehearsal)).slo  # slos_of: as the run and `report` parse them
    assert (ttft.limit_ms, ttft.passed) == (pytest.approx(500.0), False)
    assert "judged on the target's clock (SPEEDUP 20x)" in format_result(
        summarize(records, rehearsal, slos=slos_of(rehearsal)))
    real = {"slo": "ttft_p90<=10s", "served_by": {"rehearsal": False, "speedup": 20.0}}
    real_summary = summarize(records, real, slos=slos_of(real))
    assert real_summary.slo[0].passed and "SPEEDUP" not in format_result(real_summary)
