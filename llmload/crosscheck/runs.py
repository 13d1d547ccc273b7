"""Pure: crosscheck's runs in the order they ran, each with its own fresh prompts, the server's prefix-cache hit rate
over its window, and how the tool and the server counted its requests.

Run k (in time order: bench, suite, then suite, bench, ...) draws its prompts at PROMPT_START + k, so no tool meets
prompts another run left in the server's prefix cache. A run whose server hit rate exceeds the other tool's of the
same repeat by more than HIT_RATE_GAP is flagged: its TTFT and throughput were helped by the cache.

vLLM's bench counts a stream completed once a chunk with ``choices`` came (vLLM 0.32,
benchmarks/lib/endpoint_request_func.py, openai-chat): an error event later in the stream (``{"error": ...}``, no
choices) fails nothing, and the stream ends without the usage chunk. The server counts only the requests it finished
(its E2E histogram). Every request of a crosscheck forces OUT tokens (ignore_eos), so a completed stream that
recorded fewer (``output_lens`` of ``--save-detailed``: the usage's count, else its text tokenized again) ended short.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["TOOLS", "HIT_RATE_GAP", "PlannedRun", "ShortStream", "RunAccount", "plan_runs", "short_streams",
           "hit_rate_excess", "count_note", "format_runs"]

TOOLS = ("vllm_bench", "llmload")
HIT_RATE_GAP = 0.05
"""A run's server hit rate above the other tool's of its repeat by more than this (5 points) is flagged."""
_SHOWN_SHORT = 10
"""Short streams named one by one in the table's note; the JSON lists them all."""


@dataclass(frozen=True)
class PlannedRun:
    """One tool's run: where it stands in time and where its prompts start."""

    index: int
    """k: its place in time order, from 0."""
    repeat: int
    tool: str
    prompt_start: int


def plan_runs(repeats: int, first_start: int) -> tuple[PlannedRun, ...]:
    """Every run in time order, the tools alternating per repeat; run k starts its prompts at ``first_start`` + k."""
    runs: list[PlannedRun] = []
    for repeat in range(repeats):
        for tool in TOOLS if repeat % 2 == 0 else TOOLS[::-1]:
            runs.append(PlannedRun(len(runs), repeat, tool, first_start + len(runs)))
    return tuple(runs)


@dataclass(frozen=True)
class ShortStream:
    """A request vLLM's bench counted completed that ended short of the tokens every request forces."""

    request: int
    """Its place in the bench's run (in its result's per-request lists), from 0."""
    output_tokens: int
    """What the bench recorded (output_lens): the usage's count, else its text tokenized again."""


def short_streams(result: Mapping[str, Any], output_len: int) -> tuple[ShortStream, ...]:
    """The requests of a `vllm bench serve --save-detailed` result counted completed (no error) with fewer than
    ``output_len`` output tokens; () without the per-request lists."""
    errors, lengths = result.get("errors") or (), result.get("output_lens") or ()
    return tuple(ShortStream(i, int(n)) for i, (error, n) in enumerate(zip(errors, lengths))
                 if not error and n is not None and n < output_len)


@dataclass(frozen=True)
class RunAccount:
    """A run as it went: its prompts, the cache before it, the server's hit rate, and each side's request count."""

    run: PlannedRun
    cache_reset: str
    """CACHE_RESET's outcome before this run, in words (off without it)."""
    hit_rate: float | None
    """The server's prefix-cache hits over queries in the window around the run; None without its counters."""
    completed: int | None
    failed: int | None
    server_finished: int | None
    """The requests the server finished in the window (its E2E histogram's count); None without it."""
    output_len: int
    """The output tokens every request forces."""
    short: tuple[ShortStream, ...] = ()
    """vLLM bench: the completed streams that ended short (the bench records no error for them)."""
    failures: tuple[str, ...] = ()
    """llmload: its failed requests' kinds and the server's messages (``stream_error: ... (1)``)."""
    mean_ttft_ms: float | None = None
    server_mean_ttft_ms: float | None = None

    @property
    def counted_differently(self) -> bool:
        """The tool counted other completed requests than the server finished."""
        return None not in (self.completed, self.server_finished) and self.completed != self.server_finished


def hit_rate_excess(runs: Sequence[RunAccount]) -> dict[int, float]:
    """Per run index, the points (100 x share) by which its hit rate exceeds the other tool's of its repeat, where
    that is more than HIT_RATE_GAP."""
    by_repeat: dict[int, list[RunAccount]] = {}
    for account in runs:
        by_repeat.setdefault(account.run.repeat, []).append(account)
    excess = {}
    for pair in by_repeat.values():
        for account in pair:
            others = [o.hit_rate for o in pair if o is not account and o.hit_rate is not None]
            if account.hit_rate is not None and others and account.hit_rate - max(others) > HIT_RATE_GAP:
                excess[account.run.index] = 100.0 * (account.hit_rate - max(others))
    return excess


def count_note(account: RunAccount) -> str | None:
    """What the tool and the server counted, when they differ or the bench counted a short stream completed: which
    side counted what, and the streams behind it; None otherwise."""
    if not account.counted_differently and not account.short:
        return None
    run = account.run
    text = (f"run {run.index + 1} (repeat {run.repeat + 1}, {run.tool}): {run.tool} counted {account.completed} "
            f"completed and {account.failed or 0} failed, the server finished "
            f"{'n/a' if account.server_finished is None else account.server_finished} (its E2E histogram's count over "
            "the run's window)")
    if run.tool == "vllm_bench":
        text += (": vLLM bench counts a stream completed once a chunk with choices came, so an error event later in "
                 "the stream fails nothing")
        if account.short:
            named = ", ".join(f"request {s.request} ({s.output_tokens} tokens)" for s in account.short[:_SHOWN_SHORT])
            more = f" and {len(account.short) - _SHOWN_SHORT} more" if len(account.short) > _SHOWN_SHORT else ""
            text += (f"; {len(account.short)} of its completed streams ended short of the {account.output_len} tokens "
                     f"every request forces (an error ends a stream without its usage): {named}{more}")
        else:
            text += "; none of its completed streams ended short of the tokens forced"
    elif account.failures:
        text += f"; its failures: {'; '.join(account.failures)}"
    return text


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def format_runs(runs: Sequence[RunAccount]) -> str:
    """The runs in time order (a Markdown table), then the flagged hit rates and the counts that differ, one line each."""
    excess = hit_rate_excess(runs)
    lines = ["Runs in the order they ran, each with its own fresh prompts (PROMPT_START), the server's /metrics around "
             "each:", "",
             "| run | repeat | tool | PROMPT_START | cache reset | server prefix-cache hit rate | requests: tool / server "
             "| mean TTFT ms: tool / server |",
             "|---:|---:|---|---:|---|---:|---|---|"]
    for a in runs:
        hit = _share(a.hit_rate) + (f" CACHED +{excess[a.run.index]:.1f} pts" if a.run.index in excess else "")
        failed = f" (+{a.failed} failed)" if a.failed else ""
        counts = f"{a.completed}{failed} / {'n/a' if a.server_finished is None else a.server_finished}"
        lines.append(f"| {a.run.index + 1} | {a.run.repeat + 1} | {a.run.tool} | {a.run.prompt_start} | {a.cache_reset} "
                     f"| {hit} | {counts}{' DIFFER' if a.counted_differently else ''} "
                     f"| {_ms(a.mean_ttft_ms)} / {_ms(a.server_mean_ttft_ms)} |")
    for a in runs:
        if a.run.index in excess:
            other = next(o for o in runs if o.run.repeat == a.run.repeat and o is not a)
            lines.append(f"warning: run {a.run.index + 1} (repeat {a.run.repeat + 1}, {a.run.tool}): the server found "
                         f"{_share(a.hit_rate)} of its prompt tokens cached, {excess[a.run.index]:.1f} points more than "
                         f"in {other.run.tool}'s run ({_share(other.hit_rate)}): prompts were in its prefix cache, so "
                         "its TTFT and throughput are better than the other tool's; this repeat is not like for like")
    notes = [note for a in runs if (note := count_note(a))]
    if notes:
        lines += ["", "Counted differently:", *(f"- {note}" for note in notes)]
    return "\n".join(lines)
