"""Samples a server's /metrics on a fixed grid into a JSON-lines series while a cell runs.

No /metrics (404, refused, not Prometheus text) means an empty series; the sampler counts
failures and never raises, so sampling can never break a load test.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import IO

from llmload.errors import ControlCallFailed
from llmload.loadtest.server_window import scrape

__all__ = ["MetricsSampler"]


class MetricsSampler:
    """GETs {base_url}/metrics every interval_s on a daemon thread (a greenlet under gevent)."""

    def __init__(self, base_url: str, path: Path, interval_s: float = 1.0, api_key: str = "",
                 timeout_s: float = 2.0) -> None:
        self.url, self.path = base_url.rstrip("/") + "/metrics", Path(path)
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self._api_key = api_key
        self.failures, self.written = 0, 0
        self.first_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: IO[bytes] | None = None
        self._t0_s = 0.0

    def start(self) -> None:
        """Open ``path`` for appending and take the first sample now, then one per interval."""
        if self._thread is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("ab")
        except OSError as e:
            self._fail(f"cannot open {self.path}: {e}")
            return
        self._t0_s = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="llmload-server-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (an in-flight scrape may take up to timeout_s) and close the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s + 1.0)
            self._thread = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def _fail(self, reason: str) -> None:
        self.failures += 1
        if self.first_error is None:
            self.first_error = " ".join(reason.split())[:300]

    def _scrape(self, t_s: float) -> None:
        try:
            sample = scrape(self.url.removesuffix("/metrics"), self._api_key, t_s, self.timeout_s)
            self._file.write(sample.to_json_line())
            self._file.flush()
            self.written += 1
        except ControlCallFailed as e:
            self._fail(f"{self.url}: {'HTTP ' if e.status else ''}{e.reason}")
        except ValueError as e:
            self._fail(str(e))
        except Exception as e:  # noqa: BLE001 - sampling must never break a load test
            self._fail(f"{self.url}: {type(e).__name__}: {e}")

    def _run(self) -> None:
        k = 0
        while not self._stop.is_set():
            self._scrape(time.monotonic() - self._t0_s)
            # Next slot on the grid t0 + k*interval; slots already missed are skipped, not bunched.
            k = max(k + 1, math.floor((time.monotonic() - self._t0_s) / self.interval_s) + 1)
            if self._stop.wait(max(0.0, self._t0_s + k * self.interval_s - time.monotonic())):
                return
