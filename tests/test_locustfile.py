"""`locust -f locustfile.py` run directly, as Locust users start it: the suite's options, files and counts."""

import csv
import json
import subprocess
import sys

import pytest

from conftest import REPO
from llmload.results.records import read_records

pytestmark = pytest.mark.integration


def test_a_direct_headless_locust_run(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", "locustfile.py", "--headless", "--host", sim_fixed, "-u", "2", "-r", "2",
         "-t", "2s", "--effort", "low", "--max-tokens", "5", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    records = [r for r in read_records(out / "samples.jsonl") if r.error != "interrupted"]
    with (out / "locust_stats.csv").open() as f:
        aggregated = next(row for row in csv.DictReader(f) if row["Name"] == "Aggregated")
    assert summary["config"]["effort"] == "low" and summary["config"]["max_tokens"] == 5
    assert summary["requests_ok"] == len(records) == int(aggregated["Request Count"]) > 0
    assert all(r.completion_tokens == 5 and r.finish_reason == "length" for r in records)
