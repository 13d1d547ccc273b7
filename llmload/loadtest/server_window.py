"""The server's own account of a run: its /metrics scraped just before the first request and after the last."""

from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path

from llmload.system.control_http import request
from llmload.errors import ControlCallFailed
from llmload.results.server_metrics import MetricsSample, parse_prometheus, sample_from

__all__ = ["scrape", "ServerWindow"]


def scrape(base_url: str, api_key: str, t_s: float, timeout_s: float = 2.0) -> MetricsSample:
    """One GET {base_url}/metrics as a sample; ControlCallFailed when it fails, ValueError when it holds no vLLM metric."""
    url = base_url.rstrip("/") + "/metrics"
    sample = sample_from(parse_prometheus(request(url, api_key, timeout_s).decode("utf-8", "replace")), t_s)
    if all(getattr(sample, f.name) is None for f in fields(sample) if f.name != "t_s"):
        raise ValueError(f"{url}: no vLLM metrics in the response (not Prometheus text?)")
    return sample


class ServerWindow:
    """Opens with a scrape when built; ``close`` takes the second and keeps both in a file."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self._base_url, self._api_key = base_url, api_key
        self._t0_s = time.monotonic()
        self.before = self._scrape()

    def _scrape(self) -> MetricsSample | None:
        """The server's /metrics now; None from a server without them (the run goes on without its account)."""
        try:
            return scrape(self._base_url, self._api_key, time.monotonic() - self._t0_s)
        except (ControlCallFailed, ValueError):
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
        window = (self.before, after)
        path.write_bytes(b"".join(sample.to_json_line() for sample in window))
        return window
