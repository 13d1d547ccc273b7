"""Each request's reasoning effort: EFFORT itself, or under ``EFFORT=mix:...`` a seeded draw."""

from __future__ import annotations

import random

__all__ = ["EffortDraw"]


class EffortDraw:
    """Draws efforts with the given shares from one seeded sequence for the whole run (users share it)."""

    def __init__(self, shares: dict[str, float], seed: int) -> None:
        self.efforts = list(shares)
        self._weights = list(shares.values())
        self._rng = random.Random(seed)

    def next(self) -> str:
        if len(self.efforts) == 1:
            return self.efforts[0]
        return self._rng.choices(self.efforts, weights=self._weights)[0]
