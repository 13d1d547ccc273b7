"""TURNS and THINK_TIME: how many turns each conversation has, and how long its user thinks between them.

    TURNS=4        every conversation has 4 turns (1: single requests, no conversations)
    TURNS=2-6      each conversation draws its turns from 2..6, uniformly, seeded by SEED
    THINK_TIME=5s  5 s between an answer and the next turn (any DURATION form: 5, 5s, 1m30s)
    THINK_TIME=exp:5s   exponential waits of mean 5 s, seeded
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from llmload.errors import ConfigError
from llmload.settings import parse_duration_s
from llmload.timescale import REAL_TIME, TimeScale

__all__ = ["TurnPlan", "parse_turns", "parse_think_time"]

_EXP = "exp:"


def parse_turns(text: str) -> tuple[int, int]:
    """TURNS as (fewest, most) turns per conversation; ConfigError naming the setting."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise ConfigError(f"TURNS={text!r} is not a number of turns; give e.g. TURNS=4 or TURNS=2-6")
    low, high = int(match.group(1)), int(match.group(2) or match.group(1))
    if low < 1 or high < low:
        raise ConfigError(f"TURNS={text}: a conversation has at least 1 turn and the range must rise; give e.g. TURNS=4 or "
                          "TURNS=2-6")
    return low, high


def parse_think_time(text: str) -> tuple[float, bool]:
    """THINK_TIME as (seconds, exponential): ``5s`` is (5.0, False), ``exp:5s`` (5.0, True)."""
    exponential = text.strip().startswith(_EXP)
    span = text.strip()[len(_EXP):] if exponential else text
    try:
        seconds = parse_duration_s(span)
    except ConfigError:
        raise ConfigError(f"THINK_TIME={text!r} is not a duration; give e.g. THINK_TIME=5s or THINK_TIME=exp:5s "
                          "(exponential waits of that mean)") from None
    return seconds, exponential


@dataclass(frozen=True)
class TurnPlan:
    """A run's TURNS and THINK_TIME, parsed; ``think_s`` on the target's clock (the run's time scale's)."""

    fewest: int
    most: int
    think_s: float
    exponential: bool

    @classmethod
    def of(cls, turns: str, think_time: str, scale: TimeScale = REAL_TIME) -> TurnPlan:
        fewest, most = parse_turns(turns)
        think_s, exponential = parse_think_time(think_time)
        return cls(fewest, most, scale.target_s(think_s), exponential)

    @property
    def conversations(self) -> bool:
        """Whether requests are turns of conversations (TURNS above 1), else single requests."""
        return self.most > 1

    def turns(self, rng: random.Random) -> int:
        """One conversation's turns."""
        return self.fewest if self.fewest == self.most else rng.randint(self.fewest, self.most)

    def think_time_s(self, rng: random.Random) -> float:
        """One wait between an answer and the next turn."""
        mean_s = self.think_s
        return rng.expovariate(1.0 / mean_s) if self.exponential and mean_s > 0 else mean_s
