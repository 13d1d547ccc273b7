"""The generator's self-check: figures per process, and a starved generator flagged with WORKERS named."""

import json
import time

import gevent
import pytest

from conftest import run_cli
from llmload.loadtest.selfcheck import GeneratorMonitor
from llmload.results.generator import ProcessLoad, check, limit_warning
from llmload.results.histogram import LogHistogram


def _lag(*values_s):
    histogram = LogHistogram()
    for value_s in values_s:
        histogram.add(value_s)
    return histogram


@pytest.mark.pure
def test_a_process_over_its_limits_is_named_and_one_that_kept_up_is_not():
    calm = ProcessLoad("worker 1", wall_s=10.0, cpu_s=3.0, wakeups=100, events=150, max_events_per_wakeup=4,
                       read_lag=_lag(*[1e-4] * 99, 2e-3), loop_lag=_lag(*[5e-4] * 100))
    busy = ProcessLoad("worker 2", wall_s=10.0, cpu_s=9.7, wakeups=10, events=200, max_events_per_wakeup=60,
                       read_lag=_lag(*[0.02] * 100), loop_lag=_lag(*[1e-3] * 100))
    result = check([calm, busy])
    assert result.generator_limited is True
    first, second = result.processes
    assert first.limits == [] and first.events_per_read == 1.5 and first.cpu_cores == 0.3
    assert abs(first.arrival_to_read_lag_ms.max - 2.0) < 1e-9
    assert second.limits == ["worker 2 CPU 97% of a core", "worker 2 arrival-to-read lag p99 19.9 ms"]  # 20 ms, within the bucket
    warning = limit_warning(result)
    assert warning.startswith("warning: the load generator limited this run (worker 2 CPU 97%")
    # 1.27 cores over two processes: each should stay under half a core, so three.
    assert result.cause == "cpu_bound" and warning.endswith("spread the users over more processes with WORKERS=3")
    assert "\n" not in warning
    assert limit_warning(check([calm])) is None


@pytest.mark.pure
def test_late_without_being_busy_names_the_machine_only_when_it_had_no_idle_core():
    # The machine's 2 cores were busy all along (1.95 of 2): other work, not the generator, is the limit.
    waiting = ProcessLoad("load process", wall_s=10.0, cpu_s=0.3, loop_lag=_lag(*[0.03] * 100), cores=2,
                          machine_busy_s=19.5)
    result = check([waiting])
    assert result.cause == "busy_machine"
    assert limit_warning(result).endswith("free the machine, or add machines with EXPECT_WORKERS "
                                          "(more processes here will not help)")
    # The same lag with 13 of 16 cores idle: its own bursts (p50 low, p99 high); more processes help, never "will not".
    bursts = _lag(*[2e-4] * 95, *[0.028] * 5)
    stalling = ProcessLoad("load process", wall_s=10.0, cpu_s=6.9, loop_lag=bursts, cores=16, machine_busy_s=30.0)
    result = check([stalling])
    assert result.cause == "own_stalls" and result.processes[0].loop_lag_bursty is True
    warning = limit_warning(result)
    assert "will not help" not in warning and "in bursts" in warning
    assert warning.endswith("spread the users over more processes with WORKERS=6")  # p99 ~28 ms over 5 ms, from 1
    # On 2 cores with one idle, it asks for what fits there and sends the rest to other machines.
    cramped = ProcessLoad("load process", wall_s=10.0, cpu_s=6.9, loop_lag=bursts, cores=2, machine_busy_s=10.0)
    assert limit_warning(check([cramped])).endswith("this machine has room for about 3 processes (1.0 of 2 cores "
                                                    "idle): WORKERS=3 here, and more machines with EXPECT_WORKERS "
                                                    "for the rest")


@pytest.mark.pure
def test_the_masters_lag_delays_no_request():
    master = ProcessLoad("master", wall_s=10.0, cpu_s=1.0, loop_lag=_lag(*[0.02] * 100), cores=16, machine_busy_s=40.0)
    worker = ProcessLoad("worker 1", wall_s=10.0, cpu_s=2.0, loop_lag=_lag(*[1e-4] * 100), cores=16, machine_busy_s=40.0)
    assert check([master, worker]).generator_limited is False


@pytest.mark.pure
def test_a_deliberately_starved_event_loop_is_flagged():
    monitor = GeneratorMonitor("load process", probe_interval_s=0.01)

    def hog():
        """Holds the hub 40 ms at a time, as a generator with too many streams does."""
        for _ in range(15):
            spin_until_s = time.monotonic() + 0.04
            while time.monotonic() < spin_until_s:
                pass
            gevent.sleep(0.001)  # waits on the hub, as a socket read does

    gevent.spawn(hog).join()
    result = check([monitor.stop()]).to_dict()
    process = result["processes"][0]
    assert result["generator_limited"] is True
    assert process["event_loop_lag_ms"]["p99"] > 5.0
    assert any("event-loop lag" in reason for reason in process["limits"])


@pytest.mark.integration
def test_a_run_reports_its_generator(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=4", "REQUESTS=8", "MAX_TOKENS=12", "EFFORT=low", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    generator = json.loads((out / "summary.json").read_text())["generator"]
    (process,) = generator["processes"]
    assert isinstance(generator["generator_limited"], bool)
    assert process["events_per_read"] >= 1.0 and process["cpu_cores"] > 0
    assert process["streams"] == 4 and process["machine_cores"] >= 1 and process["cpu_per_event_us"] > 0
    assert process["arrival_to_read_lag_ms"]["count"] >= 8 * 12  # kernel stamps: one lag per event read
    assert process["event_loop_lag_ms"]["count"] > 0
    assert "Load generator" in done.stdout and "Event-loop lag p50/p99/max (ms):" in done.stdout
    assert ("warning: the load generator limited this run" in done.stdout) == generator["generator_limited"]
