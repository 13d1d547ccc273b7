"""A run's one time scale: how many times faster than the GPU it plays its target runs, and every conversion by it.

A real server runs at its own speed: 1. The built-in target runs SPEEDUP times faster than the GPU it plays and
says so itself (``GET /llmload/sim``: ``served_by.speedup``). A run takes its scale from its target once
(``resolve_time_scale``); results read it back from the run's config (``time_scale_of``). Every conversion between
the target's clock and the played GPU's goes through one TimeScale:

    what the settings give, for the played GPU        what the target gets
    a time (DURATION, THINK_TIME, SLO limits)        / speedup
    a rate (RATE, TRACE_SPEED)                        x speedup

    what was measured on the target                   predicted for the played GPU
    kind time (TTFT, E2E, duration)                   x speedup
    kind rate (requests/s, tokens/s)                  / speedup
    kind money (USD per million tokens)               x speedup (it is USD over a rate)
    kind share, count                                 as they are

This is the only module that applies SPEEDUP; the option table defines it, the built-in target runs at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from llmload.errors import ConfigError

__all__ = ["KINDS", "TimeScale", "REAL_TIME", "resolve_time_scale", "time_scale_of"]

KINDS = ("time", "rate", "share", "count", "money")
"""What a figure is, which says how a time scale converts it."""
_POWER = {"time": 1, "rate": -1, "money": 1, "share": 0, "count": 0}


@dataclass(frozen=True)
class TimeScale:
    """How many times faster than the GPU it plays the target ran (1: a real server, or a rehearsal at 1x)."""

    speedup: float = 1.0
    adopted_from_target: bool = False
    """The run's own SPEEDUP was left at 1 and the target (started with its own SPEEDUP) gave this one."""

    @property
    def sped_up(self) -> bool:
        return self.speedup != 1.0

    def factor(self, kind: str) -> float:
        """What turns a figure of ``kind`` measured on the target into the played GPU's."""
        return self.speedup ** _POWER[kind]

    def played(self, value: float | None, kind: str) -> float | None:
        """A figure measured on the target, as the played GPU would show it."""
        return None if value is None else value * self.factor(kind)

    def played_interval(self, ci: Sequence[float] | None, kind: str) -> list[float] | None:
        if ci is None:
            return None
        factor = self.factor(kind)
        return [ci[0] * factor, ci[1] * factor]

    def target_s(self, played_s: float) -> float:
        """A time given for the played GPU (DURATION, THINK_TIME, an SLO limit) on the target's clock."""
        return played_s / self.speedup

    def target_rate(self, played_per_s: float) -> float:
        """A rate given for the played GPU (RATE, TRACE_SPEED) as sent to the target."""
        return played_per_s * self.speedup

    def as_setting(self) -> dict[str, str]:
        """The scale as the KEY=VALUE setting a child run takes (a sweep's cell, a capacity step)."""
        return {"SPEEDUP": f"{self.speedup:g}"}

    def text(self) -> str:
        """``SPEEDUP 20x`` (where the target's figures are sped up), else empty."""
        return f"SPEEDUP {self.speedup:g}x" if self.sped_up else ""

    def adopted_text(self) -> str | None:
        """The banner's line when the scale came from the target rather than the run's setting; else None."""
        if not self.adopted_from_target:
            return None
        return (f"the target runs at SPEEDUP {self.speedup:g} (it was started so): this run takes it, so DURATION, "
                "THINK_TIME and SLO limits are divided by it, RATE and TRACE_SPEED multiplied")

    def conversion_text(self) -> str:
        """How predicted figures came from the target's (the result block, report.html, the web UI)."""
        if not self.sped_up:
            return "the target's figures as they are (it ran at SPEEDUP 1)"
        return f"times x{self.speedup:g}, rates /{self.speedup:g}"


REAL_TIME = TimeScale()


def resolve_time_scale(run_speedup: float, served_by: dict[str, Any]) -> TimeScale:
    """The run's time scale from its SPEEDUP setting and what its target said of itself (``served_by``).

    A real server runs at 1: a SPEEDUP above 1 for it is refused. The built-in target runs at the SPEEDUP it was
    started with: a run left at 1 takes it (and says so); a run that gives another is refused, since its DURATION,
    RATE and SLO limits would be converted by a speed the target does not run at.
    """
    if not served_by.get("rehearsal"):
        if run_speedup != 1.0:
            raise ConfigError(f"SPEEDUP={run_speedup:g} rehearses against the built-in target; {served_by.get('host') or 'HOST'} "
                              "is a real server, which runs at its own speed: leave SPEEDUP out")
        return REAL_TIME
    target = float(served_by.get("speedup") or 1.0)
    if run_speedup == target:
        return TimeScale(target)
    if run_speedup == 1.0:
        return TimeScale(target, adopted_from_target=True)
    raise ConfigError(f"SPEEDUP={run_speedup:g}: the built-in target at {served_by.get('host') or 'HOST'} runs at SPEEDUP "
                      f"{target:g} and cannot change while it runs; leave SPEEDUP out (the run takes the target's), or "
                      f"start the target again with SPEEDUP={run_speedup:g}")


def time_scale_of(config: dict[str, Any]) -> TimeScale:
    """The time scale a run's config (config.json, summary.json's ``config``) recorded: its target's, by the target's
    own word (``served_by``); 1 for a real server or results older than that record."""
    served_by = config.get("served_by")
    if not isinstance(served_by, dict) or not served_by.get("rehearsal"):
        return REAL_TIME
    return TimeScale(float(served_by.get("speedup") or 1.0))
