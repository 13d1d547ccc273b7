"""RATE's and TRACE's dispatcher wakes, and the built-in target's timers: never before the due instant, on Linux as
soon after it as the kernel's own sleep, at once when the test stops; the built-in target's own core."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time

import gevent
import pytest
from gevent.event import Event
from gevent.monkey import get_original

from llmload.loadtest.wake import DueWaker, make_due_waker
from llmload.system.processes import core_of_its_own
from llmload.sim.engine import MILLISECOND_WINDOW_S, send_window_s
from llmload.sim.loop import PreciseEpollSelector, new_event_loop

WAKERS = {"timerfd where there is one": make_due_waker, "gevent's timer": DueWaker}


@pytest.fixture(params=list(WAKERS))
def waker_and_stop(request: pytest.FixtureRequest):
    stopping = Event()
    waker = WAKERS[request.param](stopping)
    yield waker, stopping
    waker.close()


@pytest.mark.pure
def test_the_linux_waker_is_the_timerfd_one() -> None:
    waker = make_due_waker(Event())
    try:
        assert (type(waker) is not DueWaker) == sys.platform.startswith("linux")
    finally:
        waker.close()


@pytest.mark.pure
def test_a_wake_never_comes_before_its_due_instant(waker_and_stop) -> None:
    waker, _ = waker_and_stop
    for delay_s in (0.0004, 0.002, 0.0001, 0.003):  # a timer armed again after each wake
        due_s = time.monotonic() + delay_s
        assert waker.wait_until(due_s) is False
        assert time.monotonic() >= due_s


@pytest.mark.pure
def test_behind_schedule_it_yields_once_so_the_requests_spawned_before_start(waker_and_stop) -> None:
    waker, _ = waker_and_stop
    started: list[int] = []
    gevent.spawn(started.append, 1)
    assert waker.wait_until(time.monotonic() - 1.0) is False
    assert started == [1]


LOOP_TURN_S = 0.00025
"""What the waker may add to the kernel's own wake-up: one turn of gevent's loop, a quarter of the millisecond that
epoll's rounding costs."""


def _lateness_s(wait_until, delay_s: float) -> float:
    due_s = time.monotonic() + delay_s
    wait_until(due_s)
    return time.monotonic() - due_s


@pytest.mark.pure
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the timerfd waker is Linux's")
def test_the_linux_waker_wakes_as_soon_as_the_kernels_own_sleep_not_a_millisecond_late() -> None:
    """Measured against a baseline taken in the same loop, interleaved: the process's plain nanosleep (no epoll) is
    as soon as any wake-up can come on this machine now, and gevent's timer is the coarse wake the timerfd replaced."""
    stopping = Event()
    exact, coarse = make_due_waker(stopping), DueWaker(stopping)
    sleep = get_original("time", "sleep")  # the kernel's clock_nanosleep, even where Locust has patched time.sleep
    late: dict[str, list[float]] = {"kernel": [], "timerfd": [], "gevent": []}
    try:
        for _ in range(25):
            for delay_s in (0.0002, 0.0013, 0.0006, 0.0021):  # between whole milliseconds, which epoll rounds up
                late["kernel"].append(_lateness_s(lambda due_s: sleep(max(0.0, due_s - time.monotonic())), delay_s))
                late["timerfd"].append(_lateness_s(exact.wait_until, delay_s))
                late["gevent"].append(_lateness_s(coarse.wait_until, delay_s))
    finally:
        exact.close()
        coarse.close()
    median_ms = {name: round(statistics.median(values) * 1e3, 3) for name, values in late.items()}
    assert median_ms["timerfd"] <= median_ms["kernel"] + LOOP_TURN_S * 1e3, median_ms
    assert median_ms["timerfd"] < median_ms["gevent"], median_ms


FAR_S = 5.0
"""A due instant a waker that missed the stop would sleep to: the test fails then, in seconds, not an hour."""
STOP_PROMPT_S = 1.0
"""How soon a stop must end a wait: the loop's next turn, with room for a loaded machine, and far short of FAR_S."""


@pytest.mark.pure
def test_stopping_ends_a_wait_long_before_its_due_instant(waker_and_stop) -> None:
    waker, stopping = waker_and_stop
    stopped_s: list[float] = []
    gevent.spawn_later(0.01, lambda: (stopping.set(), stopped_s.append(time.monotonic())))
    due_s = time.monotonic() + FAR_S
    assert waker.wait_until(due_s) is True
    returned_s = time.monotonic()
    assert stopped_s and stopped_s[0] <= returned_s < stopped_s[0] + STOP_PROMPT_S, (stopped_s, returned_s, due_s)
    asked_s = time.monotonic()
    assert waker.wait_until(asked_s + FAR_S) is True  # already stopping: returns at once
    assert time.monotonic() - asked_s < STOP_PROMPT_S


@pytest.mark.pure
def test_the_built_in_targets_timers_never_fire_before_their_instant() -> None:
    loop = new_event_loop()
    fired: list[tuple[float, float]] = []
    try:
        for delay_s in (0.0003, 0.0001, 0.002, 0.0007):  # sub-millisecond: a token's due time at a high SPEEDUP
            due_s = loop.time() + delay_s
            done = loop.create_future()
            loop.call_at(due_s, lambda due=due_s, f=done: (fired.append((due, time.monotonic())), f.set_result(None)))
            loop.run_until_complete(done)
    finally:
        loop.close()
    assert len(fired) == 4 and all(ran_s >= due_s for due_s, ran_s in fired)


@pytest.mark.pure
def test_on_linux_the_targets_loop_waits_on_a_timerfd_not_on_epolls_milliseconds() -> None:
    selector = PreciseEpollSelector()
    try:
        asked_s = time.monotonic()
        assert selector.select(0.0003) == []  # the timer's own readiness is never reported as an event
        if sys.platform.startswith("linux"):
            assert selector._wait_s(0.0003) == -1.0  # epoll waits for the armed timer, not a rounded-up millisecond
        assert time.monotonic() - asked_s >= 0.0003
    finally:
        selector.close()


@pytest.mark.pure
def test_the_targets_tokens_leave_early_only_where_timers_wake_a_millisecond_late() -> None:
    class Exact:
        timers_exact = True

    plain = asyncio.new_event_loop()
    try:
        assert send_window_s(Exact()) == 0.0  # type: ignore[arg-type]
        assert send_window_s(plain) == MILLISECOND_WINDOW_S
    finally:
        plain.close()


@pytest.mark.integration
def test_the_built_in_targets_loop_has_exact_timers_on_linux() -> None:
    """In a process like the target's (no Locust, so no gevent patching), as python -m llmload.sim runs it."""
    code = "from llmload.sim.loop import new_event_loop; print(getattr(new_event_loop(), 'timers_exact', False))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(sys.platform.startswith("linux"))


@pytest.mark.integration
def test_the_built_in_target_gets_a_core_of_its_own_for_the_block_only() -> None:
    cores = sorted(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with core_of_its_own(child.pid) as core:
            if len(cores) < 2:
                assert core is None and os.sched_getaffinity(child.pid) == set(cores)
            else:
                assert core == cores[-1]
                assert os.sched_getaffinity(child.pid) == {cores[-1]}
                assert os.sched_getaffinity(0) == set(cores[:-1])
        assert os.sched_getaffinity(0) == set(cores)
    finally:
        child.kill()
        child.wait()


@pytest.mark.integration
def test_a_target_already_gone_leaves_the_cores_shared() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    cores = os.sched_getaffinity(0)
    with core_of_its_own(child.pid) as core:
        assert core is None and os.sched_getaffinity(0) == cores
