"""Each measured cell's prefix-cache hit rate and where it came from: the share of its prompt tokens the server found
cached, so did not prefill.

A run whose prompts the server had cached (an earlier run's, or the chat frame every request shares) has a shorter
TTFT and a higher throughput than its load alone gives: a fit that took every prompt as prefilled whole would put
the server's prefill too fast. Where a cell's rate comes from:

    a suite run            its summary's server_prefix_cache_hit_rate: the server's prefix-cache hits over its
                           queries between the scrapes around the run (server_window.jsonl)
    vLLM bench JSON        a declaration beside it: cache.json in the same folder,
                           {"kind": "llmload.prefix_cache", "schema_version": 1,
                            "files": {"c1.json": {"hit_rate": 0.0587, "source": "where the figure comes from"}}}
    a measurements table   each cell's hit_rate, and its hit_rate_source (or the table's)

A cell whose rate cannot be accounted for is refused (Refused, one line): a run without the server's counters, a
bench file without a declaration, or a cold run flagged CACHE SUSPECT (another run's prompts were cached and its own
records cannot say which requests hit). Each request's cached tokens are the rate's share of its prompt, down to
whole KV blocks (cached_tokens).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import orjson

from llmload.errors import ConfigError
from llmload.results.storage import SERVER_WINDOW_FILE

__all__ = ["HitRate", "Refused", "SIDECAR_FILE", "cached_tokens", "run_hit_rate", "bench_hit_rate", "table_hit_rate"]

SIDECAR_FILE = "cache.json"
SIDECAR_KIND = "llmload.prefix_cache"
SIDECAR_SCHEMA_VERSION = 1
_EXAMPLE = '{"kind": "llmload.prefix_cache", "schema_version": 1, "files": {"%s": {"hit_rate": 0.06, "source": "..."}}}'


@dataclass(frozen=True)
class HitRate:
    """The share of a cell's prompt tokens the server found cached, and where that figure comes from."""

    rate: float
    source: str


@dataclass(frozen=True)
class Refused:
    """A cell calibrate leaves out: what it is, and why its hit rate cannot be accounted for."""

    cell: str
    reason: str


def cached_tokens(rate: float, prompt_tokens: Sequence[int], block_size: int) -> tuple[int, ...]:
    """Each request's cached tokens: ``rate`` of its prompt, down to whole blocks (a millionth of a token of slack,
    so 12,800 / 218,200 of a 1,091-token prompt is its 4 blocks of 16, not 3)."""
    return tuple(int(rate * p + 1e-6) // block_size * block_size for p in prompt_tokens)


def _rate(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1
    return float(value) if ok else None


def run_hit_rate(summary: Any, where: str) -> HitRate | Refused:
    """A suite run's: the server's counters around it; refused without them, or when a cold run is CACHE SUSPECT."""
    cache = getattr(summary, "cache", None)
    if cache is not None and cache.suspect:
        return Refused(where, f"CACHE SUSPECT: {cache.reason}; its records cannot say which requests hit, so no "
                              "one hit rate accounts for it")
    rate = summary.server_prefix_cache_hit_rate
    if rate is None:
        return Refused(where, f"its {SERVER_WINDOW_FILE} holds no prefix-cache counters before and after the run "
                              "(vLLM's prefix_cache_queries and prefix_cache_hits; or the server restarted between "
                              "them): how much of its prompts the server had cached is unknown")
    return HitRate(rate, f"the server's prefix-cache hits over queries around the run ({SERVER_WINDOW_FILE})")


def _sidecar(folder: Path) -> dict[str, Any] | None:
    path = folder / SIDECAR_FILE
    if not path.is_file():
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"RESULTS: {path}: not valid JSON ({e}); it declares the bench files' hit rates, e.g. "
                          + _EXAMPLE % "c1.json") from None
    if not isinstance(data, dict) or data.get("kind") != SIDECAR_KIND or not isinstance(data.get("files"), dict):
        raise ConfigError(f"RESULTS: {path}: not a prefix-cache declaration (kind {SIDECAR_KIND}, files); e.g. "
                          + _EXAMPLE % "c1.json")
    if data.get("schema_version") != SIDECAR_SCHEMA_VERSION:
        raise ConfigError(f"RESULTS: {path}: schema_version {data.get('schema_version')!r} is not "
                          f"{SIDECAR_SCHEMA_VERSION}")
    return data


def bench_hit_rate(path: Path) -> HitRate | Refused:
    """A vLLM bench JSON's: its entry in the cache.json beside it; refused without one."""
    data = _sidecar(path.parent)
    entry = (data or {}).get("files", {}).get(path.name)
    sidecar = path.parent / SIDECAR_FILE
    if entry is None:
        return Refused(str(path), f"vLLM bench's JSON says nothing of the prefix cache and {sidecar} declares no hit "
                                  f"rate for it: add {_EXAMPLE % path.name} (see measurements/README.md)")
    rate = _rate(entry.get("hit_rate")) if isinstance(entry, dict) else None
    source = entry.get("source") if isinstance(entry, dict) else None
    if rate is None or not isinstance(source, str) or not source.strip():
        return Refused(str(path), f"{sidecar}: its entry for {path.name} needs hit_rate (a share from 0 to 1) and "
                                  f"source (where the figure comes from), got {orjson.dumps(entry).decode()}")
    return HitRate(rate, f"{SIDECAR_FILE}: {source.strip()}")


def table_hit_rate(row: dict[str, Any], table: dict[str, Any], where: str) -> HitRate | Refused:
    """A measurements table's cell: its hit_rate, with its hit_rate_source or the table's."""
    if "hit_rate" not in row:
        return Refused(where, "declares no hit_rate (the share of its prompt tokens the server found cached), so its "
                              "prefill cannot be told; add hit_rate and hit_rate_source")
    rate = _rate(row["hit_rate"])
    source = row.get("hit_rate_source") or table.get("hit_rate_source")
    if rate is None or not isinstance(source, str) or not source.strip():
        return Refused(where, f"hit_rate {row['hit_rate']!r} needs to be a share from 0 to 1, with hit_rate_source "
                              "(the cell's or the table's) saying where it comes from")
    return HitRate(rate, f"the table: {source.strip()}")
