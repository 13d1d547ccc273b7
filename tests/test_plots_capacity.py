"""The capacity figure's data, from a capacity.json and step summaries made by the suite's own summarize()."""

import json
from dataclasses import asdict

import pytest

from factories import make_record
from llmload.errors import ResultsError
from llmload.results.efforts import mixed_efforts
from llmload.results.slo import slos_of
from llmload.results.storage import write_summary
from llmload.results.summary import summarize
from plots.capacity import WHOLE_RUN, load_capacity
from plots.capacity_figure import capacity_figure

pytestmark = pytest.mark.pure

SLO = "ttft_median<=500ms"


def _record(i: int, ttft_s: float, effort: str):
    return make_record(request_id=f"r{i}", start_monotonic_s=float(i), e2e_s=1.0, ttft_s=ttft_s, ttfvt_s=ttft_s, tpot_s=None,
                       completion_tokens=10, answered=True, effort=effort)


def _capacity_out(tmp_path, answer=2, ci95=(1, 3), speedup=None):
    """Three steps, USERS 1, 2, 4: low's median TTFT is 100 ms per user, high's 200 ms per user (``speedup``: a
    rehearsal's, that many times less)."""
    steps = []
    config = {"slo": SLO, "effort": "mix:low=1,high=1"}
    if speedup is not None:
        config["served_by"] = {"rehearsal": True, "name": "llmload.sim", "gpu_profile": "h100", "speedup": speedup}
    for users in (1, 2, 4):
        fast = speedup or 1.0
        records = [_record(i, 0.1 * users / fast, "low") for i in range(30)] + [_record(i, 0.2 * users / fast, "high") for i in range(30)]
        summary = summarize(records, config, slos=slos_of(config), mix_efforts=mixed_efforts("mix:low=1,high=1"))
        key = f"step-u{users}"
        (tmp_path / "cells" / key).mkdir(parents=True)
        write_summary(tmp_path / "cells" / key, summary)
        steps.append({"load": users, "passed": summary.slo_met, "certain": True, "key": key, "stopped_early": None,
                      "requests_ok": summary.requests_ok, "slo": [asdict(r) for r in summary.slo]})
    document = {"schema_version": 1, "by": "users", "max_users": answer, "max_users_ci95": list(ci95),
                "stopped_because": "test", "slo": SLO, "settings": {}, "steps": steps}
    (tmp_path / "capacity.json").write_text(json.dumps(document))
    return tmp_path


def test_each_effort_of_a_mix_is_a_line_beside_the_whole_run(tmp_path):
    plot = load_capacity(_capacity_out(tmp_path))
    (panel,) = plot.panels
    assert panel.slo == SLO and panel.limit_ms == 500.0 and list(panel.lines) == [WHOLE_RUN, "low", "high"]
    assert [p.value_ms for p in panel.lines["low"]] == pytest.approx([100.0, 200.0, 400.0])
    assert [p.value_ms for p in panel.lines["high"]] == pytest.approx([200.0, 400.0, 800.0])
    assert [p.passed for p in panel.lines["high"]] == [True, True, False]
    assert all(p.ci95_ms[0] <= p.value_ms <= p.ci95_ms[1] for p in panel.lines["low"])
    assert [s[:2] for s in plot.steps] == [(1.0, True), (2.0, True), (4.0, False)] and plot.answer == 2


def test_a_rehearsals_steps_are_drawn_as_predicted_for_the_gpu_it_played(tmp_path):
    # At SPEEDUP 4 the target answered 4x faster and each step was judged against a limit 4x lower; drawn, both are
    # the played GPU's: the same figure as the one-to-one run, stamped so.
    plot = load_capacity(_capacity_out(tmp_path, speedup=4.0))
    (panel,) = plot.panels
    assert panel.limit_ms == pytest.approx(500.0)
    assert [p.value_ms for p in panel.lines["high"]] == pytest.approx([200.0, 400.0, 800.0])
    assert [p.passed for p in panel.lines["high"]] == [True, True, False]
    assert plot.rehearsals == ("REHEARSAL (built-in target playing h100, SPEEDUP 4x)",) and plot.played == ("h100 (times x4)",)
    stamp = capacity_figure(plot, tmp_path).stamp
    assert stamp.endswith("not a measurement; drawn as predicted for h100 (times x4)")


def test_the_figure_draws_every_line_the_limit_and_the_answer(tmp_path):
    out = _capacity_out(tmp_path)
    drawn = capacity_figure(load_capacity(out), out)
    assert [p.name for p in drawn.files] == ["capacity.png", "capacity.svg"] and all(p.stat().st_size > 0 for p in drawn.files)
    series = drawn.panels[SLO]
    assert list(series) == [WHOLE_RUN, "low", "high"] and series["high"].effort == "high" and series[WHOLE_RUN].effort == ""
    assert series["low"].x == (1, 2, 4) and drawn.extra["answer"] == 2 and drawn.extra["answer_ci95"] == (1, 3)
    assert drawn.extra["limits_ms"] == {SLO: 500.0} and "USERS=2" in drawn.title and "[1, 3]" in drawn.title


def test_a_folder_without_a_capacity_result_is_one_line(tmp_path):
    with pytest.raises(ResultsError, match="capacity.json: cannot be read"):
        load_capacity(tmp_path)
    (tmp_path / "capacity.json").write_text('{"schema_version": 9}')
    with pytest.raises(ResultsError, match="schema_version 9 is newer than this llmload reads"):
        load_capacity(tmp_path)
