"""EFFORT=mix:...: parsing, the seeded per-request draw, by_effort in the summary, and a run against the target."""

import json
import math

import pytest

from conftest import run_cli
from factories import make_record
from llmload.errors import ConfigError
from llmload.loadtest.efforts import EffortDraw
from llmload.loadtest.runconfig import parse_run_args
from llmload.results.efforts import effort_shares, mixed_efforts
from llmload.results.records import read_records
from llmload.results.report import format_result
from llmload.results.summary import summarize
from llmload.sim import start_sim, stop_sim


@pytest.mark.pure
def test_plain_efforts_and_mixes():
    assert effort_shares("high") == {"high": 1.0}
    assert effort_shares("mix:low=70,medium=25,high=5") == pytest.approx({"low": 0.7, "medium": 0.25, "high": 0.05})
    assert effort_shares("mix:low=3, none=1") == {"low": 0.75, "none": 0.25}
    assert parse_run_args(["EFFORT=mix:low=1,high=1"]).effort == "mix:low=1,high=1"


@pytest.mark.parametrize("text, message", [
    ("extreme", "EFFORT='extreme' is not one of low, medium, high, none, nor a mix"),
    ("mix:low=70,ultra=30", "'ultra=30' is not effort=weight"),
    ("mix:low=70,low=30", "'low=30' is not effort=weight with an effort of low, medium, high, none named once"),
    ("mix:low=-1,high=2", "'low=-1' is not effort=weight"),
    ("mix:low=x", "'low=x' is not effort=weight"),
    ("mix:low", "'low' is not effort=weight"),
    ("mix:low=0,high=0", "the weights add up to 0"),
])
@pytest.mark.pure
def test_bad_efforts_are_refused_in_one_line(text, message):
    with pytest.raises(ConfigError) as caught:
        parse_run_args([f"EFFORT={text}"])
    assert str(caught.value).startswith("EFFORT=") and message in str(caught.value)


@pytest.mark.pure
def test_the_cli_refuses_a_bad_mix_with_exit_2_and_one_line(cli):
    done = cli("load", "EFFORT=mix:low=70,ultra=30")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "'ultra=30' is not effort=weight" in done.stderr


@pytest.mark.pure
def test_drawn_shares_are_within_sampling_error_and_seeded():
    shares = effort_shares("mix:low=70,medium=25,high=5")
    draw = EffortDraw(shares, seed=3)
    n = 20_000
    drawn = [draw.next() for _ in range(n)]
    for effort, share in shares.items():
        assert abs(drawn.count(effort) / n - share) <= 4 * math.sqrt(share * (1 - share) / n)
    again = EffortDraw(shares, seed=3)
    assert [again.next() for _ in range(100)] == drawn[:100]
    assert {EffortDraw({"low": 1.0}, 0).next() for _ in range(10)} == {"low"}


def _record(start_s: float, e2e_s: float, effort: str | None):
    return make_record(start_monotonic_s=start_s, e2e_s=e2e_s, ttft_s=e2e_s / 2, tpot_s=None, completion_tokens=10, effort=effort)


@pytest.mark.pure
def test_summary_breaks_a_mix_down_per_effort():
    records = [_record(float(i), 1.0, "low") for i in range(6)] + [_record(float(i), 3.0, "high") for i in range(3)]
    mix = "mix:low=2,medium=1,high=1"
    s = summarize(records, {"effort": mix}, mix_efforts=mixed_efforts(mix))
    assert list(s.by_effort) == ["low", "medium", "high"]  # the mix's order; medium drew no request
    low, medium, high = s.by_effort["low"], s.by_effort["medium"], s.by_effort["high"]
    assert (low.requests_ok, medium.requests_ok, high.requests_ok) == (6, 0, 3)
    assert low.duration_s == high.duration_s == s.duration_s == 6.0  # every part's rate is over the whole run
    assert low.rps + high.rps == pytest.approx(s.rps)
    assert (low.response_time_ms.median, high.response_time_ms.median) == (1000.0, 3000.0)
    block = format_result(s)
    assert "Effort low (66.7%)" in block and "Effort high (33.3%)" in block and "Effort medium (0.0%)" in block


@pytest.mark.pure
def test_one_effort_or_old_records_have_no_breakdown():
    assert mixed_efforts("low") == () and mixed_efforts("") == ()
    assert summarize([_record(0.0, 1.0, "low")], {"effort": "low"}, mix_efforts=mixed_efforts("low")).by_effort == {}
    assert summarize([_record(0.0, 1.0, None)]).by_effort == {}


@pytest.mark.integration
def test_a_mixed_run_sends_each_requests_effort_and_records_it(tmp_path):
    process, url = start_sim(["--fixed-ttft-ms", "5", "--fixed-itl-ms", "0"])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "USERS=4", "REQUESTS=80", "EFFORT=mix:low=50,high=50", f"OUT={out}")
    finally:
        stop_sim(process)
    assert done.returncode == 0, done.stderr[-2000:]
    records = list(read_records(out / "samples.jsonl"))
    assert len(records) == 80 and {r.effort for r in records} == {"low", "high"}
    summary = json.loads((out / "summary.json").read_text())
    parts = summary["by_effort"]
    assert list(parts) == ["low", "high"]
    assert parts["low"]["requests_ok"] + parts["high"]["requests_ok"] == summary["requests_ok"] == 80
    assert parts["low"]["requests_ok"] == sum(r.effort == "low" for r in records)
    # the target draws about 150 reasoning tokens for low and 1600 for high: the effort reached it
    assert parts["high"]["reasoning_tokens"]["mean"] > 4 * parts["low"]["reasoning_tokens"]["mean"]
    assert "Effort low (" in done.stdout and "Effort high (" in done.stdout
