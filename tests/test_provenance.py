"""A rehearsal is said to be one everywhere: summary.json, cells.csv, the result block, report.html."""

import csv
import json
import re
import subprocess
import sys

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.integration

DECLARED = """
name: rehearsed
server: {engine: vllm, version: "0.10.1+gptoss", gpu: h100, command: "vllm serve openai/{MODEL}"}
defaults: {DURATION: 2s, MAX_TOKENS: 30, PROMPTS: builtin, MODEL: gpt-oss-20b, EFFORT: low}
grid:
  USERS: [1, 2]
"""


def test_a_rehearsed_sweep_says_so_in_every_result(tmp_path):
    scenario, out = tmp_path / "rehearsed.yaml", tmp_path / "sweep"
    scenario.write_text(DECLARED)
    done = run_cli("sweep", f"SCENARIO={scenario}", f"OUT={out}", "SPEEDUP=4", timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(out / "cells.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    for row in rows:
        # What answered, by its own report, apart from what the scenario declares.
        assert row["served_by_name"] == "llmload.sim" and row["served_by_rehearsal"] == "True"
        assert row["served_by_version"] == "0.32.0-sim" and row["served_by_gpu_profile"] == "h100"
        assert float(row["served_by_speedup"]) == 4.0
        assert row["declared_version"] == "0.10.1+gptoss"
        cell = out / "cells" / row["key"]
        served_by = json.loads((cell / "summary.json").read_text())["config"]["served_by"]
        assert served_by["rehearsal"] is True and served_by["speedup"] == 4.0 and served_by["model"] == "openai/gpt-oss-20b"
        log = (cell / "load.log").read_text()
        assert "REHEARSAL: Serving Benchmark Result" in log and "SPEEDUP 4x" in log

    plotted = subprocess.run([sys.executable, "-m", "plots", "figures", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert plotted.returncode == 0, plotted.stderr
    page = (out / "report.html").read_text()
    # the default h100 profile is extrapolated: the label says so (issue 31 item 5)
    assert 'class="rehearsal"' in page and "REHEARSAL (built-in target playing h100, SPEEDUP 4x, UNVALIDATED profile)" in page
    # The declared version appears only in the scenario's declaration, never as something a server reported.
    declared_at = page.index("Declared by the scenario")
    assert [m.start() for m in re.finditer(re.escape("0.10.1+gptoss"), page)] and \
        all(i > declared_at for i in (m.start() for m in re.finditer(re.escape("0.10.1+gptoss"), page)))
    assert "llmload.sim 0.32.0-sim" in page
    svg = (out / "figures" / "fig1_response_time.svg").read_text()
    assert "REHEARSAL" in svg and "SPEEDUP 4x" in svg


def test_a_host_that_is_the_built_in_target_is_a_rehearsal_too(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=1", "DURATION=1s", "MAX_TOKENS=5", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    served_by = json.loads((out / "summary.json").read_text())["config"]["served_by"]
    assert served_by == {"name": "llmload.sim", "rehearsal": True, "version": "0.32.0-sim", "model": "openai/gpt-oss-20b",
                         "gpu_profile": "h100", "speedup": 1.0, "host": sim_fixed, "profile": None,
                         "profile_kind": "fixed timings (FIXED_TTFT_MS, FIXED_ITL_MS)", "engine": "vllm",
                         "validation": {"status": "fixed", "method": "fixed timings: no model"}}
    assert "REHEARSAL" in done.stdout
