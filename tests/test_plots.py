"""plots/: figures, comparison tables and report.html from real (small) sweeps against the built-in target.

Three tiny sweeps run once per session, side by side: an H100 grid (2 models x 2 efforts x 1/2
users), the same gpt-oss-120b cells on an A100 (figures 5-8), and a max_tokens axis (figure 4).
"""

import json
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import REPO, run_cli
from llmload.results.records import read_records
from plots.figures import (BEYOND_FIGURES, METRIC_FIGURES, STUDY_FIGURES, answered_share, draw_all, fig1_response_time,
                           fig2_requests_per_s, fig3_output_tokens, fig4_max_tokens, fig5_gpu_response_time, kv_cache_timeline,
                           server_timeline, throughput_vs_latency)
from plots.points import same_point
from plots.results import ResultsError, load_results
from plots.tables import compare, compare_rows, compare_table, outputs_differ, pct_change, same_point_table

H100 = """
name: plots-h100
description: tiny grid for the plots tests
server: {engine: llmload-sim, gpu: h100, command: "python -m llmload.sim --model {MODEL}"}
defaults: {DURATION: 2s, MAX_TOKENS: 60, PROMPTS: builtin}
grid:
  MODEL: [gpt-oss-20b, gpt-oss-120b]
  EFFORT: [low, high]
  USERS: [1, 2]
"""
A100 = """
name: plots-a100
server: {engine: llmload-sim, gpu: a100, command: "python -m llmload.sim --gpu a100 --model {MODEL}"}
defaults: {DURATION: 2s, MAX_TOKENS: 60, PROMPTS: builtin, MODEL: gpt-oss-120b}
grid:
  EFFORT: [low, high]
  USERS: [1, 2]
"""
MAX_TOKENS = """
name: plots-max-tokens
server: {engine: llmload-sim, gpu: h100}
defaults: {DURATION: 2s, PROMPTS: builtin, MODEL: gpt-oss-20b, EFFORT: low, USERS: 1}
grid:
  MAX_TOKENS: [30, 60, 120]
"""


@pytest.fixture(scope="session")
def sweeps(tmp_path_factory):
    """The three sweeps, one after another (side by side, two cores starve the 0.5 s cells); a sweep
    with a failed cell is resumed once, as a user would rerun it."""
    base = tmp_path_factory.mktemp("plots")
    for name, text in (("h100", H100), ("a100", A100), ("mt", MAX_TOKENS)):
        (base / f"{name}.yaml").write_text(text)
        for _attempt in range(2):
            done = run_cli("sweep", f"SCENARIO={base / name}.yaml", f"OUT={base / name}", "SPEEDUP=4", "METRICS_INTERVAL=0.2", timeout_s=240)
            if done.returncode == 0:
                break
        assert done.returncode == 0, done.stdout + done.stderr
    return {name: base / name for name in ("h100", "a100", "mt")}


def run_plots(*args):
    return subprocess.run([sys.executable, "-m", "plots", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.integration
def test_loading_a_sweep(sweeps):
    r = load_results(sweeps["h100"])
    assert r.kind == "sweep" and r.name == "plots-h100" and r.server["gpu"] == "h100" and r.planned == 8
    assert len(r.cells) == 8 and not r.missing and all(c.complete for c in r.cells)
    assert {(c.model, c.effort, c.users, c.prompts, c.gpu) for c in r.cells} == {
        (m, e, u, "builtin", "h100") for m in ("gpt-oss-20b", "gpt-oss-120b") for e in ("low", "high") for u in (1, 2)}
    cell = r.cells[0]
    assert cell.metric("response_time_ms.median") > 0
    with pytest.raises(ResultsError, match="unknown metric 'response_time_ms.medain'"):
        cell.metric("response_time_ms.medain")  # a misspelt metric must not leave a figure silently empty
    records = [r for r in read_records(cell.path / "samples.jsonl") if not r.warmup]
    assert len(records) == cell.summary.requests_ok and cell.output_tokens() == [x.completion_tokens for x in records]
    assert cell.server_samples and cell.server_samples[0].t_s >= 0


@pytest.mark.integration
def test_loading_a_single_run_folder(sweeps, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(load_results(sweeps["h100"]).cells[0].path, run)
    for name in ("cell.json", "server_metrics.jsonl"):
        (run / name).unlink()
    r = load_results(run)
    assert r.kind == "run" and len(r.cells) == 1 and r.cells[0].model == "gpt-oss-20b" and r.cells[0].users == 1
    data = fig1_response_time(r.cells, tmp_path / "figs")
    assert list(data.panels) == ["gpt-oss-20b builtin"] and list(data.panels["gpt-oss-20b builtin"]) == ["low"]
    assert server_timeline(r.cells, tmp_path / "figs").skipped


@pytest.mark.integration
def test_figures_1_to_4(sweeps, tmp_path):
    cells = load_results(sweeps["h100"]).cells
    by = {(c.model, c.effort, c.users): c for c in cells}
    for fig, metric, n_path in ((fig1_response_time, "response_time_ms.median", "response_time_ms.count"),
                                (fig2_requests_per_s, "rps", "requests_ok")):
        data = fig(cells, tmp_path)
        assert [p.name for p in data.files] == [f"{data.name}.png", f"{data.name}.svg"] and all(p.stat().st_size > 1000 for p in data.files)
        assert set(data.panels) == {"gpt-oss-20b builtin", "gpt-oss-120b builtin"}
        for panel, series in data.panels.items():
            model = panel.split()[0]
            assert list(series) == ["low", "high"]
            for effort, s in series.items():
                assert s.x == (1, 2) and s.y == tuple(by[(model, effort, u)].metric(metric) for u in (1, 2))
                assert s.n == tuple(int(by[(model, effort, u)].metric(n_path)) for u in (1, 2)) and all(n > 0 for n in s.n)
                assert s.effort == effort and s.partial == (False, False)
        assert data.xlabel == "concurrent users" and data.x_setting == "users" and ("(ms)" in data.ylabel or "requests/s" in data.ylabel)
    fig3 = fig3_output_tokens(cells, tmp_path)
    assert set(fig3.panels) == {"gpt-oss-20b", "gpt-oss-120b"} and fig3.files
    for panel, series in fig3.panels.items():
        for effort, s in series.items():
            counts = [n for c in cells if c.model == panel and c.effort == effort for n in c.output_tokens()]
            assert s.x == ("min", "max", "mean", "median")
            assert s.y[:3] == (min(counts), max(counts), pytest.approx(sum(counts) / len(counts)))
            assert sorted(fig3.extra["distribution"][panel][effort]) == sorted(counts)
            assert max(counts) <= 60  # MAX_TOKENS caps them
    # Figure 4: skipped (with a note) where max_tokens does not vary, drawn where it does.
    assert fig4_max_tokens(cells, tmp_path).skipped and "max_tokens" in fig4_max_tokens(cells, tmp_path).note
    mt = load_results(sweeps["mt"]).cells
    fig4 = fig4_max_tokens(mt, tmp_path)
    assert list(fig4.panels) == ["gpt-oss-20b builtin"] and fig4.files
    s = fig4.panels["gpt-oss-20b builtin"]["low u1"]
    assert s.x == (30, 60, 120) and s.y[0] < s.y[2]
    assert all(u >= y for u, y in zip(s.upper, s.y))  # the band reaches p90 above each median


@pytest.mark.integration
def test_every_figure_plots_against_the_setting_the_cells_vary(sweeps, tmp_path):
    mt = load_results(sweeps["mt"]).cells  # one user throughout; only max_tokens varies
    for fig in (fig1_response_time, fig2_requests_per_s, answered_share):
        data = fig(mt, tmp_path)
        assert data.x_setting == "max_tokens" and data.xlabel == "max_tokens" and "vs max_tokens" in data.title
        (series,) = [s for panel in data.panels.values() for s in panel.values()]
        assert series.x == (30, 60, 120) and len(series.n) == 3 and all(n > 0 for n in series.n)
    fig3 = fig3_output_tokens(mt, tmp_path)
    assert all(s.n[0] > 0 for panel in fig3.panels.values() for s in panel.values())


@pytest.mark.integration
def test_runs_that_differ_in_rate_plot_against_it_each_its_own_point(tmp_path):
    # Open-loop runs all have one dispatching user: plotted against users, RATE=4 hid RATE=2 (one x, one point).
    for rate in (2, 4):
        done = run_cli("load", f"RATE={rate}", "REQUESTS=12", "WARMUP_REQUESTS=0", "SPEEDUP=10", "MAX_TOKENS=20",
                       "EFFORT=low", f"OUT={tmp_path / f'rate{rate}'}", timeout_s=180)
        assert done.returncode == 0, done.stderr[-2000:]
    cells = [c for rate in (2, 4) for c in load_results(tmp_path / f"rate{rate}").cells]
    data = fig1_response_time(cells, tmp_path / "figures")
    assert data.x_setting == "rate" and "RATE" in data.xlabel
    (series,) = [s for panel in data.panels.values() for s in panel.values()]
    assert series.x == (2.0, 4.0) and series.n == (12, 12)
    # Rehearsals at SPEEDUP 10: drawn as predicted for the GPU they played, as the console and summary.json give them.
    assert series.y == tuple(c.summary.predicted.response_time_ms.median for c in cells)
    assert series.y == tuple(c.summary.response_time_ms.median * 10 for c in cells)
    assert data.stamp.endswith("not a measurement; drawn as predicted for h100 (times x10, rates /10)")
    requests_per_s = fig2_requests_per_s(cells, tmp_path / "figures")
    (rates,) = [s for panel in requests_per_s.panels.values() for s in panel.values()]
    assert rates.y == pytest.approx([c.summary.predicted.rps for c in cells])
    lone = fig1_response_time(cells[:1], tmp_path / "lone")  # a lone open-loop run: at its RATE, not at "1 user"
    assert lone.x_setting == "rate"


@pytest.mark.integration
def test_runs_of_the_same_settings_are_named_not_dropped_unsaid(sweeps, tmp_path):
    again = tmp_path / "again"
    shutil.copytree(sweeps["h100"], again)
    cells, copies = load_results(sweeps["h100"]).cells, load_results(again).cells
    groups = same_point([*cells, *copies])
    assert groups == list(zip(cells, copies))  # each cell beside its copy, the later given last
    data = fig1_response_time([*cells, *copies], tmp_path / "figures")
    assert sum(len(s.x) for panel in data.panels.values() for s in panel.values()) == len(cells)  # one point each
    table = same_point_table(groups)
    assert table.rows[0] == (cells[0].label, str(copies[0].path), str(cells[0].path))
    done = run_plots("figures", str(again), str(sweeps["h100"]))  # the report goes to the copy: the fixture's stays
    assert done.returncode == 0, done.stderr
    assert f"same settings as {cells[0].path} (drawn): {copies[0].path} (not drawn" in done.stdout
    assert "Runs of the same settings: the figures draw the last given" in (again / "report.html").read_text()


@pytest.mark.integration
def test_intervals_slos_and_thin_samples_when_present(sweeps, tmp_path):
    cells = load_results(sweeps["h100"]).cells
    first = cells[0]
    summary = replace(first.summary, ttft_ms=replace(first.summary.ttft_ms, median_ci95=[1.0, 99.0], count=3),
                      config={**first.config, "slo": "ttft_p90<=250ms,tpot_p90<=50ms"})  # as SLO= records it
    changed = [replace(first, summary=summary), *cells[1:]]
    data = METRIC_FIGURES["ttft_vs_users"](changed, tmp_path)
    assert data.slo == 250.0
    points = [(s.ci95[i], s.thin[i]) for panel in data.panels.values() for s in panel.values() for i in range(len(s.x))]
    # The interval issue-15 adds to summary.json; n=3 is thin. These cells are rehearsals at SPEEDUP 4: drawn, as
    # their times are, for the GPU they played (x SPEEDUP).
    drawn = (1.0 * first.time_scale.speedup, 99.0 * first.time_scale.speedup)
    assert first.time_scale.speedup == 4.0 and (drawn, True) in points
    assert sum(ci == drawn for ci, _ in points) == 1  # the other cells keep their own intervals


@pytest.mark.integration
def test_figures_5_to_8_and_beyond(sweeps, tmp_path):
    cells = load_results(sweeps["h100"]).cells + load_results(sweeps["a100"]).cells
    fig5 = fig5_gpu_response_time(cells, tmp_path)
    assert list(fig5.panels) == ["gpt-oss-120b builtin"] and fig5.extra["gpus"] == ["a100", "h100"]
    assert set(fig5.panels["gpt-oss-120b builtin"]) == {"low a100", "low h100", "high a100", "high h100"}
    assert fig5_gpu_response_time(load_results(sweeps["h100"]).cells, tmp_path).skipped  # one GPU only: a note
    tvl = throughput_vs_latency(cells, tmp_path)
    assert len(tvl.panels["all configurations"]) == 6 and all(u == (1, 2) for u in tvl.extra["users"].values())
    timeline = server_timeline(cells, tmp_path)
    assert len(timeline.panels) == 12 and all({"running", "waiting"} <= set(p) for p in timeline.panels.values())
    assert len(kv_cache_timeline(cells, tmp_path).panels) == 12
    assert any(max(p["running"].y) >= 1 for p in timeline.panels.values())
    answered = answered_share(cells, tmp_path)
    assert all(0 <= y <= 100 for series in answered.panels.values() for s in series.values() for y in s.y)
    everything = draw_all(cells, tmp_path / "all")
    # Every registered figure comes back, drawn or with the note that says why not.
    assert len(everything) == len(STUDY_FIGURES + BEYOND_FIGURES) and all(f.files or f.note for f in everything)


@pytest.mark.integration
def test_cli_figures_and_report(sweeps):
    done = run_plots("figures", str(sweeps["h100"]), str(sweeps["a100"]), str(sweeps["mt"]))
    assert done.returncode == 0, done.stderr
    figs = sweeps["h100"] / "figures"
    for name in ("fig1_response_time", "fig2_requests_per_s", "fig3_output_tokens", "fig4_max_tokens", "fig5_gpu_response_time",
                 "fig8_gpu_output_throughput", "ttft_vs_users", "server_timeline", "reasoning_share"):
        assert (figs / f"{name}.png").exists() and (figs / f"{name}.svg").exists(), name
    html = (sweeps["h100"] / "report.html").read_text()
    assert html.count("<svg") == len(list(figs.glob("*.svg"))) >= 9 and "plots-h100" in html and "python -m llmload.sim --model {MODEL}" in html
    assert "<script" not in html and "<link" not in html and 'src="http' not in html and "@import" not in html
    assert "plots-a100" in html and "against plots-h100" in html
    # results spanning GPUs: the decision table per GPU x model, rehearsed rows marked predictions, and cost vs users
    assert (figs / "cost_vs_users.svg").exists() and "The GPU decision" in html
    # the h100 profile is extrapolated (no measurement checked it), the a100-120b one held-out validated
    assert "h100 (predicted, UNVALIDATED)" in html and "a100 (predicted)" in html and "USD per million output tokens" in html
    assert "model ±" in html and "UNVALIDATED" in html
    assert "Rehearsals: figures predicted for the GPU each played" in html and "predicted for a100 (profile a100-gpt-oss-120b, measured; SPEEDUP 4x scaled back)" in html
    assert "| a100 (predicted) | gpt-oss-120b |" in done.stdout  # make figures prints the decision table too
    assert "its timings are simulated (those that ran sped up drawn scaled back" in html  # SPEEDUP 4


@pytest.mark.integration
def test_partial_and_missing_cells(sweeps, tmp_path):
    folder = tmp_path / "h100"
    shutil.copytree(sweeps["h100"], folder, ignore=shutil.ignore_patterns("figures", "report.html"))
    scenario = json.loads((folder / "scenario.json").read_text())
    gone, partial = scenario["cells"][1], scenario["cells"][2]
    shutil.rmtree(folder / "cells" / gone["key"])
    (folder / "cells" / partial["key"] / "cell.json").unlink()
    r = load_results(folder)
    assert len(r.cells) == 7 and r.planned == 8
    assert {(m.key, m.reason.split(":")[0]) for m in r.missing} == {(gone["key"], "not run (no folder)"), (partial["key"], "partial")}
    assert [c.complete for c in r.cells if c.key == partial["key"]] == [False]
    done = run_plots("figures", str(folder))
    assert done.returncode == 0, done.stderr
    assert gone["label"] in done.stdout and "not run" in done.stdout
    html = (folder / "report.html").read_text()
    assert "Missing or partial cells (2 of 8)" in html and gone["label"] in html and gone["key"] in html
    series = fig1_response_time(r.cells, tmp_path / "f").panels["gpt-oss-20b builtin"]
    assert series["low"].x == (1,) and series["high"].x == (1, 2)  # low u2 is gone; high u1 (partial) is drawn
    assert series["high"].partial == (True, False) and series["low"].partial == (False,)
    assert html.index("Missing or partial cells") > html.index("<h3>Cells</h3>") and "<details>" in html


@pytest.mark.pure
def test_compare_math_with_literal_numbers():
    assert pct_change(100.0, 150.0) == pytest.approx(50.0)
    assert pct_change(200.0, 150.0) == pytest.approx(-25.0)
    assert pct_change(0.0, 5.0) is None and pct_change(None, 5.0) is None
    assert not outputs_differ(100.0, 110.0) and outputs_differ(100.0, 110.5) and outputs_differ(100.0, 89.0)
    assert not outputs_differ(None, 50.0)


@pytest.mark.integration
def test_compare_table_from_cells(sweeps):
    a, b = load_results(sweeps["h100"]), load_results(sweeps["a100"])
    def with_numbers(cell, tok_s, tpot, out_mean):
        """The figures the played GPU would show: the rehearsal's summary holds them sped up SPEEDUP times."""
        summary = replace(cell.summary, total_throughput_tok_s=tok_s * cell.time_scale.speedup,
                          tpot_ms=replace(cell.summary.tpot_ms, mean=tpot / cell.time_scale.speedup),
                          output_tokens=replace(cell.summary.output_tokens, mean=out_mean))
        return replace(cell, summary=summary)
    x = next(c for c in a.cells if c.label == "gpt-oss-120b low u1")
    y = next(c for c in b.cells if c.workload() == x.workload())
    rows = compare_rows([(with_numbers(x, 1000.0, 20.0, 500.0), with_numbers(y, 1250.0, 15.0, 520.0)),
                         (with_numbers(x, 800.0, 10.0, 500.0), with_numbers(y, 400.0, 12.5, 600.0))])
    assert rows[0].tok_s_change_pct == pytest.approx(25.0) and rows[0].tpot_change_pct == pytest.approx(-25.0) and not rows[0].flagged
    assert rows[1].tok_s_change_pct == pytest.approx(-50.0) and rows[1].tpot_change_pct == pytest.approx(25.0) and rows[1].flagged
    md = compare_table(rows).to_markdown()
    assert "| gpt-oss-120b low u1 | 1,000.0 | 1,250.0 | +25.0% | 20.00 | 15.00 | -25.0% |" in md
    assert "| gpt-oss-120b low u1 †2 | 800.0 | 400.0 | -50.0% | 10.00 | 12.50 | +25.0% |" in md
    assert "†2 gpt-oss-120b low u1: mean output tokens 500.0 (baseline) vs 600.0 (tuned), +20.0%" in md
    # The real folders: the four gpt-oss-120b cells match across GPUs; the 20b ones are listed as unmatched.
    text = compare(a, b)
    assert text.count("| gpt-oss-120b ") == 4 and "Only in the baseline (not compared): gpt-oss-20b low u1" in text


@pytest.mark.integration
def test_compare_cli(sweeps):
    done = run_plots("compare", str(sweeps["h100"]), str(sweeps["a100"]))
    assert done.returncode == 0 and "| workload | baseline total tok/s |" in done.stdout
    refused = run_plots("compare", str(sweeps["mt"]), str(sweeps["a100"]))
    assert refused.returncode == 2 and refused.stdout == "" and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("error: no cell of")


@pytest.mark.pure
@pytest.mark.parametrize("args", [("figures", "/nonexistent/results"), ("figures", "{tmp}"), ("compare", "{tmp}", "{tmp}"),
                                  ("figures", "{bad}"), ("figures", "{newer}"), ("frobnicate",), ()])
def test_bad_input_is_one_line(in_process, args, tmp_path):
    from plots.__main__ import main

    bad, newer = tmp_path / "bad", tmp_path / "newer"
    bad.mkdir()
    (bad / "summary.json").write_text("{not json")
    newer.mkdir()
    (newer / "summary.json").write_text('{"schema_version": 99}')  # a newer suite's summary
    (tmp_path / "empty").mkdir()
    done = in_process(main, *(a.format(tmp=tmp_path / "empty", bad=bad, newer=newer) for a in args))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    with pytest.raises(ResultsError):
        load_results(bad)
