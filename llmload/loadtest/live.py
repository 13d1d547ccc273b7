"""The web UI's streaming table: live TTFT, TTFVT, TPOT, ITL and token figures of the current test."""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

import orjson
from flask import request as flask_request

from llmload.results.records import RequestRecord
from llmload.results.summary import distribution, token_stats

__all__ = ["LiveStats", "install_streaming_tab"]


class LiveStats:
    """Streaming metrics of the current test, for the web UI table: the most recent values of each.

    Bounded, so a long run's memory stays flat (summary.json has the exact figures over every request).
    """

    MAX_VALUES = 1_000_000

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        def window() -> deque:
            return deque(maxlen=self.MAX_VALUES)

        self.ttft_s, self.ttfvt_s, self.tpot_s, self.itl_s = window(), window(), window(), window()
        self.output_tokens, self.reasoning_tokens, self.prompt_tokens = window(), window(), window()

    def add(self, r: RequestRecord) -> None:
        if not r.ok:
            return
        for values, value in ((self.ttft_s, r.ttft_s), (self.ttfvt_s, r.ttfvt_s), (self.tpot_s, r.tpot_s),
                              (self.output_tokens, r.completion_tokens), (self.reasoning_tokens, r.reasoning_tokens),
                              (self.prompt_tokens, r.prompt_tokens)):
            if value is not None:
                values.append(value)
        self.itl_s.extend(r.itl_s)

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for name, values in (("TTFT (ms)", self.ttft_s), ("TTFVT (ms)", self.ttfvt_s),
                             ("TPOT (ms)", self.tpot_s), ("ITL (ms)", self.itl_s)):
            d = distribution(values, 1000.0)
            rows.append({"metric": name, "count": d.count, "mean": d.mean, "median": d.median, "p90": d.p90, "p99": d.p99, "max": d.max})
        for name, counts in (("output tokens", self.output_tokens), ("reasoning tokens", self.reasoning_tokens),
                             ("prompt tokens", self.prompt_tokens)):
            t = token_stats(counts)
            rows.append({"metric": name, "count": t.count, "mean": t.mean, "median": t.median, "p90": None, "p99": None, "max": t.max})
        for row in rows:
            row.update({k: round(v, 2) for k, v in row.items() if isinstance(v, float)})
        return rows


def install_streaming_tab(web_ui: Any, live_stats: Callable[[], "LiveStats | None"]) -> None:
    """Add the *Streaming metrics* tab to Locust's web UI, filled from ``live_stats()`` on every poll."""
    web_ui.template_args["extended_tabs"] = [{"title": "Streaming metrics", "key": "streaming"}]
    web_ui.template_args["extended_tables"] = [{"key": "streaming", "structure": [
        {"key": k, "title": t} for k, t in (("metric", "Metric"), ("count", "Count"), ("mean", "Mean"),
                                            ("median", "Median"), ("p90", "P90"), ("p99", "P99"), ("max", "Max"))]}]

    @web_ui.app.after_request
    def _add_streaming_stats(response: Any) -> Any:
        if flask_request.path != "/stats/requests" or not response.is_json:
            return response
        stats = live_stats()
        rows = stats.rows() if stats is not None else []
        response.set_data(orjson.dumps({**response.get_json(), "extended_stats": [{"key": "streaming", "data": rows}]}))
        return response
