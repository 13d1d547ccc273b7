"""vLLM's per-request latency histograms, kept by the engine as vLLM keeps them (its bucket bounds, seconds)."""

from __future__ import annotations

from bisect import bisect_left

__all__ = ["Histogram", "RequestHistograms"]

_TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                   40.0, 80.0, 160.0, 640.0, 2560.0)
_TOKEN_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_REQUEST_BUCKETS_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                      480.0, 960.0, 1920.0, 7680.0)
"""vLLM 0.32's bucket bounds, as its CPU build's /metrics shows them."""


class Histogram:
    """One Prometheus histogram: counts per upper bound (+Inf last), their sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def lines(self, name: str, label: str) -> list[str]:
        out, seen = [], 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts):
            seen += n
            out.append(f'{name}_bucket{{le="{bound}",{label}}} {float(seen)!r}\n')
        return [*out, f"{name}_sum{{{label}}} {self.sum!r}\n", f"{name}_count{{{label}}} {float(seen)!r}\n"]


class RequestHistograms:
    """vLLM's per-request latency histograms, in seconds of the target's own clock."""

    def __init__(self) -> None:
        self.time_to_first_token = Histogram(_TTFT_BUCKETS_S)
        self.inter_token_latency = Histogram(_TOKEN_BUCKETS_S)
        self.request_time_per_output_token = Histogram(_TOKEN_BUCKETS_S)
        self.e2e_request_latency = Histogram(_REQUEST_BUCKETS_S)
        self.request_queue_time = Histogram(_REQUEST_BUCKETS_S)

    def rows(self) -> list[tuple[str, str, Histogram]]:
        return [
            ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", self.time_to_first_token),
            ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", self.inter_token_latency),
            ("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
             self.request_time_per_output_token),
            ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", self.e2e_request_latency),
            ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
             self.request_queue_time),
        ]
