"""Sweeps end to end against the built-in target: a small grid, and a resume after the runner is killed."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, run_cli

TINY = """
name: tiny
server: {engine: llmload-sim, gpu: h100, command: "python -m llmload.sim --model {MODEL}"}
defaults: {DURATION: 2s, MAX_TOKENS: 30, PROMPTS: builtin, MODEL: gpt-oss-20b}
grid:
  EFFORT: [low, high]
  USERS: [1, 2]
"""


def rows(out):
    with open(out / "cells.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.integration
def test_a_small_grid_end_to_end(tmp_path):
    scenario, out = tmp_path / "tiny.yaml", tmp_path / "sweep"
    # 1 s cells at SPEEDUP 4: the server's running count is sampled every 0.2 s, and a 0.5 s cell's two or three
    # samples all fell between requests once (CI, 2026-12-05: server_running_max 0.0)
    scenario.write_text(TINY.replace("DURATION: 2s", "DURATION: 4s"))
    done = run_cli("sweep", f"SCENARIO={scenario}", f"OUT={out}", "SPEEDUP=4", "METRICS_INTERVAL=0.2", timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[1/4] cell 0" in done.stdout and "sweep time left" in done.stdout and "4 of 4 cells finished" in done.stdout
    table = rows(out)
    assert [(r["EFFORT"], r["USERS"]) for r in table] == [("low", "1"), ("low", "2"), ("high", "1"), ("high", "2")]
    assert len({r["key"] for r in table}) == 4
    for row in table:
        assert int(row["requests_ok"]) > 0 and float(row["rps"]) > 0 and float(row["response_time_ms_median"]) > 0
        assert row["served_by_version"] == "0.32.0-sim" and float(row["server_running_max"]) >= 1
        # the cost, priced at the rates predicted for the played GPU, with its interval's columns
        assert float(row["cost_usd_per_million_output_tokens"]) > 0 and row["cost_basis"].startswith("predicted for ")
        assert "cost_usd_per_million_output_tokens_ci95_lo" in row and "predicted_rps" in row
        cell = out / "cells" / row["key"]
        for name in ("samples.jsonl", "summary.json", "config.json", "locust_stats.csv", "locust.html",
                     "server_metrics.jsonl", "cell.json", "load.log"):
            assert (cell / name).exists(), name
    assert (out / "scenario.json").exists()
    # Run again: everything is finished, nothing runs, nothing is rewritten.
    before = {p: p.stat().st_mtime_ns for p in (out / "cells").rglob("*")}
    again = run_cli("sweep", f"SCENARIO={scenario}", f"OUT={out}", "SPEEDUP=4", timeout_s=120)
    assert again.returncode == 0 and "4 already finished, 0 to run" in again.stdout
    assert before == {p: p.stat().st_mtime_ns for p in (out / "cells").rglob("*")}


@pytest.mark.integration
def test_resume_after_the_runner_is_killed_mid_cell(tmp_path):
    scenario, out = tmp_path / "three.yaml", tmp_path / "sweep"
    scenario.write_text(TINY.replace("USERS: [1, 2]", "USERS: [1]").replace("EFFORT: [low, high]", "EFFORT: [low, medium, high]")
                        .replace("DURATION: 2s", "DURATION: 4s"))
    command = [sys.executable, "-m", "llmload", "sweep", f"SCENARIO={scenario}", f"OUT={out}"]
    runner = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        finished = [d for d in (out / "cells").glob("*") if (d / "cell.json").exists()] if (out / "cells").exists() else []
        started = [d for d in (out / "cells").glob("*") if (d / "samples.jsonl").exists() and not (d / "cell.json").exists()] if finished else []
        if finished and started:
            break
        time.sleep(0.2)
    else:
        runner.kill()
        pytest.fail("the second cell never started")
    time.sleep(1.0)
    os.kill(runner.pid, signal.SIGKILL)  # no clean-up at all, like a spot instance going away
    runner.wait()
    first, cut = finished[0], started[0]
    first_files = {p: p.stat().st_mtime_ns for p in first.rglob("*")}
    time.sleep(1.0)  # the killed cell's children stop (they get SIGTERM when their parent dies)

    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 already finished, 2 to run" in done.stdout and f"as {cut.name}.partial-1" in done.stdout
    assert (out / "cells" / f"{cut.name}.partial-1" / "samples.jsonl").exists()  # the cut-short run is kept
    assert first_files == {p: p.stat().st_mtime_ns for p in first.rglob("*")}  # the finished cell is not rerun
    table = rows(out)
    assert [r["EFFORT"] for r in table] == ["low", "medium", "high"] and len({r["key"] for r in table}) == 3


@pytest.mark.integration
def test_repeats_keep_every_run_resume_and_report_their_spread(tmp_path):
    scenario, out = tmp_path / "again.yaml", tmp_path / "sweep"
    scenario.write_text("defaults: {DURATION: 2s, MAX_TOKENS: 30, MODEL: gpt-oss-20b, REPEATS: 2}\ncells: [{USERS: 2}]\n")
    done = run_cli("sweep", f"SCENARIO={scenario}", f"OUT={out}", "SPEEDUP=4", timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 runs (1 cell x REPEATS), 0 already finished, 2 to run" in done.stdout and "cell 0 run 2/2" in done.stdout
    key = rows(out)[0]["key"]
    assert [(r["key"], r["repeat"]) for r in rows(out)] == [(key, "1"), (key, "2")]
    assert (out / "cells" / key / "cell.json").exists() and (out / "cells" / f"{key}.repeat-2" / "cell.json").exists()
    with open(out / "repeats.csv") as f:
        (spread,) = list(csv.DictReader(f))
    medians = [float(r["ttft_ms_median"]) for r in rows(out)]
    assert spread["runs"] == "2" and float(spread["ttft_ms_median_min"]) == min(medians) and float(spread["ttft_ms_median_max"]) == max(medians)
    assert float(spread["ttft_ms_median_stdev"]) == pytest.approx(abs(medians[0] - medians[1]) / 2 ** 0.5)
    assert "spread between runs" in done.stdout and "ttft_ms_median" in done.stdout
    # REPEATS from make replaces the scenario's: one more run, the two made are kept as they were.
    before = {p: p.stat().st_mtime_ns for p in (out / "cells").rglob("*")}
    more = run_cli("sweep", f"SCENARIO={scenario}", f"OUT={out}", "SPEEDUP=4", "REPEATS=3", timeout_s=300)
    assert more.returncode == 0 and "3 runs (1 cell x REPEATS), 2 already finished, 1 to run" in more.stdout, more.stdout + more.stderr
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in before.items())
    assert [r["repeat"] for r in rows(out)] == ["1", "2", "3"] and (out / "cells" / f"{key}.repeat-3" / "summary.json").exists()


@pytest.mark.pure
def test_a_bad_scenario_is_one_line(cli, tmp_path):
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(TINY.replace("EFFORT: [low, high]", "EFFORT: [low, ultra]"))
    done = cli("sweep", f"SCENARIO={scenario}", f"OUT={tmp_path / 'out'}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "grid.EFFORT[1]: EFFORT='ultra' is not one of low, medium, high, none" in done.stderr
    assert not (tmp_path / "out").exists()
    missing = cli("sweep", f"OUT={tmp_path / 'out'}")
    assert missing.returncode == 2 and "SCENARIO is missing" in missing.stderr
