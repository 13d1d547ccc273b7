"""What a run's throughput costs: USD per million tokens and per thousand requests at the GPU's hourly price.

    usd_per_million_output_tokens = usd_per_gpu_hour x gpus / 3600 / output tokens per second x 1e6

and alike for every money row of the run-level metric table (results/metrics.py: each names the rate it prices and
per how many of its units): total (prompt + output) tokens, requests (per thousand) and, with SLO, the output tokens
of requests that met every SLO (goodput tokens). Each comes with a 95% interval where its rate has one (the same
batch means): the cost falls as the rate rises, so the rate's upper bound gives the cost's lower one. A rehearsal is
priced at the rates predicted for the GPU it played (results/predicted.py). Pure functions, no I/O.

PRICE sets USD per GPU-hour; without it the GPU label's default below applies: public on-demand list prices, each
with where it was read and when. They are defaults to replace with your own price, not quotes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from llmload.errors import ConfigError
from llmload.results.metrics import MONEY_METRICS, run_metric_fields

__all__ = ["ListPrice", "DEFAULT_PRICES", "Cost", "usd_per_gpu_hour", "price_of", "cost_per", "run_cost"]


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


def _with_money_fields(cls: type) -> type:
    """One field per money row of RUN_METRICS (and its interval), after ``cls``'s own: a row added is a field here."""
    cls.__annotations__ = {**cls.__annotations__, **run_metric_fields(MONEY_METRICS)}
    return cls


@dataclass(frozen=True)
@_with_money_fields
class Cost:
    """A run's cost at its price: each money row of the metric table (USD per million tokens, per thousand requests),
    each with its 95% interval."""

    usd_per_gpu_hour: float | None
    """None: no PRICE and no default for the GPU label; every cost below is then None."""
    price_source: str
    gpus: int
    usd_per_server_hour: float | None
    basis: str
    """Whose rates were priced: ``measured``, or a rehearsal's ``predicted for <gpu> (...)``."""


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


def run_cost(config: dict[str, Any], rates: Any, basis: str) -> Cost:
    """The cost of ``rates`` (the run's measures, or a rehearsal's figures predicted for the GPU it played): each
    money row prices its rate row, with the interval from the rate's."""
    price, source = price_of(config.get("price"), str(config.get("gpu") or ""))
    gpus = int(config.get("gpus") or 1)
    per_hour = None if price is None else price * gpus
    costs: dict[str, Any] = {}
    for m in MONEY_METRICS:
        rate = getattr(rates, m.prices)
        costs[m.name], costs[f"{m.name}_ci95"] = (None, None) if rate is None else cost_per(
            per_hour, rate, getattr(rates, f"{m.prices}_ci95", None), m.per)
    return Cost(usd_per_gpu_hour=price, price_source=source, gpus=gpus, usd_per_server_hour=per_hour, basis=basis, **costs)
