"""`llmload calibrate`: cells read from real servers' results (the H200 folders, vLLM bench JSON, the A100 report's
tables), each with its prefix-cache hit rate and where it came from, rehearsals and cells of unknown hit rate refused,
and the shipped profiles reproduced from the measurements they cite: every figure within 15%, or named as a miss with
its error."""

import json
import shutil
import types
from dataclasses import replace

import pytest

from conftest import REPO, run_cli
from llmload.calibrate.cells import Cell, read_cells
from llmload.calibrate.command import run_calibrate
from llmload.calibrate.fit import Model, fit, predict, relative_error
from llmload.calibrate.hardware import PRIOR_FRONTEND, prior_step
from llmload.calibrate.hitrate import cached_tokens
from llmload.errors import ConfigError
from llmload.sim.profiles import load_profile
from llmload.sim.replay import replay_closed_loop
from llmload.sim.stepmodel import Frontend, prefill_pairs, step_time_s

H200 = REPO / "measurements" / "h200-2026-12-04"
A100 = REPO / "measurements" / "a100-gpt-oss-120b-000-report.json"
H200_RESULTS = [H200 / "suite-c16-run1", H200 / "suite-c16-run2", H200 / "suite-u256", H200 / "vllm-bench" / "c1.json",
                H200 / "vllm-bench" / "c16-run1.json", H200 / "vllm-bench" / "c16-run2.json"]
FRAME_RATE = 12_800 / 218_200
"""What the H200 server counted cached of every run of that workload: 64 of each 1,091-token prompt (the chat frame)."""


def _cells(paths) -> list[Cell]:
    """The cells of ``paths``, none refused."""
    cells, refused = read_cells([str(p) for p in paths])
    assert not refused, refused
    return cells


@pytest.mark.pure
def test_the_h200_folders_answered_in_one_burst_so_their_cells_use_the_servers_own_ttft_and_itl():
    cells = {c.name: c for c in _cells(H200_RESULTS)}
    u256 = cells["suite-u256"]
    assert set(u256.observed) == {"rps", "e2e_median_ms", "server_ttft_mean_ms", "server_itl_mean_ms"}
    assert u256.users == 256 and len(u256.prompt_tokens) == 1024 and set(u256.prompt_tokens) == {1091}
    assert u256.observed["server_itl_mean_ms"] == pytest.approx(17.21, abs=0.01) and "one burst" in u256.note
    bench = cells["c1"]  # vLLM bench's TTFT (its role chunk) and TPOT are usable
    assert set(bench.observed) == {"rps", "ttft_median_ms", "tpot_median_ms", "e2e_median_ms"} and bench.users == 1
    run1 = cells["suite-c16-run1"]  # 2 of 200 failed: counted as requests of the mean lengths
    assert len(run1.prompt_tokens) == 200 and run1.users == 16


@pytest.mark.pure
def test_each_h200_cell_carries_the_servers_hit_rate_and_where_it_came_from():
    cells = {c.name: c for c in _cells(H200_RESULTS)}
    for name in ("suite-c16-run1", "suite-c16-run2", "suite-u256"):  # the server's counters around the run
        assert cells[name].hit_rate == pytest.approx(FRAME_RATE, abs=1e-12)
        assert "server_window.jsonl" in cells[name].hit_rate_source
    for name in ("c1", "c16-run1", "c16-run2"):  # declared beside the bench files, each saying where from
        assert cells[name].hit_rate == pytest.approx(FRAME_RATE, abs=1e-12)
        assert cells[name].hit_rate_source.startswith("cache.json: ")
    assert "counted this run alone" in cells["c16-run2"].hit_rate_source
    assert set(cells["c1"].cached_tokens(16)) == {64}  # 4 blocks of 16 each, not 3: 5.87% of 1,091 is 64.0


@pytest.mark.pure
def test_the_a100_tables_fit_the_baseline_and_predict_the_tuned_runs():
    cells = _cells([A100])
    fitted = [c for c in cells if c.fitted]
    assert len(fitted) == 6 and all(not c.engine for c in fitted)
    tuned = [c for c in cells if c.engine.get("max_num_batched_tokens") == 4096]
    assert len(tuned) == 6 and all("async-scheduling" in c.note for c in tuned)
    random_2k = next(c for c in cells if c.name == "baseline random 2000/100")
    assert min(random_2k.prompt_tokens) >= 2000 + 67 - 2  # the chat frame the server also read
    assert sum(random_2k.output_tokens) / 500 == pytest.approx(97.962, abs=0.5) and max(random_2k.output_tokens) == 100
    # the report gives no hit rate: the table assumes the chat frame's 4 blocks, and says so
    assert set(random_2k.cached_tokens(16)) == {64} and random_2k.hit_rate_source.startswith("the table: ASSUMED")


WITHIN = 0.15
"""Issue 24's goal: each figure of a cell (throughput, TTFT, TPOT; the server's TTFT and ITL where the answers came in
one burst; E2E) within 15% of what was measured."""

# The figures the model truly misses, each with its error (predicted - measured) / measured as bench/RESULTS.md
# ("Calibration") gives it. Each must stay at that error within MISS_MARGIN and stay a miss: a change either way
# fails, and a figure that comes back within 15% leaves the table. Since each cell's requests prefill only what its
# hit rate leaves uncached (issue 32), the H200's two misses moved (+26.6% to +23.2%, -16.7% to -15.9%) and the
# A100's two in-sample ones came back within 15% (-15.3% to -14.5%, -15.1% to +2.1%).
# Since the H200 server is replayed with vLLM 0.25's asynchronous scheduling (a request that comes while a step runs is
# computed in the step after the next; bench/RESULTS.md, "The H100 grid"), the 256-user TTFT miss grew (+23.2% to
# +47.7%) and the suite's second run at 16 users went just past 15% (-6.4% to -15.3%); the fit trades them against the
# other figures of three operating points.
IN_SAMPLE_MISSES = {
    # with identical requests the replay keeps 256 users in lock-step waves, which the real run lost; each wave's
    # requests now also wait the step an asynchronous engine had scheduled before they came
    ("h200-gpt-oss-20b-bf16", "suite-u256", "server_ttft_mean_ms"): +0.4770,
    # the suite's second run at 16 users: its server TTFT was 9% above the first run's
    ("h200-gpt-oss-20b-bf16", "suite-c16-run2", "server_ttft_mean_ms"): -0.1531,
    # vLLM bench's second run at 16 users: the server's own TTFT was 11-20% above the other runs of that load
    ("h200-gpt-oss-20b-bf16", "c16-run2", "ttft_median_ms"): -0.1605,
}
TUNED_MISSES: dict[tuple[str, str, str], float] = {
    # the tuned runs had --async-scheduling, which they are still predicted without (the A100 baseline, vLLM 0.11, ran
    # synchronous); with the A100's requests' prompt lengths the API server's work per prompt token is fitted, and the
    # two that were just past 15% (+15.4%, -15.1%) came back within it
}
HELD_OUT_MISSES: dict[tuple[str, str, str], float] = {
    # the fit that never saw the second runs at 16 users, predicting them: vLLM bench's TTFT median came back within
    # 15% (-15.9% to -14.4%) with asynchronous scheduling replayed
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
        fitted = [c for c in _cells(paths) if c.fitted]
        errors |= _errors(Model(profile.engine, profile.step, profile.frontend), fitted, name)
    # every figure of every fitted cell is judged: throughput, client TTFT and TPOT or the server's TTFT and ITL, E2E
    metrics = {metric for _, _, metric in errors}
    assert metrics == {"rps", "ttft_median_ms", "tpot_median_ms", "e2e_median_ms", "server_ttft_mean_ms",
                       "server_itl_mean_ms"}
    assert len(errors) == 24 + 18  # the H200's 6 cells x 4 figures, the A100 baseline's 6 x 3
    _judge(errors, IN_SAMPLE_MISSES, MISS_MARGIN)


@pytest.mark.pure
def test_the_a100_profile_predicts_the_tuned_runs_it_was_not_fitted_to_but_the_named_misses():
    profile = load_profile("a100-gpt-oss-120b")
    tuned = [c for c in _cells([A100]) if not c.fitted]
    errors = _errors(Model(profile.engine, profile.step, profile.frontend), tuned, "a100-gpt-oss-120b")
    assert len(errors) == 8 * 3 and {m for _, _, m in errors} == {"rps", "ttft_median_ms", "tpot_median_ms"}
    _judge(errors, TUNED_MISSES, MISS_MARGIN)


@pytest.mark.pure
def test_a_fit_without_the_second_runs_at_16_users_predicts_them_but_the_named_miss():
    """bench/calibration_bench.py's repeats protocol, fitted from the hardware prior to the other cells (the other
    fold, the first runs held out, meets the goal on every figure: the bench reports it)."""
    base = load_profile("h200-gpt-oss-20b-bf16")
    start = Model(base.engine, prior_step(base.gpu, base.model, base.weights), PRIOR_FRONTEND)
    cells = _cells(H200_RESULTS)
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


FIGURES = ("rps", "ttft_median_ms", "tpot_median_ms", "e2e_median_ms")


def _h200_models() -> tuple[Model, Model]:
    """(a server to measure: the shipped H200 profile, the fit's start: the hardware prior for that GPU and model)."""
    base = load_profile("h200-gpt-oss-20b-bf16")
    return (Model(base.engine, base.step, base.frontend),
            Model(base.engine, prior_step(base.gpu, base.model, base.weights), PRIOR_FRONTEND))


def _measured(server: Model, name: str, hit_rate: float, users: int, requests: int) -> Cell:
    """A cell of 1,091-token prompts and 256 output tokens as ``server`` measures it at ``hit_rate``."""
    cell = Cell(name, "synthetic", users, (1091,) * requests, (256,) * requests, {}, hit_rate, "declared by the test")
    measured = predict(server, cell)
    return replace(cell, observed={m: measured[m] for m in FIGURES})


def _worst(model: Model, cells) -> dict[str, dict[str, float]]:
    return {c.name: {m: relative_error(predict(model, c)[m], v) for m, v in c.observed.items()} for c in cells}


@pytest.mark.pure
def test_the_replay_prefills_only_the_uncached_part_of_each_prompt():
    base = load_profile("h200-gpt-oss-20b-bf16")
    none = Frontend(0.0, 0.0, 0.0)
    cached = cached_tokens(0.985, (1091,), 16)  # 1,074.6 tokens: down to 67 whole blocks
    assert cached == (1072,) and cached_tokens(FRAME_RATE, (1091, 100, 15), 16) == (64, 0, 0)
    warm = replay_closed_loop(base.engine, base.step, none, 1, [1091], [2], cached)[0]
    cold = replay_closed_loop(base.engine, base.step, none, 1, [1091], [2])[0]
    # 19 tokens prefilled, attending the 1,072 cached before them; the decode step attends all 1,091
    assert warm.ttft_s == pytest.approx(step_time_s(base.step, 19, 0, prefill_pairs(1072, 19)))
    assert cold.ttft_s == pytest.approx(step_time_s(base.step, 1091, 0, prefill_pairs(0, 1091)))
    assert warm.e2e_s - warm.ttft_s == pytest.approx(cold.e2e_s - cold.ttft_s) == step_time_s(base.step, 1, 1091, 0)


@pytest.mark.pure
def test_a_warm_and_a_cold_cell_of_one_load_are_predicted_by_one_fit():
    """16 users on a server whose prefix cache held 97% of the prompts (warm) or only the chat frame (cold, 6%)."""
    server, start = _h200_models()
    warm, cold = _measured(server, "warm", 0.97, 16, 64), _measured(server, "cold", 0.06, 16, 64)
    one_user = _measured(server, "cold, 1 user", 0.06, 1, 16)
    assert warm.observed["ttft_median_ms"] < cold.observed["ttft_median_ms"] / 3  # what the server measured
    model = fit(start, [warm, cold, one_user])
    errors = _worst(model, [warm, cold, one_user])
    # Replayed with vLLM 0.25's asynchronous scheduling (the shipped H200 profile's), the fit from the prior stops
    # short of the server it measures on two TTFTs: a request waits a step-quantized lag, which roughens what the
    # forward differences see, and Levenberg-Marquardt stops at a cost of 8.5 where the server's own parameters cost
    # 7.2 (bench/RESULTS.md, "The H100 grid"). Named, as the misses above: each stays at its error.
    named = {("warm", "ttft_median_ms"): -0.0507, ("cold, 1 user", "ttft_median_ms"): +0.0544}
    assert all(abs(errors[c][m] - e) <= MISS_MARGIN for (c, m), e in named.items()), errors
    assert all(abs(e) <= 0.05 for c, figures in errors.items() for m, e in figures.items() if (c, m) not in named), errors
    assert predict(model, warm)["ttft_median_ms"] < predict(model, cold)["ttft_median_ms"] / 3
    # a fit to the cold cells alone predicts the warm one: its hit rate is all that differs. Its TTFT, 19 prompt tokens
    # prefilled, is mostly the asynchronous lag (a step of 16 decoders) and the API server, which the cold cells'
    # long prefills leave loose: the fit that stops short (above) puts it at -17.2% (named; -9.3% replayed synchronously)
    from_cold = _worst(fit(start, [cold, one_user]), [warm])["warm"]
    assert abs(from_cold["ttft_median_ms"] - (-0.1723)) <= MISS_MARGIN, from_cold
    assert all(abs(e) <= WITHIN for m, e in from_cold.items() if m != "ttft_median_ms"), from_cold


@pytest.mark.pure
def test_ignoring_the_hit_rate_as_calibrate_did_before_misfits_the_warm_and_cold_cells():
    """Before issue 32 every prompt was prefilled whole: the two cells are then one load, which cannot measure two TTFTs."""
    server, start = _h200_models()
    cells = [_measured(server, "warm", 0.97, 16, 64), _measured(server, "cold", 0.06, 16, 64),
             _measured(server, "cold, 1 user", 0.06, 1, 16)]
    as_before = [replace(c, hit_rate=0.0) for c in cells]
    errors = _worst(fit(start, as_before), as_before)
    assert errors["warm"]["ttft_median_ms"] > 0.5 and errors["cold"]["ttft_median_ms"] < -WITHIN, errors
    from_cold = _worst(fit(start, as_before[1:]), as_before[:1])["warm"]
    assert from_cold["ttft_median_ms"] > 1.0, from_cold  # the cold fit puts the warm TTFT at twice or more


def _without_counters(tmp_path):
    run = tmp_path / "no-counters"
    shutil.copytree(H200 / "suite-c16-run1", run)
    window = [json.loads(line) for line in (run / "server_window.jsonl").read_text().splitlines()]
    for sample in window:
        del sample["prefix_cache_queries_total"], sample["prefix_cache_hits_total"]
    (run / "server_window.jsonl").write_text("".join(json.dumps(s) + "\n" for s in window))
    return run


def _cache_suspect(tmp_path):
    """A cold run (CACHE=cold) declaring nothing shareable, where the server found 5.9% cached."""
    run = tmp_path / "suspect"
    shutil.copytree(H200 / "suite-c16-run1", run)
    summary = json.loads((run / "summary.json").read_text())
    summary["config"]["cache"] = "cold"
    (run / "summary.json").write_text(json.dumps(summary))
    records = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    (run / "samples.jsonl").write_text("".join(json.dumps({**r, "declared_cached_tokens": 0}) + "\n" for r in records))
    return run


def _refused_inputs(tmp_path):
    """Three cells of unknown hit rate and one known: a bench file without a declaration, a bench file whose
    declaration is no share, a run without the server's counters, a CACHE SUSPECT run; vLLM bench's c1."""
    bench = tmp_path / "bench"
    bench.mkdir()
    shutil.copy(H200 / "vllm-bench" / "c16-run1.json", bench / "undeclared.json")
    shutil.copy(H200 / "vllm-bench" / "c16-run2.json", bench / "bad.json")
    (bench / "cache.json").write_text(json.dumps({"kind": "llmload.prefix_cache", "schema_version": 1,
                                                  "files": {"bad.json": {"hit_rate": 1.5, "source": "a guess"}}}))
    return [bench / "undeclared.json", bench / "bad.json", _without_counters(tmp_path), _cache_suspect(tmp_path),
            H200 / "vllm-bench" / "c1.json"]


@pytest.mark.pure
def test_cells_of_unknown_hit_rate_are_refused_each_with_its_reason_and_the_rest_are_read(tmp_path):
    paths = _refused_inputs(tmp_path)
    cells, refused = read_cells([str(p) for p in paths])
    assert [c.name for c in cells] == ["c1"] and cells[0].hit_rate == pytest.approx(FRAME_RATE, abs=1e-12)
    assert [r.cell for r in refused] == [str(p) for p in paths[:4]]
    reasons = [r.reason for r in refused]
    assert all("\n" not in r for r in reasons)
    assert "declares no hit rate for it: add" in reasons[0] and '"undeclared.json"' in reasons[0]
    assert "needs hit_rate (a share from 0 to 1)" in reasons[1] and "1.5" in reasons[1]
    assert "holds no prefix-cache counters" in reasons[2]
    assert reasons[3].startswith("CACHE SUSPECT: the server found 5.9% of the prompt tokens cached")
    assert "cannot say which requests hit" in reasons[3]


@pytest.mark.pure
def test_calibrate_fits_what_is_left_and_prints_each_cells_hit_rate_and_its_source(tmp_path, capsys):
    paths = _refused_inputs(tmp_path)
    out = tmp_path / "p.json"
    options = types.SimpleNamespace(target_profile="h200-gpt-oss-20b-bf16", results=" ".join(map(str, paths)), out=str(out))
    assert run_calibrate(options, ["PROFILE=h200-gpt-oss-20b-bf16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    refusals = [line for line in lines if line.startswith("refused: ")]
    assert len(refusals) == 4 and any("CACHE SUSPECT" in line for line in refusals)
    assert any(line.startswith("Calibrating h200-gpt-oss-20b-bf16 ") and "on 1 cells, 4 refused" in line for line in lines)
    header = lines.index(next(line for line in lines if line.startswith("cell ") and "hit rate" in line))
    row = lines[header + 1].split()
    assert row[:5] == ["c1", "5.87%", "64", "of", "1091"] and row[5] == "[1]"
    assert lines[header + 2].startswith("[1] cache.json: taken as 64 of 1,091 (5.87%)")
    profile = json.loads(out.read_text())
    assert [c["name"] for c in profile["fit"]["cells"]] == ["c1"] and len(profile["fit"]["refused"]) == 4
    assert profile["fit"]["cells"][0]["hit_rate"] == pytest.approx(FRAME_RATE, abs=1e-12)
    assert profile["fit"]["cells"][0]["hit_rate_source"].startswith("cache.json: ")
    assert "4 refused (no hit rate)" in profile["source"]


@pytest.mark.integration
def test_calibrate_exits_2_when_every_cell_is_refused(tmp_path):
    paths = _refused_inputs(tmp_path)[:4]
    done = run_cli("calibrate", "RESULTS=" + " ".join(map(str, paths)), "PROFILE=h200-gpt-oss-20b-bf16",
                   f"OUT={tmp_path / 'p.json'}")
    assert done.returncode == 2 and done.stderr.startswith("error: RESULTS: every cell was refused (4")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "p.json").exists()
    assert sum(line.startswith("refused: ") for line in done.stdout.splitlines()) == 4
