"""What a run's throughput costs: USD per million tokens and per thousand requests at the GPU's hourly price.

    usd_per_million_output_tokens = usd_per_gpu_hour x gpus / 3600 / output tokens per second x 1e6

and alike for total (prompt + output) tokens, requests (per thousand) and, with SLO, the output tokens of requests
that met every SLO (goodput tokens). Each comes with a 95% interval where its rate has one (the same batch means):
the cost falls as the rate rises, so the rate's upper bound gives the cost's lower one. A rehearsal is priced at
the rates predicted for the GPU it played (its raw rates divided by SPEEDUP). Pure functions, no I/O.

PRICE sets USD per GPU-hour; without it the GPU label's default below applies: public on-demand list prices, each
with where it was read and when. They are defaults to replace with your own price, not quotes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from llmload.errors import ConfigError
from llmload.results.intervals import batch_means_ci, batches_for
from llmload.results.records import RequestRecord
from llmload.results.slo import Slo, is_good

__all__ = ["ListPrice", "DEFAULT_PRICES", "Cost", "usd_per_gpu_hour", "price_of", "cost_per", "goodput_tokens_per_s", "run_cost"]


@dataclass(frozen=True)
class ListPrice:
    usd_per_gpu_hour: float
    what: str
    source: str
    as_of: str


_GCP = "https://cloud.google.com/compute/vm-instance-pricing (accelerator-optimized machine types)"
_RECALLED = "approximate: read from the page for the 003 study's machine types, not fetched when this table was built"
DEFAULT_PRICES = {
    "h100": ListPrice(11.06, "Google Cloud a3-highgpu-1g (1x H100 80 GB with its vCPUs and memory), us-central1, on-demand",
                      _GCP, f"2025; {_RECALLED}"),
    "h200": ListPrice(10.60, "Google Cloud a3-ultragpu-8g (8x H200 141 GB) / 8, us-central1, on-demand", _GCP,
                      f"2025; {_RECALLED}"),
    "a100": ListPrice(5.07, "Google Cloud a2-ultragpu-1g (1x A100 80 GB with its vCPUs and memory), us-central1, on-demand",
                      _GCP, f"2025; {_RECALLED}"),
    "l4": ListPrice(0.71, "Google Cloud g2-standard-4 (1x L4 24 GB with 4 vCPUs, 16 GB), us-central1, on-demand", _GCP,
                    f"2025; {_RECALLED}"),
}
"""USD per GPU-hour by GPU label: DEFAULTS (a whole one-GPU machine's list price), to be replaced by PRICE."""


@dataclass(frozen=True)
class Cost:
    """A run's cost at its price: per million tokens and per thousand requests, each with its 95% interval."""

    usd_per_gpu_hour: float | None
    """None: no PRICE and no default for the GPU label; every cost below is then None."""
    price_source: str
    gpus: int
    usd_per_server_hour: float | None
    basis: str
    """Whose rates were priced: ``measured``, or a rehearsal's ``predicted for <gpu> (...)``."""
    usd_per_million_output_tokens: float | None
    usd_per_million_output_tokens_ci95: list[float] | None
    usd_per_million_total_tokens: float | None
    usd_per_million_total_tokens_ci95: list[float] | None
    usd_per_thousand_requests: float | None
    usd_per_thousand_requests_ci95: list[float] | None
    usd_per_million_goodput_tokens: float | None = None
    """With SLO: output tokens of requests that met every SLO."""
    usd_per_million_goodput_tokens_ci95: list[float] | None = None


def usd_per_gpu_hour(text: str) -> float | None:
    """PRICE as a number of USD per GPU-hour; None when empty (the GPU's built-in list price applies)."""
    if not str(text).strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"PRICE={text!r} is not a positive number of USD per GPU-hour; give e.g. PRICE=2.49, "
                          "or leave it out for the GPU's built-in list price")
    return value


def price_of(price_text: Any, gpu: str) -> tuple[float | None, str]:
    """(USD per GPU-hour, where it came from): PRICE, else the GPU label's default, else (None, why)."""
    given = usd_per_gpu_hour(str(price_text or ""))
    if given is not None:
        return given, "PRICE"
    default = DEFAULT_PRICES.get(str(gpu).strip().lower())
    if default is None:
        return None, f"no PRICE and no default list price for GPU {gpu!r}: give PRICE=<USD per GPU-hour>"
    return default.usd_per_gpu_hour, f"default list price (not a quote): {default.what}; {default.source}; as of {default.as_of}"


def cost_per(usd_per_hour: float | None, per_second: float | None, ci95: Sequence[float] | None,
             unit: float) -> tuple[float | None, list[float] | None]:
    """USD per ``unit`` things at ``per_second`` things a second, with the interval from the rate's."""
    if usd_per_hour is None or not per_second:
        return None, None
    usd_per_second = usd_per_hour / 3600.0
    value = usd_per_second / per_second * unit
    if ci95 is None or not ci95[0] > 0:  # a rate that may be 0 has no upper bound on its cost
        return value, None
    return value, [usd_per_second / ci95[1] * unit, usd_per_second / ci95[0] * unit]


def goodput_tokens_per_s(records: Sequence[RequestRecord], span_s: tuple[float, float],
                         slos: Sequence[Slo]) -> tuple[float | None, list[float] | None]:
    """Output tokens per second of successful requests that met every SLO, with its batch-means interval."""
    if not slos:
        return None, None
    ok = [r for r in records if r.ok]
    start_s, end_s = span_s
    if not ok or end_s <= start_s:
        return 0.0, None
    weights = [float(r.completion_tokens or 0) if is_good(r, slos) else 0.0 for r in ok]
    ends_s = [r.start_monotonic_s + r.e2e_s for r in ok]
    batches = batches_for(end_s - start_s, float(np.median([r.e2e_s for r in ok])))
    return sum(weights) / (end_s - start_s), batch_means_ci(ends_s, weights, start_s, end_s, batches)


def run_cost(config: dict[str, Any], rates: Any, basis: str, speedup: float = 1.0,
             goodput_tok_s: tuple[float | None, list[float] | None] = (None, None)) -> Cost:
    """The cost of ``rates`` (rps, output and total throughput with their intervals, as Measures has them).

    ``speedup``: a rehearsal's raw rates are that many times the played GPU's; they are divided back before pricing.
    """
    price, source = price_of(config.get("price"), str(config.get("gpu") or ""))
    gpus = int(config.get("gpus") or 1)
    per_hour = None if price is None else price * gpus

    def priced(rate: float | None, ci: list[float] | None, unit: float) -> tuple[float | None, list[float] | None]:
        if rate is None:
            return None, None
        return cost_per(per_hour, rate / speedup, None if ci is None else [ci[0] / speedup, ci[1] / speedup], unit)

    output, output_ci = priced(rates.output_throughput_tok_s, rates.output_throughput_tok_s_ci95, 1e6)
    total, total_ci = priced(rates.total_throughput_tok_s, rates.total_throughput_tok_s_ci95, 1e6)
    requests, requests_ci = priced(rates.rps, rates.rps_ci95, 1e3)
    good, good_ci = priced(goodput_tok_s[0], goodput_tok_s[1], 1e6)
    return Cost(usd_per_gpu_hour=price, price_source=source, gpus=gpus, usd_per_server_hour=per_hour, basis=basis,
                usd_per_million_output_tokens=output, usd_per_million_output_tokens_ci95=output_ci,
                usd_per_million_total_tokens=total, usd_per_million_total_tokens_ci95=total_ci,
                usd_per_thousand_requests=requests, usd_per_thousand_requests_ci95=requests_ci,
                usd_per_million_goodput_tokens=good, usd_per_million_goodput_tokens_ci95=good_ci)
