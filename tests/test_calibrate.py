"""`llmload calibrate`: cells read from real servers' results (the H200 folders, vLLM bench JSON, the A100 report's
tables), rehearsals refused, and the shipped profiles reproduced from the measurements they cite: every figure
within 15%, or named as a miss with its error."""

import json
import shutil

import pytest

from conftest import REPO, run_cli
from llmload.calibrate.cells import read_cells
from llmload.calibrate.fit import Model, fit, predict, relative_error
from llmload.calibrate.hardware import PRIOR_FRONTEND, prior_step
from llmload.errors import ConfigError
from llmload.sim.profiles import load_profile

H200 = REPO / "measurements" / "h200-2026-12-04"
A100 = REPO / "measurements" / "a100-gpt-oss-120b-000-report.json"
H200_RESULTS = [H200 / "suite-c16-run1", H200 / "suite-c16-run2", H200 / "suite-u256", H200 / "vllm-bench" / "c1.json",
                H200 / "vllm-bench" / "c16-run1.json", H200 / "vllm-bench" / "c16-run2.json"]


@pytest.mark.pure
def test_the_h200_folders_answered_in_one_burst_so_their_cells_use_the_servers_own_ttft_and_itl():
    cells = {c.name: c for c in read_cells([str(p) for p in H200_RESULTS])}
    u256 = cells["suite-u256"]
    assert set(u256.observed) == {"rps", "e2e_median_ms", "server_ttft_mean_ms", "server_itl_mean_ms"}
    assert u256.users == 256 and len(u256.prompt_tokens) == 1024 and set(u256.prompt_tokens) == {1091}
    assert u256.observed["server_itl_mean_ms"] == pytest.approx(17.21, abs=0.01) and "one burst" in u256.note
    bench = cells["c1"]  # vLLM bench's TTFT (its role chunk) and TPOT are usable
    assert set(bench.observed) == {"rps", "ttft_median_ms", "tpot_median_ms", "e2e_median_ms"} and bench.users == 1
    run1 = cells["suite-c16-run1"]  # 2 of 200 failed: counted as requests of the mean lengths
    assert len(run1.prompt_tokens) == 200 and run1.users == 16


@pytest.mark.pure
def test_the_a100_tables_fit_the_baseline_and_predict_the_tuned_runs():
    cells = read_cells([str(A100)])
    fitted = [c for c in cells if c.fitted]
    assert len(fitted) == 6 and all(not c.engine for c in fitted)
    tuned = [c for c in cells if c.engine.get("max_num_batched_tokens") == 4096]
    assert len(tuned) == 6 and all("async-scheduling" in c.note for c in tuned)
    random_2k = next(c for c in cells if c.name == "baseline random 2000/100")
    assert min(random_2k.prompt_tokens) >= 2000 + 67 - 2  # the chat frame the server also read
    assert sum(random_2k.output_tokens) / 500 == pytest.approx(97.962, abs=0.5) and max(random_2k.output_tokens) == 100


WITHIN = 0.15
"""Issue 24's goal: each figure of a cell (throughput, TTFT, TPOT; the server's TTFT and ITL where the answers came in
one burst; E2E) within 15% of what was measured."""

# The figures the model truly misses, each with its error (predicted - measured) / measured as bench/RESULTS.md
# ("Calibration") gives it. Each must stay at that error within MISS_MARGIN and stay a miss: a change either way
# fails, and a figure that comes back within 15% leaves the table.
IN_SAMPLE_MISSES = {
    # with identical requests the replay keeps 256 users in lock-step waves, which the real run lost
    ("h200-gpt-oss-20b-bf16", "suite-u256", "server_ttft_mean_ms"): +0.2659,
    # vLLM bench's second run at 16 users: the server's own TTFT was 11-20% above the other runs of that load
    ("h200-gpt-oss-20b-bf16", "c16-run2", "ttft_median_ms"): -0.1673,
    # the A100 fit trades its six baseline cells against each other: two figures end just past 15% (16 of 18 within)
    ("a100-gpt-oss-120b", "baseline sharegpt 1000 at once", "ttft_median_ms"): -0.1529,
    ("a100-gpt-oss-120b", "baseline random 128/4", "rps"): -0.1513,
}
HELD_OUT_MISSES = {  # the fit that never saw the second runs at 16 users, predicting them
    ("held out", "c16-run2", "ttft_median_ms"): -0.2207,  # RESULTS.md: "TTFT median -22.1%"
}
MISS_MARGIN = 0.002
"""The replay is deterministic: a named miss may drift by float rounding, not by a change of the model."""
HELD_OUT_MARGIN = 0.005
"""A held-out figure also goes through a fit (Levenberg-Marquardt, numpy's solver): a little more room."""


def _judge(errors: dict[tuple[str, str, str], float], misses: dict[tuple[str, str, str], float], margin: float) -> None:
    """Every figure within WITHIN, except the named misses, each at its named error; every named miss was seen."""
    assert set(misses) <= set(errors), f"named misses with no such figure: {sorted(set(misses) - set(errors))}"
    wrong = []
    for key, error in errors.items():
        if key in misses:
            if abs(error - misses[key]) > margin or abs(error) <= WITHIN:
                wrong.append(f"{key}: {error:+.4f}, named as a miss of {misses[key]:+.4f}")
        elif abs(error) > WITHIN:
            wrong.append(f"{key}: {error:+.4f}, beyond {WITHIN:.0%}")
    assert not wrong, "; ".join(wrong)


def _errors(model: Model, cells, key) -> dict[tuple[str, str, str], float]:
    """(key, cell, metric) -> relative error of every figure each cell measured."""
    out = {}
    for cell in cells:
        predicted = predict(model, cell)
        for metric, observed in cell.observed.items():
            out[(key, cell.name, metric)] = relative_error(predicted[metric], observed)
    return out


@pytest.mark.pure
def test_the_shipped_measured_profiles_reproduce_every_figure_of_their_fitted_cells_but_the_named_misses():
    errors = {}
    for name, paths in (("h200-gpt-oss-20b-bf16", H200_RESULTS), ("a100-gpt-oss-120b", [A100])):
        profile = load_profile(name)
        fitted = [c for c in read_cells([str(p) for p in paths]) if c.fitted]
        errors |= _errors(Model(profile.engine, profile.step, profile.frontend), fitted, name)
    # every figure of every fitted cell is judged: throughput, client TTFT and TPOT or the server's TTFT and ITL, E2E
    metrics = {metric for _, _, metric in errors}
    assert metrics == {"rps", "ttft_median_ms", "tpot_median_ms", "e2e_median_ms", "server_ttft_mean_ms",
                       "server_itl_mean_ms"}
    assert len(errors) == 24 + 18  # the H200's 6 cells x 4 figures, the A100 baseline's 6 x 3
    _judge(errors, IN_SAMPLE_MISSES, MISS_MARGIN)


@pytest.mark.pure
def test_the_a100_profile_predicts_the_tuned_runs_it_was_not_fitted_to_within_15_percent():
    profile = load_profile("a100-gpt-oss-120b")
    tuned = [c for c in read_cells([str(A100)]) if not c.fitted]
    errors = _errors(Model(profile.engine, profile.step, profile.frontend), tuned, "a100-gpt-oss-120b")
    assert len(errors) == 8 * 3 and {m for _, _, m in errors} == {"rps", "ttft_median_ms", "tpot_median_ms"}
    _judge(errors, {}, MISS_MARGIN)


@pytest.mark.pure
def test_a_fit_without_the_second_runs_at_16_users_predicts_them_but_the_named_miss():
    """bench/calibration_bench.py's repeats protocol, fitted from the hardware prior to the other cells (the other
    fold, the first runs held out, meets the goal on every figure: the bench reports it)."""
    base = load_profile("h200-gpt-oss-20b-bf16")
    start = Model(base.engine, prior_step(base.gpu, base.model, base.weights), PRIOR_FRONTEND)
    cells = read_cells([str(p) for p in H200_RESULTS])
    repeats = [c for c in cells if c.name.endswith("run2")]
    assert [c.name for c in repeats] == ["suite-c16-run2", "c16-run2"]
    model = fit(start, [c for c in cells if c not in repeats])
    errors = _errors(model, repeats, "held out")
    assert len(errors) == 8 and {m for _, _, m in errors} == {"rps", "ttft_median_ms", "tpot_median_ms",
                                                              "e2e_median_ms", "server_ttft_mean_ms", "server_itl_mean_ms"}
    _judge(errors, HELD_OUT_MISSES, HELD_OUT_MARGIN)


def _rehearsal(tmp_path):
    run = tmp_path / "rehearsal"
    shutil.copytree(H200 / "suite-c16-run1", run)
    summary = json.loads((run / "summary.json").read_text())
    summary["config"]["served_by"] = {"name": "llmload.sim", "rehearsal": True, "gpu_profile": "h200", "speedup": 20.0}
    (run / "summary.json").write_text(json.dumps(summary))
    return run


@pytest.mark.pure
def test_a_rehearsal_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="is a rehearsal on the built-in target .* circular") as e:
        read_cells([str(_rehearsal(tmp_path))])
    assert "\n" not in str(e.value)


@pytest.mark.integration
def test_calibrate_on_a_rehearsal_exits_2(tmp_path):
    run = _rehearsal(tmp_path)
    done = run_cli("calibrate", f"RESULTS={run}", "PROFILE=h200-gpt-oss-20b-bf16", f"OUT={tmp_path / 'p.json'}")
    assert done.returncode == 2 and done.stderr.startswith("error: RESULTS: ") and done.stderr.count("\n") == 1
    assert "circular" in done.stderr and not (tmp_path / "p.json").exists()


@pytest.mark.integration
def test_calibrate_refits_the_shipped_h200_profile_from_its_folders(tmp_path):
    out = tmp_path / "h200.json"
    done = run_cli("calibrate", "PROFILE=h200-gpt-oss-20b-bf16", "RESULTS=" + " ".join(str(p) for p in H200_RESULTS),
                   f"OUT={out}", timeout_s=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("suite-u256") and "server_itl_mean_ms" in line for line in lines)
    assert any(line.startswith("held out: ") for line in lines) and any(line.startswith("fitted: ") for line in lines)
    fitted, shipped = load_profile(str(out)), load_profile("h200-gpt-oss-20b-bf16")
    assert fitted.kind == "measured" and fitted.source.startswith("MEASURED: fitted by `python -m llmload calibrate")
    # the fit starts from the hardware prior, not from the file it refits: the same measurements give the same profile
    for block in ("step", "frontend", "engine"):
        a, b = vars(getattr(fitted, block)), vars(getattr(shipped, block))
        assert a == pytest.approx(b, rel=1e-6), block
