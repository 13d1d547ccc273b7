"""Conversations in the results: summary.json's by_turn and the server's prefix-cache hit rate, the result block's
rows per turn, and the figures of TTFT and TTFVT by turn.

Records are built with known turns and timings, and the run folder written by the suite's own summarize(), so
every reported value is known.
"""

import pytest

from factories import make_record
from llmload.results.report import format_result
from llmload.results.server_metrics import MetricsSample, prefix_cache_hit_rate
from llmload.results.storage import SAMPLES_FILE, write_summary
from llmload.results.summary import summarize
from plots.figures import ttft_by_turn, ttfvt_by_turn
from plots.results import load_results

pytestmark = pytest.mark.pure

BEFORE = MetricsSample(0.0, prefix_cache_queries_total=1000.0, prefix_cache_hits_total=100.0)
AFTER = MetricsSample(9.0, prefix_cache_queries_total=5000.0, prefix_cache_hits_total=3100.0)


def _records():
    """Ten conversations of three turns: turn t's TTFT is 0.1 * t s and its prompt 1000 * t tokens; the
    third turn of the last conversation failed; one warm-up, which no turn counts."""
    records = [make_record(request_id=f"c{c}t{t}", start_monotonic_s=c + 0.1 * t, ttft_s=0.1 * t, ttfvt_s=0.2 * t,
                           prompt_tokens=1000 * t, completion_tokens=10, conversation_id=str(c), turn=t,
                           error="http_500" if (c, t) == (9, 3) else None)
               for c in range(10) for t in (1, 2, 3)]
    return records + [make_record(request_id="w", warmup=True, turn=1, conversation_id="w", ttft_s=9.0)]


def test_the_summary_breaks_every_metric_down_by_turn():
    s = summarize(_records(), {"turns": "3"}, server_window=(BEFORE, AFTER))
    assert list(s.by_turn) == ["1", "2", "3"]
    for turn, part in s.by_turn.items():
        t = int(turn)
        assert part.requests_ok == (9 if t == 3 else 10) and part.requests_failed == (1 if t == 3 else 0)
        assert part.ttft_ms.median == pytest.approx(100.0 * t) and part.ttfvt_ms.median == pytest.approx(200.0 * t)
        assert part.prompt_tokens.mean == 1000 * t
    assert s.server_prefix_cache_hit_rate == pytest.approx(3000 / 4000)  # hits over queries in the window only
    assert s.requests_ok == 29  # the whole run as before


def test_single_requests_have_no_turns_and_a_server_without_the_counters_no_hit_rate():
    s = summarize([make_record(), make_record(request_id="b")], {}, server_window=(MetricsSample(0.0), MetricsSample(1.0)))
    assert s.by_turn == {} and s.server_prefix_cache_hit_rate is None


@pytest.mark.parametrize("after,rate", [
    (MetricsSample(1.0, prefix_cache_queries_total=1000.0, prefix_cache_hits_total=100.0), None),  # no query in the window
    (MetricsSample(1.0, prefix_cache_queries_total=10.0, prefix_cache_hits_total=5.0), None),  # the server restarted
    (MetricsSample(1.0, prefix_cache_queries_total=1100.0, prefix_cache_hits_total=150.0), 0.5),
])
def test_the_hit_rate_is_over_the_window_only(after, rate):
    assert prefix_cache_hit_rate(BEFORE, after) == rate


def test_the_result_block_has_a_row_per_turn_and_the_hit_rate():
    text = format_result(summarize(_records(), {"turns": "3", "think_time": "exp:5s", "users": 4, "prefix_tokens": 2000,
                                                "prefix_groups": 4}, server_window=(BEFORE, AFTER)))
    assert "users=4 turns=3 think_time=exp:5s prefix_tokens=2000x4" in text
    assert "Server's prefix-cache hit rate:         75.0%" in text
    rows = text[text.index("Turn  Requests"):].splitlines()[1:4]
    assert [row.split()[:3] for row in rows] == [["1", "10", "1000"], ["2", "10", "2000"], ["3", "9", "3000"]]
    assert rows[1].split()[3:] == ["200.00", "/", "200.00", "400.00", "/", "400.00"]


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    records = _records()
    (folder / SAMPLES_FILE).write_bytes(b"".join(r.to_json_line() for r in records))
    config = {"turns": "3", "users": 4, "gpu": "h100", "model": "gpt-oss-20b", "prompts": "builtin", "effort": "medium"}
    write_summary(folder, summarize(records, config))
    return load_results(folder).cells


def test_the_figures_draw_ttft_and_ttfvt_against_the_turn(run, tmp_path):
    for figure, per_turn_ms in ((ttft_by_turn, 100.0), (ttfvt_by_turn, 200.0)):
        data = figure(run, tmp_path / "figures")
        (series,) = data.panels["all"].values()
        assert series.x == (1, 2, 3) and series.y == pytest.approx([per_turn_ms * t for t in (1, 2, 3)])
        assert series.n == (10, 10, 9) and data.files and data.xlabel == "conversation turn"


def test_a_rehearsals_turns_are_drawn_as_predicted_for_the_gpu_it_played(tmp_path):
    folder = tmp_path / "rehearsed"
    folder.mkdir()
    records = _records()
    (folder / SAMPLES_FILE).write_bytes(b"".join(r.to_json_line() for r in records))
    config = {"turns": "3", "users": 4, "gpu": "h100", "effort": "medium",
              "served_by": {"rehearsal": True, "name": "llmload.sim", "gpu_profile": "h100", "speedup": 5}}
    write_summary(folder, summarize(records, config))
    data = ttft_by_turn(load_results(folder).cells, tmp_path / "figures")
    (series,) = data.panels["all"].values()
    assert series.y == pytest.approx([5 * 100.0 * t for t in (1, 2, 3)]) and series.n == (10, 10, 9)
    assert data.stamp.endswith("drawn as predicted for h100 (times x5, rates /5)")


def test_the_figures_are_skipped_without_conversations(tmp_path):
    folder = tmp_path / "single"
    folder.mkdir()
    records = [make_record(request_id=f"r{i}") for i in range(3)]
    (folder / SAMPLES_FILE).write_bytes(b"".join(r.to_json_line() for r in records))
    write_summary(folder, summarize(records, {"gpu": "h100", "effort": "medium", "users": 1}))
    data = ttft_by_turn(load_results(folder).cells, tmp_path / "figures")
    assert not data.files and "TURNS" in data.note


def test_a_sweep_varying_turns_or_prefix_tokens_draws_them_on_the_x_axis(tmp_path):
    from plots.figures import METRIC_FIGURES
    from plots.points import x_axis

    cells = []
    for turns, prefix in (("1", 0), ("4", 0), ("1", 2000), ("4", 2000)):
        folder = tmp_path / f"t{turns}-p{prefix}"
        folder.mkdir()
        records = [make_record(request_id=f"r{i}", ttft_s=0.1 * int(turns)) for i in range(3)]
        (folder / SAMPLES_FILE).write_bytes(b"".join(r.to_json_line() for r in records))
        config = {"turns": turns, "prefix_tokens": prefix, "users": 8, "gpu": "h100", "effort": "medium", "prompts": "4k"}
        write_summary(folder, summarize(records, config))
        cells += load_results(folder).cells
    assert x_axis(cells) == "turns"
    data = METRIC_FIGURES["ttft_vs_users"](cells, tmp_path / "figures")
    assert set(data.panels) == {"(server's) 4k prefix_tokens=0", "(server's) 4k prefix_tokens=2000"}
    for series in data.panels["(server's) 4k prefix_tokens=0"].values():
        assert series.x == ("1", "4") and series.y == pytest.approx([100.0, 400.0])
