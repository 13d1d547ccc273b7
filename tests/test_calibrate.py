"""`llmload calibrate`: cells read from real servers' results (the H200 folders, vLLM bench JSON, the A100 report's
tables), rehearsals refused, and the shipped profiles reproduced from the measurements they cite."""

import json
import shutil

import pytest

from conftest import REPO, run_cli
from llmload.calibrate.cells import read_cells
from llmload.calibrate.fit import Model, predict, relative_error
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


@pytest.mark.pure
def test_the_shipped_measured_profiles_reproduce_their_fitted_cells():
    for name, paths, limit in (("h200-gpt-oss-20b-bf16", H200_RESULTS, 0.15), ("a100-gpt-oss-120b", [A100], 0.16)):
        profile = load_profile(name)
        model = Model(profile.engine, profile.step, profile.frontend)
        for cell in read_cells([str(p) for p in paths]):
            predicted = predict(model, cell)
            for metric in ("rps", "tpot_median_ms"):
                if metric in cell.observed and cell.fitted:
                    error = relative_error(predicted[metric], cell.observed[metric])
                    assert abs(error) <= limit, (name, cell.name, metric, error)


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
