"""The web UI's LLM view: the *Streaming metrics* table and charts over time of tokens/s and of the metric table's
charted metrics (TTFT, TTFVT, ITL: results/metrics.py).

``LiveStats`` keeps the current test's figures (bounded memory, bounded work per record); ``/llmload/series`` serves them as data
(the charts page, ``/llmload/charts``, draws them); a small script in Locust's page puts that page
under Locust's own charts and names Locust's size column for what it holds (output tokens).
``/llmload/target`` says whether the host is the built-in target: the page, its form, the charts and
the table then say REHEARSAL beside the host, as the console banner and report.html do.
"""

from __future__ import annotations

import html
import time
from collections import Counter
from importlib import resources
from typing import Any, Callable

import orjson
from flask import request as flask_request

from llmload.errors import ControlCallFailed
from llmload.loadtest.preflight import simulator_identity
from llmload.results.histogram import LogHistogram
from llmload.results.metrics import METRICS
from llmload.results.predicted import model_error_of
from llmload.results.provenance import rehearsal_text
from llmload.results.records import RequestRecord
from llmload.timescale import TimeScale, time_scale_of

__all__ = ["LiveStats", "TargetLabels", "install_streaming_tab", "charts_page", "SERIES_PATH", "CHARTS_PATH",
           "TARGET_PATH", "WINDOW_S"]

SERIES_PATH = "/llmload/series"
CHARTS_PATH = "/llmload/charts"
TARGET_PATH = "/llmload/target"
WINDOW_S = 5.0
"""Width of one point of the charts over time, in seconds of the test."""
_TABLE = tuple(m for m in METRICS if m.live)
"""The metrics of the Streaming metrics table, in the metric table's order."""
_CHARTS = tuple(m for m in METRICS if m.chart)
_SPANS = tuple(m for m in _CHARTS if not m.pooled)
"""Charted spans from a request's start: each drawn at start plus its value."""
_GAPS = tuple(m for m in _CHARTS if m.pooled)
"""Charted gaps between token events: each drawn at its closing event."""


class _Values:
    """Count, sum and log-spaced histogram of one metric: O(1) per value, quantiles within the histogram's 2.2%."""

    __slots__ = ("histogram", "total")

    def __init__(self) -> None:
        self.histogram = LogHistogram()
        self.total = 0.0

    def add(self, value: float) -> None:
        self.histogram.add(value)
        self.total += value

    @property
    def count(self) -> int:
        return self.histogram.count

    def quantile(self, q: float, scale: float = 1.0) -> float | None:
        value = self.histogram.quantile_s(q)
        return None if value is None else value * scale

    def row(self, metric: str, scale: float = 1.0, percentiles: bool = True) -> dict[str, Any]:
        n = self.count
        mean = self.total / n * scale if n else None
        maximum = self.histogram.max_s * scale if n else None
        if not percentiles:
            return _row(metric, n, mean, self.quantile(0.5, scale), maximum=maximum)
        return _row(metric, n, mean, self.quantile(0.5, scale), self.quantile(0.9, scale), self.quantile(0.99, scale), maximum)


class _Window:
    """What finished or arrived within one WINDOW_S of the test."""

    __slots__ = ("histograms", "output_tokens")

    def __init__(self) -> None:
        self.histograms = {m.name: LogHistogram() for m in _CHARTS}
        self.output_tokens = 0.0

    def point(self, index: int) -> dict[str, Any]:
        """The charts' point: charted metrics at p50 and p90 (within 2.2%) in their unit, output tokens per second."""
        point: dict[str, Any] = {"t_s": (index + 1) * WINDOW_S, "output_tok_s": self.output_tokens / WINDOW_S}
        for m in _CHARTS:
            histogram = self.histograms[m.name]
            p50, p90 = histogram.quantile_s(0.5), histogram.quantile_s(0.9)
            point[f"{m.name}_{m.unit}_p50"] = None if p50 is None else p50 * m.scale
            point[f"{m.name}_{m.unit}_p90"] = None if p90 is None else p90 * m.scale
            point[f"{m.name}_n"] = histogram.count
        return point


class LiveStats:
    """Streaming metrics of the current test, for the web UI: running figures, and per-window series.

    Each record costs a bounded amount of work (histogram buckets, no sort), and a poll of the table or the
    charts reads the buckets: the web UI never holds the event loop while streams wait to be read. Quantiles
    are within 2.2% (the histograms' bucket width); summary.json has the exact figures over every request.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.run_dir = ""
        self.played: tuple[str, TimeScale] | None = None
        """A rehearsal: (``predicted for <gpu> (...)``, its time scale): its rows again and its charts, as the GPU it
        plays would show them."""
        self.validation: dict[str, Any] = {}
        """A rehearsal's profile validation (its held-out errors, or unvalidated): each predicted row says its error."""
        self.clear()

    def clear(self) -> None:
        self.metrics = {m.name: _Values() for m in _TABLE}
        self.output_tokens, self.reasoning_tokens, self.prompt_tokens = _Values(), _Values(), _Values()
        self.started_unix_s = self.clock()
        self.windows: dict[int, _Window] = {}
        self._points: dict[int, dict[str, Any]] = {}  # finished windows' points, dropped when a late value lands
        self.finish_reasons: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.answered = 0
        self.ok = 0

    def _window(self, t_unix_s: float) -> _Window:
        index = max(0, int((t_unix_s - self.started_unix_s) // WINDOW_S))
        self._points.pop(index, None)
        window = self.windows.get(index)
        if window is None:
            window = self.windows[index] = _Window()
        return window

    def add(self, r: RequestRecord) -> None:
        if r.warmup:
            return
        if not r.ok:
            self.errors[r.error or "unknown"] += 1
            return
        self.ok += 1
        self.answered += r.answered
        self.finish_reasons[r.finish_reason or "none"] += 1
        for m in _TABLE:
            values = self.metrics[m.name]
            for value in m.request_values_s(r):
                values.add(value)
        for counts, count in ((self.output_tokens, r.completion_tokens), (self.reasoning_tokens, r.reasoning_tokens),
                              (self.prompt_tokens, r.prompt_tokens)):
            if count is not None:
                counts.add(count)
        self._add_to_windows(r)

    def _add_to_windows(self, r: RequestRecord) -> None:
        """Values go to the window their moment fell in; output tokens spread over the events that carried them."""
        if r.ttft_s is None:
            return
        for m in _SPANS:
            for value in m.request_values_s(r):
                self._window(r.start_unix_s + value).histograms[m.name].add(value)
        gaps = [m.request_values_s(r) for m in _GAPS]
        t = r.start_unix_s + r.ttft_s
        per_event = (r.completion_tokens or 0) / (1 + len(r.itl_s))
        self._window(t).output_tokens += per_event
        for i, gap in enumerate(r.itl_s):
            t += gap
            window = self._window(t)
            window.output_tokens += per_event
            for m, values in zip(_GAPS, gaps):
                window.histograms[m.name].add(values[i])

    def _error(self, validated_by: str) -> str:
        """`` [model ±22%]`` (the profile's worst held-out error), `` [UNVALIDATED model]``, or nothing."""
        status = self.validation.get("status")
        if status == "validated":
            error = model_error_of(self.validation, validated_by)
            return "" if error is None else f" [model ±{error:.0%}]"
        return "" if status == "fixed" else " [UNVALIDATED model]"

    def series(self) -> dict[str, Any]:
        """The charts' data: one point per finished WINDOW_S (ms latencies at p50 and p90, output tokens/s); a
        rehearsal's as the GPU it plays would show them (its time scale's), and ``figures`` says which."""
        finished = int((self.clock() - self.started_unix_s) // WINDOW_S)  # the window still filling is left out
        points = []
        for index in sorted(i for i in self.windows if i < finished):
            point = self._points.get(index)
            if point is None:
                point = self._points[index] = self.windows[index].point(index)
            points.append(point)
        if self.played is None:
            return {"window_s": WINDOW_S, "run_dir": self.run_dir, "points": points, "figures": "as measured"}
        label, scale = self.played
        return {"window_s": WINDOW_S, "run_dir": self.run_dir, "points": [_played(point, scale) for point in points],
                "figures": f"{label}: {scale.conversion_text()}"}

    def rows(self) -> list[dict[str, Any]]:
        rows = [_row(f"results folder: {self.run_dir}")] if self.run_dir else []
        for m in _TABLE:
            rows.append(self.metrics[m.name].row(f"{m.label} ({m.unit})", m.scale))
        for name, counts in (("output tokens", self.output_tokens), ("reasoning tokens", self.reasoning_tokens),
                             ("prompt tokens", self.prompt_tokens)):
            rows.append(counts.row(name, percentiles=False))
        elapsed_s = max(self.clock() - self.started_unix_s, 1e-9)
        output, reasoning = self.output_tokens.total, self.reasoning_tokens.total
        rows.append(_row("output tokens/s (mean so far)", self.output_tokens.count, output / elapsed_s))
        if self.played is not None:
            label, scale = self.played
            for m in _TABLE:  # every time as the played GPU's, with the model's own error
                rows.append(self.metrics[m.name].row(f"{m.label} ({m.unit}) {label}{self._error(m.validated_by)}",
                                                     m.scale * scale.factor(m.kind)))
            rows.append(_row(f"output tokens/s {label}{self._error('rps')}", self.output_tokens.count,
                             scale.played(output / elapsed_s, "rate")))
        rows.append(_row("answered share (%)", self.ok, 100.0 * self.answered / self.ok if self.ok else None))
        rows.append(_row("reasoning share of output (%)", self.reasoning_tokens.count,
                         100.0 * reasoning / output if output else None))
        done = self.ok + sum(self.errors.values())
        for reason, n in sorted(self.finish_reasons.items()):
            rows.append(_row(f"finish_reason {reason} (% of requests)", n, 100.0 * n / done))
        for error, n in sorted(self.errors.items()):
            rows.append(_row(f"error {error} (% of requests)", n, 100.0 * n / done))
        for row in rows:
            row.update({k: round(v, 2) for k, v in row.items() if isinstance(v, float)})
        return rows


def _row(metric: str, count: int | None = None, mean: float | None = None, median: float | None = None,
         p90: float | None = None, p99: float | None = None, maximum: float | None = None) -> dict[str, Any]:
    return {"metric": metric, "count": count, "mean": mean, "median": median, "p90": p90, "p99": p99, "max": maximum}


def _played(point: dict[str, Any], scale: TimeScale) -> dict[str, Any]:
    """A chart point as the played GPU would show it: each latency by its metric's kind, output tokens/s as a rate."""
    played = {**point, "output_tok_s": scale.played(point["output_tok_s"], "rate")}
    for m in _CHARTS:
        for stat in ("p50", "p90"):
            played[f"{m.name}_{m.unit}_{stat}"] = scale.played(point[f"{m.name}_{m.unit}_{stat}"], m.kind)
    return played


def _web_ui_text(identity: dict[str, Any]) -> str:
    """The rehearsal text, and on a sped-up target which of the web UI's figures are the played GPU's."""
    text = rehearsal_text(identity)
    if time_scale_of({"served_by": {**identity, "rehearsal": True}}).sped_up:
        text += (f"; Locust's tables and charts: the sped-up target's times; Streaming metrics and the LLM charts: "
                 f"predicted for {identity.get('gpu_profile') or '?'}")
    return text


class TargetLabels:
    """What the web UI says beside a host: the rehearsal text for the built-in target, else nothing.

    The host is asked (GET /llmload/sim, no key) once; a host that does not answer yet is asked again next time.
    """

    def __init__(self, identity_of: Callable[..., dict[str, Any] | None] = simulator_identity) -> None:
        self._identity_of = identity_of
        self._known: dict[str, str] = {}

    def __call__(self, host: str) -> str:
        if host not in self._known:
            try:
                identity = self._identity_of(host, timeout_s=2.0)
            except (ControlCallFailed, ValueError):  # nothing answers there yet, or the host is no URL
                return ""
            self._known[host] = _web_ui_text(identity) if identity is not None else ""
        return self._known[host]

    def known(self, host: str) -> str:
        """The text already found for ``host``, without asking it (for the pages polled every few seconds)."""
        return self._known.get(host, "")


def _asset(name: str) -> bytes:
    return resources.files("llmload").joinpath(f"data/webui/{name}").read_bytes()


def charts_page() -> bytes:
    """The charts page with one chart per charted metric (p50 and p90 lines) before the output tokens' chart."""
    boxes, lines = [], []
    for m in _CHARTS:
        boxes.append(f'  <div class="chart"><h3>{html.escape(m.title)} ({m.unit})</h3><svg id="{m.name}"></svg>'
                     f'<div class="key" id="{m.name}-key"></div></div>\n')
        key = f"{m.name}_{m.unit}"
        lines.append(f'  {m.name}: [["{key}_p50", "p50", "#1f77b4"], ["{key}_p90", "p90", "#ff7f0e"]],\n')
    page = _asset("charts.html").replace(b"<!--llmload:charts-->\n", "".join(boxes).encode())
    return page.replace(b"/*llmload:series*/\n", "".join(lines).encode())


def install_streaming_tab(web_ui: Any, live_stats: Callable[[], "LiveStats | None"]) -> None:
    """Add the *Streaming metrics* tab, the series and target endpoints and the charts page to Locust's web UI."""
    # The form lists the options in the table's order (host, gpu, model, effort, ..., key last), not a-z.
    web_ui.app.jinja_env.policies["json.dumps_kwargs"] = {"sort_keys": False}
    web_ui.template_args["extended_tabs"] = [{"title": "Streaming metrics", "key": "streaming"}]
    web_ui.template_args["extended_tables"] = [{"key": "streaming", "structure": [
        {"key": k, "title": t} for k, t in (("metric", "Metric"), ("count", "Count"), ("mean", "Mean or share"),
                                            ("median", "Median"), ("p90", "P90"), ("p99", "P99"), ("max", "Max"))]}]

    labels = TargetLabels()

    def host() -> str:
        return web_ui.environment.host or ""

    @web_ui.app.route(TARGET_PATH)
    def _target() -> Any:
        body = {"host": host(), "rehearsal": labels(host())}
        return web_ui.app.response_class(orjson.dumps(body), mimetype="application/json")

    @web_ui.app.route(SERIES_PATH)
    def _series() -> Any:
        stats = live_stats()
        body = stats.series() if stats is not None else {"window_s": WINDOW_S, "run_dir": "", "points": []}
        return web_ui.app.response_class(orjson.dumps(body), mimetype="application/json")

    @web_ui.app.route(CHARTS_PATH)
    def _charts() -> Any:
        return web_ui.app.response_class(charts_page(), mimetype="text/html")

    @web_ui.app.after_request
    def _add_streaming_stats(response: Any) -> Any:
        if flask_request.path == "/" and response.mimetype == "text/html":
            response.direct_passthrough = False
            page = response.get_data()
            response.set_data(page.replace(b"</body>", b"<script>" + _asset("inject.js") + b"</script></body>", 1))
            return response
        if flask_request.path != "/stats/requests" or not response.is_json:
            return response
        stats = live_stats()
        rows = stats.rows() if stats is not None else []
        if rehearsal := labels.known(host()):  # under the results folder's row, which a running test has first
            rows.insert(min(1, len(rows)), _row(f"target: {host()}: {rehearsal}"))
        response.set_data(orjson.dumps({**response.get_json(), "extended_stats": [{"key": "streaming", "data": rows}]}))
        return response
