"""METRICS_PORT: the run's live figures for Prometheus, served by the process that owns the run.

The load process (the master with WORKERS; workers serve nothing and add their requests in flight to
Locust's stats reports) listens from Locust's init to its exit, so it serves every test it runs (the web
UI's one after another), each under its own run label. A scrape is a snapshot: every figure is copied at the
instant it begins (RunMetrics.families, a tenth of a millisecond), then its text goes out a thousand lines (a third
of a millisecond) at a time, the event loop free between two (up to IDLE_WAIT_MAX_S each): streams waiting to be
read never wait for a whole scrape, a busy run's scrape still ends in time, and what the run counts meanwhile
is in the next scrape. At exit the process waits, bounded, for one more scrape, so Prometheus holds the run's
final counts. On loopback a foreign Host is refused (DNS rebinding); METRICS_LOGIN asks for basic auth.
"""

from __future__ import annotations

import base64
import hmac
import logging
import time
from typing import Any, Callable, Iterable, Iterator

import gevent
from gevent.event import Event
from gevent.pywsgi import WSGIServer
from locust.env import Environment
from locust.runners import WorkerRunner
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from llmload.credentials import loopback_hosts, metrics_login
from llmload.client.readstats import PROCESS_READ_STATS
from llmload.results.run_metrics import RunMetrics, Snapshot, render

__all__ = ["install_exporter", "MetricsExporter"]

logger = logging.getLogger("llmload")
IN_FLIGHT = "llmload_in_flight"
"""The key of a worker's requests in flight in its stats report to the master."""
IDLE_WAIT_MAX_S = 0.01
"""How long a scrape's next chunk waits for an idle event loop: streams go first, but a loop that is never idle (a
busy run) must not hold a scrape past Prometheus's timeout (seen: 1.0-1.3 s scrapes, every one of a run timed out)."""
LAST_SCRAPE_WAIT_MAX_S = 60.0
ASSUMED_INTERVAL_S = 15.0
"""Prometheus's default scrape interval: the wait's measure when only one scrape was seen."""


class _Body:
    """One scrape's response, a chunk at a time, the event loop idle between two; ``on_sent`` when all of it went
    out (the WSGI server calls close() after the last byte; a scrape cut short does not count)."""

    def __init__(self, chunks: Iterable[bytes], on_sent: Callable[[], None]) -> None:
        self._chunks = chunks
        self._on_sent = on_sent
        self._complete = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            yield chunk
            with gevent.Timeout(IDLE_WAIT_MAX_S, False):  # no longer than this: then the next chunk, idle or not
                gevent.idle()  # streams waiting to be read go first (sleep(0) would not let the loop poll)
        self._complete = True

    def close(self) -> None:
        if self._complete:
            self._on_sent()


class MetricsExporter:
    """The HTTP endpoint on METRICS_HOST:METRICS_PORT and what it reads when scraped."""

    def __init__(self, environment: Environment, metrics: Callable[[], RunMetrics | None], host: str, port: int,
                 login: tuple[str, str] | None) -> None:
        self._environment = environment
        self._metrics = metrics
        self._worker_in_flight: dict[str, int] = {}
        self._login = b"Basic " + base64.b64encode(":".join(login).encode()) if login else None
        self._hosts = loopback_hosts(host, port)
        self._scrapes_s: list[float] = []  # monotonic starts of the last two scrapes
        self._last_sent_s = -1.0  # the start of the last scrape sent whole
        self._scraped = Event()
        self.server = WSGIServer((host, port), self._app, log=None)

    def start(self) -> None:
        """Listen (OSError when the port is taken)."""
        self.server.start()

    def on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        if IN_FLIGHT in data:
            self._worker_in_flight[client_id] = data[IN_FLIGHT]

    def _snapshot(self) -> Snapshot | None:
        """The run's figures and this process's gauges, at this instant; None between two tests."""
        metrics = self._metrics()
        if metrics is None:
            return None
        runner = self._environment.runner
        in_flight = PROCESS_READ_STATS.in_flight + sum(self._worker_in_flight.values())
        return metrics.families(runner.user_count if runner is not None else 0, in_flight)

    def _refused(self, environ: dict[str, Any]) -> str | None:
        if self._hosts is not None and environ.get("HTTP_HOST", "").lower() not in self._hosts:
            return "403 Forbidden"  # a foreign Host on loopback: DNS rebinding
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1")  # WSGI's header text is latin-1
        if self._login is not None and not hmac.compare_digest(given, self._login):
            return "401 Unauthorized"
        return None

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        refused = self._refused(environ)
        if refused is not None:
            start_response(refused, [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Basic realm="llmload"')]
                           if refused.startswith("401") else [("Content-Type", "text/plain")])
            return [refused.encode() + b"\n"]
        if environ["REQUEST_METHOD"] not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET")])
            return [b""]
        started_s = time.monotonic()
        self._scrapes_s = [*self._scrapes_s[-1:], started_s]
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
        return _Body(render(self._snapshot()), lambda: self._sent(started_s))

    def _sent(self, started_s: float) -> None:
        self._last_sent_s = max(self._last_sent_s, started_s)
        self._scraped.set()

    def wait_for_last_scrape(self) -> None:
        """Return once a scrape that began after this call (the run's final counts) was sent whole, at most about two
        scrape intervals later; at once when nothing has scraped yet."""
        if not self._scrapes_s:
            return
        seen = self._scrapes_s
        interval_s = seen[1] - seen[0] if len(seen) == 2 else ASSUMED_INTERVAL_S
        limit_s = min(LAST_SCRAPE_WAIT_MAX_S, 2 * interval_s + 1.0)
        logger.info("llmload: waiting up to %.0f s for Prometheus to scrape the run's last figures (METRICS_PORT)", limit_s)
        called_s = time.monotonic()
        deadline_s = called_s + limit_s
        while self._last_sent_s < called_s and time.monotonic() < deadline_s:
            self._scraped.clear()
            self._scraped.wait(deadline_s - time.monotonic())


def install_exporter(environment: Environment, metrics: Callable[[], RunMetrics | None]) -> MetricsExporter | None:
    """At Locust's init: serve METRICS_PORT from the run's owner; on a worker, report its requests in flight."""
    if isinstance(environment.runner, WorkerRunner):  # always: a worker started elsewhere knows no METRICS_PORT
        environment.events.report_to_master.add_listener(
            lambda data, **_: data.__setitem__(IN_FLIGHT, PROCESS_READ_STATS.in_flight))
        return None
    options = environment.parsed_options
    if options is None or not getattr(options, "metrics_port", 0):
        return None
    exporter = MetricsExporter(environment, metrics, options.metrics_host, options.metrics_port, metrics_login())
    try:
        exporter.start()
    except OSError as e:
        # `python -m llmload` found it free a moment ago: another process took it since
        logger.error("error: METRICS_PORT=%d: %s:%d cannot be listened on (%s); give another METRICS_PORT",
                     options.metrics_port, options.metrics_host, options.metrics_port, e.strerror or e)
        raise SystemExit(2) from None
    environment.events.worker_report.add_listener(exporter.on_worker_report)
    logger.info("llmload: metrics for Prometheus on http://%s:%d/metrics", options.metrics_host, options.metrics_port)
    return exporter
