"""EFFORT's grammar: one reasoning effort, or a mix drawn per request (``mix:low=70,medium=25,high=5``).

Here, the first stage both users need: the load test draws each request's effort from the shares, and the
summary breaks every metric down by effort (``by_effort``), listing a mix's efforts that drew nothing too.
"""

from __future__ import annotations

from llmload.errors import ConfigError

__all__ = ["REASONING_EFFORTS", "EFFORTS", "effort_shares", "mixed_efforts"]

REASONING_EFFORTS = ("low", "medium", "high")
"""gpt-oss's reasoning_effort values."""
EFFORTS = (*REASONING_EFFORTS, "none")
"""EFFORT's values: none leaves reasoning_effort out of the request."""
MIX_PREFIX = "mix:"


def effort_shares(text: str) -> dict[str, float]:
    """EFFORT as {effort: share of requests}: ``high`` is {"high": 1.0}; ``mix:low=3,high=1`` {"low": 0.75, "high": 0.25}."""
    if not text.startswith(MIX_PREFIX):
        if text not in EFFORTS:
            raise ConfigError(f"EFFORT={text!r} is not one of {', '.join(EFFORTS)}, nor a mix like mix:low=70,medium=25,high=5")
        return {text: 1.0}
    weights: dict[str, float] = {}
    for part in text[len(MIX_PREFIX):].split(","):
        name, _, weight = part.partition("=")
        name = name.strip()
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if name not in EFFORTS or name in weights or not 0 <= value < float("inf"):
            raise ConfigError(f"EFFORT={text!r}: {part.strip()!r} is not effort=weight with an effort of "
                              f"{', '.join(EFFORTS)} named once and a weight of 0 or more; e.g. mix:low=70,medium=25,high=5")
        weights[name] = value
    total = sum(weights.values())
    if not total > 0:
        raise ConfigError(f"EFFORT={text!r}: the weights add up to 0; give at least one a positive weight")
    return {name: weight / total for name, weight in weights.items()}


def mixed_efforts(text: str) -> tuple[str, ...]:
    """The efforts ``EFFORT=mix:...`` names, in its order (a weight of 0 included); () for a single effort."""
    return tuple(effort_shares(text)) if text.startswith(MIX_PREFIX) else ()
