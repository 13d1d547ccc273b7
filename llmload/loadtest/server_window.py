"""The server's own account of a run: its metrics scraped just before the first request and after the last.

Where they are depends on the engine (results/engine_metrics.py): vLLM's and SGLang's /metrics (SGLang's only with
--enable-metrics), then trtllm-serve's /prometheus/metrics (only with ``return_perf_metrics: true``; its /metrics is
JSON iteration stats). A server with neither says why, in one line, and the run goes on without the account.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from llmload.system.control_http import request
from llmload.errors import ControlCallFailed
from llmload.results.engine_metrics import METRICS_PATHS, title_of
from llmload.results.server_metrics import MetricsSample, parse_prometheus, sample_from

__all__ = ["scrape", "ServerWindow"]

_HOW = ("vLLM serves /metrics; SGLang only with --enable-metrics; trtllm-serve serves /prometheus/metrics only with "
        "return_perf_metrics: true in its LLM API options (--config)")


def _scrape_at(base_url: str, api_key: str, t_s: float, timeout_s: float, paths: tuple[str, ...]) -> tuple[MetricsSample, str]:
    """The first of ``paths`` whose answer holds an engine's metric names, as a sample; ControlCallFailed when the
    server does not answer, ValueError naming what each path gave (and how each engine is asked for them)."""
    root, said = base_url.rstrip("/"), []
    for path in paths:
        try:
            text = request(root + path, api_key, timeout_s).decode("utf-8", "replace")
        except ControlCallFailed as e:
            if e.status is None or e.status in (401, 403):
                raise
            said.append(f"GET {path} answered {e.reason}")
            continue
        sample = sample_from(parse_prometheus(text), t_s)
        if sample.engine is not None:
            return sample, path
        said.append(f"GET {path} is JSON, not Prometheus text (trtllm-serve's iteration stats)"
                    if text.lstrip().startswith(("[", "{")) else
                    f"GET {path} holds none of vLLM's, SGLang's or trtllm-serve's metric names")
    raise ValueError(f"{root}: no server metrics: {'; '.join(said)} ({_HOW})")


def scrape(base_url: str, api_key: str, t_s: float, timeout_s: float = 2.0) -> MetricsSample:
    """One scrape of the server's metrics (/metrics, else /prometheus/metrics) as a sample; ControlCallFailed when it
    fails, ValueError when neither holds an engine's metrics."""
    return _scrape_at(base_url, api_key, t_s, timeout_s, METRICS_PATHS)[0]


class ServerWindow:
    """Opens with a scrape when built; ``close`` takes the second and keeps both in a file."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self._base_url, self._api_key = base_url, api_key
        self._t0_s = time.monotonic()
        self.path: str | None = None
        """Where the server's metrics were found."""
        self.missing: str | None = None
        """Why the run has no server account, in words; None while it has one."""
        self.before = self._scrape()

    def _scrape(self) -> MetricsSample | None:
        """The server's metrics now; None from a server without them (the run goes on without its account)."""
        try:
            sample, self.path = _scrape_at(self._base_url, self._api_key, time.monotonic() - self._t0_s, 2.0,
                                           (self.path,) if self.path else METRICS_PATHS)
            return sample
        except ControlCallFailed as e:
            self.missing = f"GET {self._base_url}/metrics failed ({e.reason})"
        except ValueError as e:
            self.missing = str(e)
        return None

    def close(self, finished: int, path: Path) -> tuple[MetricsSample, ...]:
        """The scrapes before and after the run, also written to ``path``; () without both.

        vLLM records a request's metrics just after it streams the request's end, so the closing scrape
        waits up to 2 s for the server's count of finished requests to reach the client's ``finished``.
        """
        if self.before is None:
            return ()
        deadline_s = time.monotonic() + 2.0
        while (after := self._scrape()) is not None and time.monotonic() < deadline_s:
            if (after.e2e_count or 0) - (self.before.e2e_count or 0) >= finished:
                break
            time.sleep(0.1)
        if after is None:
            return ()
        if after.e2e_count is None:
            self.missing = (f"{title_of(after.engine)}'s metrics at {self.path} count no finished request (no end-to-end "
                            "latency histogram), so there is nothing to set its figures beside")
        window = (self.before, after)
        path.write_bytes(b"".join(sample.to_json_line() for sample in window))
        return window

    def describe(self) -> dict[str, Any]:
        """Where the server's metrics were (``path``), whose names they had (``engine``), and why there is no account
        (``missing``, None when there is one): summary.json's config.server_metrics."""
        return {"path": self.path, "engine": None if self.before is None else self.before.engine, "missing": self.missing}
