"""Child processes, signals and limits: what many streams and long, interruptible runs need from the OS."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
from types import FrameType
from typing import Callable, Iterator

from llmload.errors import Interrupted

__all__ = ["STOP_SIGNALS", "core_of_its_own", "raise_fd_limit", "die_with_parent", "stoppable_child", "accept_stop_signals", "stop_signals_deferred",
           "SignalForwarder"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def raise_fd_limit() -> None:
    """Lift the open-file soft limit to the hard one: 1,000 streams need more than the usual 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass  # keep the soft limit; only very high concurrency is affected, and fails as "connect"


@contextlib.contextmanager
def core_of_its_own(pid: int) -> Iterator[int | None]:
    """While the block runs, process ``pid`` (the built-in target) has the last of this process's cores to itself,
    and this process and the load processes it starts have the others; yields that core, or None with one core (or
    no affinity calls: not Linux).

    Sharing cores, the target's process woke on the generator's core and ran before it: a trace replayed at 200
    requests/s went out 2.2-2.5 ms late at the p99 instead of 0.65 ms (bench/trace_bench.py).
    """
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    if len(cores) < 2:
        yield None
        return
    try:
        os.sched_setaffinity(pid, {cores[-1]})
    except OSError:  # gone already, or not ours to place: share the cores as before
        yield None
        return
    os.sched_setaffinity(0, cores[:-1])
    try:
        yield cores[-1]
    finally:
        os.sched_setaffinity(0, cores)


def die_with_parent() -> None:
    """For ``preexec_fn``: the child gets SIGTERM when its parent dies, so a killed run leaves nothing running."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def stoppable_child() -> None:
    """For ``preexec_fn`` of a child with its own SIGINT/SIGTERM handlers: die_with_parent, and the signals held.

    Held (blocked, not lost) until the child calls accept_stop_signals with its handlers in place:
    a Ctrl-C during its imports then stops it the same graceful way, never with a traceback.
    """
    die_with_parent()
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def accept_stop_signals() -> None:
    """Deliver the SIGINT/SIGTERM held since stoppable_child (if any) to the handlers now in place."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Within: SIGINT and SIGTERM are noted, not acted on; on leaving, each is raised again for the handlers in place.

    For a step that must not be cut in two (a child spawned and not yet held as ours). A signal mask cannot do it: a
    process-directed signal goes to any thread not blocking it (numpy's BLAS threads), and Python acts on it in the
    main thread whatever the main thread's mask. Main thread only, as ``signal.signal``.
    """
    noted: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, _frame: noted.append(signum))
                for signum in STOP_SIGNALS if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in noted[:1]:  # the first: as if it came now (a second would only repeat it)
            signal.raise_signal(signum)


class SignalForwarder:
    """While active, SIGINT and SIGTERM go to the child being waited for, one for one.

    The child runs in its own session (``start_new_session=True``), so a terminal's Ctrl-C reaches
    it only through us, once per press: its first stops the run gracefully, its second cuts it.
    With no child running, the first signal raises Interrupted(idle_message); once one was forwarded, later
    ones are only counted (the run is already ending). ``first`` is the first signal's number.
    """

    def __init__(self, idle_message: str = "stopped before the load started; nothing was measured") -> None:
        self.idle_message = idle_message
        self.received: list[int] = []
        self._child: subprocess.Popen | None = None
        self._previous: dict[int, object] = {}

    @property
    def first(self) -> int | None:
        return self.received[0] if self.received else None

    def __enter__(self) -> "SignalForwarder":
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:  # e.g. SIGINT in a shell's `cmd &`: keep ignoring it
                self._previous[signum] = signal.signal(signum, self._on_signal)
        accept_stop_signals()
        return self

    def __exit__(self, *_: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        if self._child is not None:
            if self._child.poll() is None:
                self._child.send_signal(signum)
        elif len(self.received) == 1:
            raise Interrupted(signum, self.idle_message)

    def wait(self, child: subprocess.Popen, tick: Callable[[], None] | None = None, tick_s: float = 1.0) -> int:
        """``child``'s exit code, forwarding signals to it meanwhile; ``tick`` runs every ``tick_s``."""
        self._child = child
        try:
            while True:
                try:
                    return child.wait(timeout=tick_s if tick else None)
                except subprocess.TimeoutExpired:
                    tick()  # type: ignore[misc]  # only reached with a tick
        finally:
            self._child = None
