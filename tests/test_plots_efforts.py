"""Figures of runs that mixed efforts: each effort's part is a line of its own, from summary.json's by_effort.

The run folders are written by the suite's own summarize() and record writer from records whose
efforts and timings are set, so every plotted value is known.
"""

import pytest

from factories import make_record
from llmload.results.efforts import mixed_efforts
from llmload.results.storage import SAMPLES_FILE, write_summary
from llmload.results.summary import summarize
from plots.figures import fig1_response_time, fig3_output_tokens, throughput_vs_latency
from plots.points import effort_parts
from plots.results import load_results

pytestmark = pytest.mark.pure

MIX = "mix:low=2,high=1"


def _record(i: int, e2e_s: float, tokens: int, effort: str):
    return make_record(request_id=f"r{i}", start_monotonic_s=float(i), e2e_s=e2e_s, ttfvt_s=0.2, tpot_s=None,
                       completion_tokens=tokens, answered=True, effort=effort)


def _run(folder, effort: str, users: int):
    """A run folder: under the mix, low's requests take 1 s per user and 100 tokens, high's 3 s per user and 500."""
    if effort == MIX:
        records = [_record(i, 1.0 * users, 100, "low") for i in range(20)] + [_record(i, 3.0 * users, 500, "high") for i in range(10)]
    else:
        records = [_record(i, 0.5 * users, 50, effort) for i in range(20)]
    folder.mkdir()
    (folder / SAMPLES_FILE).write_bytes(b"".join(r.to_json_line() for r in records))
    config = {"effort": effort, "users": users, "gpu": "h100", "model": "gpt-oss-20b", "prompts": "builtin", "max_tokens": 0}
    write_summary(folder, summarize(records, config, mix_efforts=mixed_efforts(effort)))
    return load_results(folder).cells[0]


@pytest.fixture
def cells(tmp_path):
    return [_run(tmp_path / f"{effort[:3]}-u{users}", effort, users) for effort in ("low", MIX) for users in (1, 2)]


def test_a_mixed_run_is_followed_by_one_part_per_effort(cells):
    parts = effort_parts(cells)
    assert [(c.effort, c.mix) for c in parts[2:5]] == [(MIX, ""), ("low", MIX), ("high", MIX)]
    assert [c.metric("requests_ok") for c in parts[2:5]] == [30, 20, 10]
    assert [(c.effort, c.mix) for c in effort_parts(cells, keep_mixed=False)[2:4]] == [("low", MIX), ("high", MIX)]
    assert effort_parts(cells[:2]) == cells[:2]  # runs of one effort stay as they are


def test_every_line_figure_draws_each_effort_of_the_mix(cells, tmp_path):
    drawn = fig1_response_time(cells, tmp_path / "figures")
    assert drawn.files and drawn.x_setting == "users"  # the parts do not make effort the x axis
    (series,) = drawn.panels.values()
    assert sorted(series) == sorted(["low", MIX, f"low in {MIX}", f"high in {MIX}"])
    assert series[f"low in {MIX}"].y == (1000.0, 2000.0) and series[f"high in {MIX}"].y == (3000.0, 6000.0)
    assert series[f"high in {MIX}"].n == (10, 10) and series[f"high in {MIX}"].effort == "high"
    assert series[f"high in {MIX}"].mix == MIX and series["low"].mix == "" and series["low"].y == (500.0, 1000.0)
    curves = throughput_vs_latency(cells, tmp_path / "figures").panels["all configurations"]
    assert set(curves) == {"low", MIX, f"low in {MIX}", f"high in {MIX}"} and curves[f"high in {MIX}"].x == (3000.0, 6000.0)


def test_output_tokens_are_counted_under_each_requests_own_effort(cells, tmp_path):
    drawn = fig3_output_tokens(cells, tmp_path / "figures")
    (series,) = drawn.panels.values()
    assert list(series) == ["low", "high"]  # no box for the mix as a whole: its requests are in their efforts'
    assert series["high"].n[0] == 20 and series["high"].y == (500.0, 500.0, 500.0, 500.0)
    assert series["low"].n[0] == 2 * 20 + 2 * 20 and series["low"].y[:2] == (50.0, 100.0)
