"""make tune: the grid, the objective's estimates and differences, the search, and whole tunes on the built-in target
(a rehearsal: it plays each configuration's modelled flags) and on the real vLLM (CPU build)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, run_cli
from llmload.errors import ConfigError
from llmload.results.tunefile import read_tune
from llmload.tune.estimate import Estimate, difference, geometric_mean, leader, overlaps
from llmload.tune.grid import grid_configurations, parse_grid, scenario_configurations


@pytest.mark.pure
def test_the_grid_is_the_product_of_its_entries_the_first_the_baseline():
    axes = parse_grid("max-num-batched-tokens=2048,4096 async-scheduling=off,on env:VLLM_ATTENTION_BACKEND=FLASH_ATTN")
    configs = grid_configurations(axes)
    assert len(configs) == 4
    base, last = configs[0], configs[-1]
    assert base.args == ("--max-num-batched-tokens", "2048") and base.env == {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}
    assert last.args == ("--max-num-batched-tokens", "4096", "--async-scheduling")
    assert last.name == "max-num-batched-tokens=4096 async-scheduling=on env:VLLM_ATTENTION_BACKEND=FLASH_ATTN"
    assert grid_configurations(parse_grid("max-num-seqs=default,8"))[0].args == ()  # default: the flag left out


@pytest.mark.pure
@pytest.mark.parametrize("grid, message", [
    ("max-num-seqs=", "has no values"), ("max-num-seqs", "has no values"), ("a=1,2 a=3", "a is given twice"),
    ("b@d=1", "is not a flag"), ("a=1,1", "repeats a value"), ("", "GRID is empty")])
def test_a_bad_grid_is_one_line(grid, message):
    with pytest.raises(ConfigError, match=message):
        parse_grid(grid)


@pytest.mark.pure
def test_a_scenarios_configurations_by_name():
    configs = scenario_configurations([{"name": "baseline"}, {"name": "tuned", "args": "--max-num-batched-tokens 4096",
                                                               "env": {"X": 1}}])
    assert [c.name for c in configs] == ["baseline", "tuned"] and configs[1].args == ("--max-num-batched-tokens", "4096")
    assert configs[1].env == {"X": "1"}
    with pytest.raises(ConfigError, match="given twice"):
        scenario_configurations([{"name": "a"}, {"name": "a"}])


@pytest.mark.pure
def test_a_difference_is_beyond_noise_only_when_its_interval_excludes_no_change():
    base = Estimate.of("throughput", 1000.0, [950.0, 1050.0])
    better = difference(Estimate.of("throughput", 1200.0, [1150.0, 1250.0]), base)
    assert better.change_pct == pytest.approx(20.0) and better.beyond_noise and better.low_pct > 0
    noise = difference(Estimate.of("throughput", 1030.0, [950.0, 1110.0]), base)  # the 000 report's +6% from one run
    assert noise.beyond_noise is False and noise.low_pct < 0 < noise.high_pct
    cheaper = difference(Estimate.of("cost", 0.8, [0.75, 0.85]), Estimate.of("cost", 1.0, [0.95, 1.05]))
    assert cheaper.change_pct == pytest.approx(20.0) and cheaper.beyond_noise  # lower cost is better: positive
    more_users = difference(Estimate.of("capacity", 16, [15, 17]), Estimate.of("capacity", 8, [7, 9]), additive=True)
    assert more_users.beyond_noise and more_users.low_pct == pytest.approx((15 - 9) / 8 * 100)
    assert difference(Estimate.of("capacity", 9, [8, None]), Estimate.of("capacity", 8, [7, 9]), additive=True).beyond_noise is False


@pytest.mark.pure
def test_the_cells_geometric_mean_and_the_leader():
    mean = geometric_mean([Estimate.of("throughput", 100.0, [90.0, 110.0]), Estimate.of("throughput", 400.0, [360.0, 440.0])])
    assert mean.value == pytest.approx(200.0) and mean.low < 200.0 < mean.high
    estimates = [Estimate.of("throughput", 100.0, [90.0, 110.0]), Estimate.of("throughput", 150.0, [140.0, 160.0]),
                 Estimate.of("throughput", 145.0, [130.0, 170.0])]
    assert leader(estimates) == 1 and overlaps(estimates[1], estimates[2]) and not overlaps(estimates[0], estimates[1])


@pytest.mark.pure
def test_an_estimate_without_an_interval_is_never_beyond_noise():
    """A run too short for an interval (fewer windows than batch means need) is not an exact figure."""
    bare = Estimate.of("throughput", 443.0, None)
    assert (bare.low, bare.high) == (None, None) and overlaps(bare, Estimate.of("throughput", 900.0, [890.0, 910.0]))
    versus = difference(bare, Estimate.of("throughput", 420.0, [410.0, 430.0]))
    assert versus.change_pct == pytest.approx(443 / 420 * 100 - 100) and versus.beyond_noise is None
    assert versus.text().endswith("%") and "beyond" not in versus.text()


@pytest.mark.pure
@pytest.mark.parametrize("grid, factors", [
    ("max-num-seqs=2,4,8,16,32,64 max-num-batched-tokens=512,4096", (1 / 9, 1 / 3, 1.0)),
    ("max-num-seqs=1,2,4,8,16", (1 / 3, 1.0)),
    ("max-num-seqs=" + ",".join(map(str, range(1, 41))), (1 / 27, 1 / 9, 1 / 3, 1.0))])
def test_halvings_rungs_measure_three_times_as_long_each(grid, factors):
    from llmload import options as opts
    from llmload.settings import parse_settings
    from llmload.tune.plan import plan_tune

    parsed = parse_settings([f"GRID={grid}", "SEARCH=halving"], (*opts.OPTIONS, *opts.TUNE_OPTIONS))
    assert plan_tune(parsed, {}).rung_factors == pytest.approx(factors)


@pytest.mark.pure
def test_halving_keeps_the_best_third_of_those_within_the_leaders_interval():
    from llmload.tune.grid import Configuration
    from llmload.tune.runner import _Measured, _survivors

    configs = [Configuration(f"c{i}") for i in range(12)]

    def measured(intervals):
        return {c.name: _Measured(Estimate.of("throughput", 100.0 + 10 * i, intervals(i)), [], 1.0)
                for i, c in enumerate(configs)}

    bare = measured(lambda i: None)  # runs too short for an interval: every one overlaps; the best third go on
    assert [c.name for c in _survivors(configs, bare)] == ["c8", "c9", "c10", "c11"]
    assert len(_survivors(configs, bare, last=True)) == 12
    tight = measured(lambda i: [98.0 + 10 * i, 102.0 + 10 * i] if i < 11 else [195.0, 225.0])
    assert [c.name for c in _survivors(configs, tight)] == ["c10", "c11"]  # c9 (188-192) lies below the leader's
    assert [c.name for c in _survivors(configs[:2], measured(lambda i: None))] == ["c0", "c1"]  # at least two
    alone = measured(lambda i: [99.0 + 10 * i, 101.0 + 10 * i])
    assert [c.name for c in _survivors(configs, alone)] == ["c11"]  # beyond every other's interval: the search ends


def _tune(out, *settings, timeout_s=600):
    return run_cli("tune", f"OUT={out}", *settings, timeout_s=timeout_s)


@pytest.mark.integration
def test_a_rehearsed_grid_names_the_best_beyond_noise_and_a_rerun_resumes(tmp_path):
    """The built-in target plays --max-num-seqs: 4 running sequences at 16 users queue the rest, 32 take them all."""
    out = tmp_path / "tune"
    settings = ("GRID=max-num-seqs=4,32 async-scheduling=off,on", "USERS=16", "DURATION=40s", "SPEEDUP=10", "MAX_TOKENS=200")
    done = _tune(out, *settings)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    result = read_tune(out)
    assert result.rehearsal and result.search == "grid" and len(result.configurations) == 4
    assert result.best.startswith("max-num-seqs=32") and all(c.status == "measured" for c in result.configurations)
    by_name = {c.name: c for c in result.configurations}
    assert by_name["max-num-seqs=32 async-scheduling=off"].beyond_noise is True
    assert by_name["max-num-seqs=4 async-scheduling=on"].not_modelled == ["--async-scheduling"]
    assert by_name["max-num-seqs=4 async-scheduling=on"].beyond_noise is False  # not modelled: the baseline's figure
    assert all(c.startup_s is not None and (out / "configs" / c.slug / "server-0" / "launch.json").exists()
               for c in result.configurations)
    assert "REHEARSAL: tune result" in done.stdout and (out / "configs.csv").exists()
    assert (out / "figures" / "tune_objective.svg").exists() and (out / "figures" / "tune_pareto.svg").exists()
    again = _tune(out, *settings)
    assert again.returncode == 0 and again.stdout.count("measured before, reused") == 4
    assert "(http://127.0.0.1:" not in again.stdout  # no server was started again


@pytest.mark.integration
def test_a_configuration_that_fails_to_start_is_recorded_and_the_next_runs(tmp_path):
    out = tmp_path / "tune"
    done = _tune(out, "GRID=max-num-batched-tokens=64,4", "MAX_NUM_SEQS=8", "USERS=4", "DURATION=20s", "SPEEDUP=10",
                 "MAX_TOKENS=50")
    # MAX_NUM_SEQS is no load setting: refused before anything starts
    assert done.returncode == 2 and "unknown setting MAX_NUM_SEQS" in done.stderr
    done = _tune(out, "GRID=max-num-seqs=8,64 max-num-batched-tokens=32", "USERS=4", "DURATION=20s", "SPEEDUP=10",
                 "MAX_TOKENS=50")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    by_name = {c.name: c for c in read_tune(out).configurations}
    failed = by_name["max-num-seqs=64 max-num-batched-tokens=32"]  # as vLLM, the target refuses fewer tokens than seqs
    assert failed.status == "failed to start" and any("--max-num-batched-tokens (32)" in line for line in failed.log_tail)
    assert by_name["max-num-seqs=8 max-num-batched-tokens=32"].status == "measured"


def _groups_alive(out) -> list[int]:
    """The process groups of the tune's servers (their keepers' pids, from startup.json) that still have a process."""
    alive = []
    for started in out.glob("configs/*/server-*/startup.json"):
        pgid = json.loads(started.read_text()).get("pgid")
        if pgid:
            try:
                os.killpg(pgid, 0)
                alive.append(pgid)
            except ProcessLookupError:
                pass
    return alive


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_stopping_the_tune_leaves_no_server(tmp_path, sig):
    """Ctrl-C of the tune, and kill -9 of its own process: no server process is left (its keeper ends the group)."""
    out = tmp_path / "tune"
    tune = subprocess.Popen([sys.executable, "-m", "llmload", "tune", f"OUT={out}", "GRID=max-num-seqs=8,16", "USERS=4",
                             "DURATION=600s", "SPEEDUP=1", "MAX_TOKENS=50"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("configs/*/rung-0/cells/*/samples.jsonl")):
        assert time.monotonic() < deadline and tune.poll() is None, "the tune's first load did not start"
        time.sleep(0.3)
    pids = [json.loads(p.read_text()).get("pgid") for p in out.glob("configs/*/server-*/startup.json")]
    assert pids and all(pids)
    os.kill(tune.pid, sig)
    tune.wait(120)
    deadline = time.monotonic() + 60
    while _groups_alive(out):
        assert time.monotonic() < deadline, f"server groups still alive: {_groups_alive(out)}"
        time.sleep(0.5)


def _processes_with_port(port: int) -> list[int]:
    """Live processes whose command line gives ``--port <port>``: the server the tune launched, whatever its group."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace").split("\0")
            state = open(f"/proc/{entry}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and any(a == "--port" and b == str(port) for a, b in zip(argv, argv[1:])):
            found.append(int(entry))
    return found


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_server_starts_stops_it_and_says_so(tmp_path, sig):
    """SIGTERM or Ctrl-C while the tune waits for a server to serve: one line, 128 + the signal, no server left (SIGTERM
    used to kill the tune by its default action there, leaving the server to its keeper)."""
    out = tmp_path / "tune"
    never_ready = f"{sys.executable} -c 'import time; time.sleep(600)'"
    tune = subprocess.Popen([sys.executable, "-m", "llmload", "tune", f"OUT={out}", f"SERVE={never_ready}",
                             "GRID=max-num-seqs=8,16", "USERS=4", "DURATION=60s", "MAX_TOKENS=50"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("configs/*/server-0/launch.json")):
        assert time.monotonic() < deadline and tune.poll() is None, "the tune did not launch a server"
        time.sleep(0.2)
    port = json.loads(next(out.glob("configs/*/server-0/launch.json")).read_text())["port"]
    while not _processes_with_port(port):
        assert time.monotonic() < deadline and tune.poll() is None, "the server's process did not appear"
        time.sleep(0.2)
    os.kill(tune.pid, sig)
    _, stderr = tune.communicate(timeout=120)
    assert tune.returncode == 128 + sig, stderr
    assert f"interrupted by {signal.Signals(sig).name}" in stderr and "Traceback" not in stderr
    assert _processes_with_port(port) == []  # stopped by the tune itself, before it exited


@pytest.mark.integration
def test_a_server_killed_mid_run_is_recorded_and_a_rerun_measures_it_again(tmp_path):
    """kill -9 of the first configuration's server group mid-load: "died mid-run" with its log's tail, the next
    configuration runs; its rung is set aside (rung-0.died-1), so the rerun measures it again and reuses the other."""
    out = tmp_path / "tune"
    settings = ("GRID=max-num-seqs=8,16", "USERS=4", "DURATION=8s", "SPEEDUP=1", "MAX_TOKENS=50")
    tune = subprocess.Popen([sys.executable, "-m", "llmload", "tune", f"OUT={out}", *settings], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    first = out / "configs" / "max-num-seqs_8"
    deadline = time.monotonic() + 120
    while not list(first.glob("rung-0/cells/*/samples.jsonl")):
        assert time.monotonic() < deadline and tune.poll() is None, "the tune's first load did not start"
        time.sleep(0.1)
    os.killpg(json.loads((first / "server-0" / "startup.json").read_text())["pgid"], signal.SIGKILL)
    output, _ = tune.communicate(timeout=300)
    assert tune.returncode == 0, output[-3000:]
    died, other = read_tune(out).configurations
    assert died.status == "died mid-run" and "while in use" in died.reason and died.log_tail
    assert other.status == "measured" and read_tune(out).best == other.name
    assert (first / "rung-0.died-1" / "cells").is_dir() and not (first / "rung-0").exists()
    again = _tune(out, *settings)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert "[max-num-seqs=16] rung 1/1 (1 of the load time): measured before, reused" in again.stdout
    assert again.stdout.count("    ready in ") == 1  # the configuration that died, measured again
    assert [c.status for c in read_tune(out).configurations] == ["measured", "measured"]
