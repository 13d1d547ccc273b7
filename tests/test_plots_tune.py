"""plots/tune.py through `make figures RESULTS=<a tune's OUT>`: the tune's figures and report from its tune.json."""

import pytest

from llmload.results.tunefile import CellFigures, ConfigResult, TuneResult, write_tune

pytestmark = pytest.mark.pure


def _cell(tok_s: float, users: float = 8.0) -> CellFigures:
    return CellFigures(label="load", key="k0", basis="measured", users=users, duration_s=30.0,
                       output_throughput_tok_s=tok_s, output_throughput_tok_s_ci95=[tok_s * 0.95, tok_s * 1.05],
                       total_throughput_tok_s=tok_s * 3, total_throughput_tok_s_ci95=[tok_s * 2.85, tok_s * 3.15],
                       tpot_mean_ms=1000 * users / tok_s, tpot_mean_ms_ci95=[900 * users / tok_s, 1100 * users / tok_s],
                       ttft_median_ms=50.0, tpot_median_ms=1000 * users / tok_s, usd_per_million_output_tokens=None,
                       usd_per_million_output_tokens_ci95=None)


def _tune_out(tmp_path):
    """A measured tune of two configurations, max-num-seqs=8 beating 1 beyond noise, and one that failed to start."""
    base = ConfigResult(name="max-num-seqs=1", slug="max-num-seqs_1", settings={"max-num-seqs": "1"},
                        command=["vllm", "serve", "m", "--max-num-seqs", "1"], env={}, status="measured", startup_s=24.0,
                        objective=500.0, objective_ci95=[475.0, 525.0], rungs=1, load_s=30.0, cells=[_cell(500.0)])
    best = ConfigResult(name="max-num-seqs=8", slug="max-num-seqs_8", settings={"max-num-seqs": "8"},
                        command=["vllm", "serve", "m", "--max-num-seqs", "8"], env={}, status="measured", startup_s=23.0,
                        objective=1600.0, objective_ci95=[1520.0, 1680.0], vs_baseline_pct=220.0,
                        vs_baseline_ci95=[200.0, 240.0], beyond_noise=True, rungs=1, load_s=30.0, cells=[_cell(1600.0)])
    refused = ConfigResult(name="max-num-seqs=abc", slug="max-num-seqs_abc", settings={"max-num-seqs": "abc"},
                           command=["vllm", "serve", "m", "--max-num-seqs", "abc"], env={}, status="failed to start",
                           reason="max-num-seqs=abc: the server exited with code 2 before it was ready",
                           log_tail=["api_server.py: error: argument --max-num-seqs: invalid int value: 'abc'"])
    result = TuneResult(objective="throughput", unit="output tokens/s", search="grid", slo="", gpus=1, rehearsal=False,
                        label="measured", configurations=[base, best, refused], ranking=[best.name, base.name],
                        best=best.name, best_beyond_noise=True, stopped_because="every configuration was measured",
                        load_s=60.0, budget_s=None)
    out = tmp_path / "tune"
    out.mkdir()
    write_tune(out, result)
    return out


def test_make_figures_on_a_tunes_folder_draws_its_figures_and_report(tmp_path, in_process):
    from plots.__main__ import main

    out = _tune_out(tmp_path)
    done = in_process(main, "figures", str(out))
    assert done.returncode == 0, done.stderr
    for name in ("tune_objective", "tune_pareto"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 0 and (out / "figures" / f"{name}.svg").exists()
    report = (out / "report.html").read_text()
    assert "Configurations, ranked" in report and "Baseline against each configuration" in report
    assert "failed to start: max-num-seqs=abc: the server exited with code 2" in report
    assert "Best: max-num-seqs=8, leads every other beyond its interval" in done.stdout
    assert f"2 figures (PNG and SVG) in {out / 'figures'}; report: {out / 'report.html'}" in done.stdout


def test_a_tunes_folder_beside_other_folders_is_refused_in_one_line(tmp_path, in_process):
    from plots.__main__ import main

    out = _tune_out(tmp_path)
    other = tmp_path / "sweep"
    other.mkdir()
    done = in_process(main, "figures", str(other), str(out))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stdout == ""
    assert f"draw it on its own: make figures RESULTS={out}" in done.stderr
    assert not (out / "figures").exists()
