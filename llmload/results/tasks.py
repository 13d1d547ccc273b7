"""TOOL_ROUNDS's tasks, from their rounds' records: how each ended, how many rounds it took, how long to its final
answer and how many tokens in all (summary.json's ``tasks``).

A task's rounds are the records sharing its ``task_id``; it runs from its first round's send to its last round's
end. Its outcome is its last round's: a final answer (``answered``), none (``no_answer``: its output limit ran out
in reasoning), a function call on its last allowed round
(``out_of_rounds``), a function call the run ended before answering (``unfinished``), a failure (``failed``,
``tool_call_invalid`` among them) or a stream cut off by the run's end (``interrupted``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Sequence

from llmload.results.distributions import Distribution, TokenStats, distribution, token_stats
from llmload.results.records import RequestRecord

__all__ = ["OUTCOMES", "TaskStats", "task_outcome", "task_stats"]

OUTCOMES = ("answered", "no_answer", "out_of_rounds", "unfinished", "failed", "interrupted")


@dataclass(frozen=True)
class TaskStats:
    """What a run's tasks did (TOOL_ROUNDS above 1); time and tokens over the tasks that reached a final answer."""

    tasks: int
    outcomes: dict[str, int]
    """Tasks by outcome (OUTCOMES), each named even at 0."""
    rounds: TokenStats
    """Rounds (requests) per task, every task."""
    rounds_by_count: dict[str, int]
    """Tasks by their number of rounds ("1", "2", ...)."""
    time_to_answer_ms: Distribution
    """First round's send to the final answer's end, each answered task's (its tool rounds and their waits included)."""
    prompt_tokens: TokenStats
    """Prompt tokens over an answered task's rounds (each round sends the history, so they add up)."""
    output_tokens: TokenStats
    """Output tokens over an answered task's rounds (its function calls' arguments included)."""
    reasoning_tokens: TokenStats


def task_outcome(rounds: Sequence[RequestRecord], max_rounds: int) -> str:
    """How a task whose rounds are ``rounds`` (in order) ended, under TOOL_ROUNDS ``max_rounds``."""
    last = rounds[-1]
    if last.error == "interrupted":
        return "interrupted"
    if last.error is not None:
        return "failed"
    if last.finish_reason != "tool_calls":
        return "answered" if last.answered else "no_answer"
    return "out_of_rounds" if (last.round or len(rounds)) >= max_rounds else "unfinished"


def task_stats(records: Sequence[RequestRecord], max_rounds: int) -> TaskStats | None:
    """The tasks of ``records`` (measured ones); None when none is a round of a task."""
    by_task: dict[str, list[RequestRecord]] = defaultdict(list)
    for record in records:
        if record.task_id is not None:
            by_task[record.task_id].append(record)
    if not by_task:
        return None
    tasks = [sorted(rounds, key=lambda r: r.round or 0) for rounds in by_task.values()]
    outcomes = Counter(task_outcome(rounds, max_rounds) for rounds in tasks)
    answered = [rounds for rounds in tasks if task_outcome(rounds, max_rounds) == "answered"]

    def total(rounds: list[RequestRecord], tokens: str) -> int:
        return sum(getattr(r, tokens) or 0 for r in rounds)

    return TaskStats(
        tasks=len(tasks),
        outcomes={outcome: outcomes[outcome] for outcome in OUTCOMES},
        rounds=token_stats([len(rounds) for rounds in tasks]),
        rounds_by_count={str(n): count for n, count in sorted(Counter(len(rounds) for rounds in tasks).items())},
        time_to_answer_ms=distribution([r[-1].start_monotonic_s + r[-1].e2e_s - r[0].start_monotonic_s for r in answered], 1000.0),
        prompt_tokens=token_stats([total(r, "prompt_tokens") for r in answered]),
        output_tokens=token_stats([total(r, "completion_tokens") for r in answered]),
        reasoning_tokens=token_stats([total(r, "reasoning_tokens") for r in answered]),
    )
