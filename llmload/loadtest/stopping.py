"""Ctrl-C and SIGTERM inside Locust: the first ends the test gracefully, the second cuts the streams.

First signal: no new requests; streams in flight finish (up to STOP_TIMEOUT); test_stop writes
every file; Locust exits with 128 + the signal's number (130, 143). Second: the streams still
running are cut at once and kept as ``interrupted``. These replace Locust's own handlers, which
lose the streams on Ctrl-C and stop the users twice on a second SIGTERM (tracebacks).
"""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

import gevent
from locust import events
from locust.env import Environment
from locust.runners import STATE_CLEANUP, STATE_STOPPING

from llmload.system.processes import STOP_SIGNALS, accept_stop_signals

__all__ = ["stop_signal"]

_DRAINING = (STATE_CLEANUP, STATE_STOPPING)
logger = logging.getLogger("llmload")


def stop_signal(environment: Environment) -> str | None:
    """The signal that ended the test early ("SIGINT", "SIGTERM"), or None."""
    return getattr(environment, "llmload_stop_signal", None)


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    # Runs at the first switch to gevent's loop, after locust.main has installed its SIGTERM handler: ours win.
    gevent.spawn(_install, environment)


def _install(environment: Environment) -> None:
    def on_signal(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if stop_signal(environment) is None:
            environment.llmload_stop_signal = name
            environment.process_exit_code = 128 + signum
            logger.warning("%s: no new requests; streams in flight may finish within STOP_TIMEOUT (%g s), then the "
                           "results are written. Ctrl-C again cuts them.", name, environment.stop_timeout or 0)
            gevent.spawn(_stop_gracefully, environment)
        else:
            logger.warning("%s again: cutting the streams in flight; they are kept as interrupted", name)
            gevent.spawn(_cut_streams, environment)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    accept_stop_signals()  # a Ctrl-C forwarded while Locust was starting comes now


def _stop_gracefully(environment: Environment) -> None:
    """Stop the users as they finish their request, then leave Locust's main loop (headless or web UI)."""
    runner = environment.runner
    if runner is not None:
        if runner.state in _DRAINING:  # DURATION or REQUESTS already ended the test: let that stop finish
            while runner.state in _DRAINING:
                gevent.sleep(0.1)
        else:
            runner.quit()  # test_stop (the session writes its files) fires before this returns
    if environment.web_ui is not None:
        environment.web_ui.stop()


def _cut_streams(environment: Environment) -> None:
    """Kill every user now; measure_request keeps each stream it cuts as ``interrupted``."""
    if environment.runner is not None:
        environment.runner.user_greenlets.kill(block=False)
