"""A planted API key against a target that requires it: every call sends it, and no command line or file holds it."""

import csv
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from llmload.sim import start_sim, stop_sim

KEY = "sk-planted-secret-7d41e2b9"


@pytest.fixture(scope="module")
def locked_sim():
    """The built-in target requiring KEY on every route but /health."""
    process, url = start_sim(["--fixed-ttft-ms", "20", "--fixed-itl-ms", "5"], api_key=KEY)
    yield url
    stop_sim(process)


def command_lines() -> list[str]:
    return subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout.splitlines()


def run_watching_ps(command: list[str], env: dict[str, str], timeout_s: float = 300) -> tuple[int, str, list[str]]:
    """Run ``command``; its exit code, its output, and every command line that held KEY while it ran."""
    process = subprocess.Popen(command, cwd=REPO, env={**os.environ, **env}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline:
        seen.update(line for line in command_lines() if KEY in line)
        time.sleep(0.1)
    output, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    return process.returncode, output, sorted(seen)


def files_holding_key(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


@pytest.mark.integration
def test_make_load_keeps_the_key_off_command_lines_and_out_of_every_file(locked_sim, tmp_path):
    out = tmp_path / "run"
    settings = [f"HOST={locked_sim}", "DURATION=3s", "USERS=2", "MAX_TOKENS=20", f"OUT={out}"]
    # Given to make as a variable: make's own command line holds what was typed, no other process does.
    code, output, seen = run_watching_ps(["make", "load", f"API_KEY={KEY}", *settings], {})
    assert code == 0, output
    assert "Successful requests" in output and KEY not in output
    assert seen and all(line.startswith("make ") for line in seen), seen
    assert files_holding_key(out) == []
    assert {"samples.jsonl", "summary.json", "config.json", "locust.html", "locust_stats.csv"} <= {p.name for p in out.iterdir()}


@pytest.mark.integration
def test_key_from_the_environment_is_on_no_command_line(locked_sim, tmp_path):
    out = tmp_path / "run"
    code, output, seen = run_watching_ps(
        ["make", "load", f"HOST={locked_sim}", "DURATION=2s", "MAX_TOKENS=20", f"OUT={out}"], {"OPENAI_API_KEY": KEY})
    assert code == 0, output
    assert seen == [] and KEY not in output and files_holding_key(out) == []


@pytest.mark.integration
def test_sweep_against_a_server_that_needs_a_key(locked_sim, tmp_path):
    scenario, out = tmp_path / "locked.yaml", tmp_path / "sweep"
    scenario.write_text("name: locked\ndefaults: {DURATION: 2s, MAX_TOKENS: 20, PROMPTS: builtin}\ngrid:\n  USERS: [1]\n")
    code, output, seen = run_watching_ps(
        ["make", "sweep", f"SCENARIO={scenario}", f"HOST={locked_sim}", f"OUT={out}", "METRICS_INTERVAL=0.2"], {"API_KEY": KEY})
    assert code == 0, output
    with open(out / "cells.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["requests_ok"]) > 0 and row["served_by_version"] == "0.32.0-sim"
    assert int(row["server_samples"]) > 0  # the /metrics sampler sent the key too
    assert seen == [] and KEY not in output and files_holding_key(out) == []


@pytest.mark.integration
def test_sweep_without_the_key_says_what_to_do(locked_sim, tmp_path):
    scenario = tmp_path / "locked.yaml"
    scenario.write_text("name: locked\ndefaults: {DURATION: 2s}\ngrid:\n  USERS: [1]\n")
    done = run_cli("sweep", f"SCENARIO={scenario}", f"HOST={locked_sim}", f"OUT={tmp_path / 'sweep'}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stdout + done.stderr
    assert "needs an API key: export API_KEY or OPENAI_API_KEY, or give API_KEY_FILE" in done.stderr


@pytest.mark.integration
def test_verify_sends_the_key_from_a_file(locked_sim, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    out = tmp_path / "prompts"
    done = run_cli("prompts", "SIZES=2k", "COUNT=5", f"OUT={out}", f"VERIFY={locked_sim}", f"API_KEY_FILE={key_file}",
                   timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all counts equal" in done.stdout and KEY not in done.stdout + done.stderr
    assert files_holding_key(out) == []


@pytest.mark.pure
@pytest.mark.parametrize("content,message", [(None, "cannot be read"), ("", "is empty")])
def test_a_bad_key_file_is_one_line(cli, tmp_path, content, message):
    key_file = tmp_path / "key"
    if content is not None:
        key_file.write_text(content)
    done = cli("load", f"API_KEY_FILE={key_file}", f"OUT={tmp_path / 'run'}", "DURATION=1s")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and f"API_KEY_FILE={key_file} {message}" in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.pure
def test_the_makefile_keeps_every_secret_option_off_the_command_line():
    from llmload.options import OPTIONS, PROMPT_OPTIONS, SWEEP_OPTIONS

    line = next(line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("SECRETS :="))
    assert {o.key for o in (*OPTIONS, *PROMPT_OPTIONS, *SWEEP_OPTIONS) if o.secret} <= set(line.split()[2:])


@pytest.mark.integration
def test_verify_without_the_key_names_verify(locked_sim, tmp_path):
    done = run_cli("prompts", "SIZES=2k", "COUNT=5", f"OUT={tmp_path / 'prompts'}", f"VERIFY={locked_sim}", timeout_s=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: VERIFY={locked_sim} answered 401 Unauthorized to GET /v1/models: it needs an API key")
