"""What a run sends, built once per process before the test's clock starts: the prompts (PROMPTS, with
PREFIX_TOKENS's shared prefixes, or TRACE's rows), for conversations the follow-up set, and the tools offered
(TOOLS) with their rounds' results (TOOL_ROUNDS).

Building takes seconds for some sets (random:IN:OUT, ShareGPT), so each Locust process builds it at init, before
Locust starts counting DURATION; the test's session finds it cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmload.loadtest.runconfig import RunConfig
from llmload.loadtest.turns import parse_turns
from llmload.promptsets.catalog import Prompt, fresh_prompt_set
from llmload.promptsets.followups import FollowUp, followup_set
from llmload.promptsets.prefixes import with_shared_prefixes
from llmload.promptsets.sharing import shared_tokens
from llmload.promptsets.tools import load_tools, tool_names, tool_results
from llmload.promptsets.traces import Trace, read_trace, trace_prompts

__all__ = ["Workload", "workload_of"]


@dataclass(frozen=True)
class Workload:
    """A run's prompts and what its conversations' later turns draw from."""

    prompts: tuple[Prompt, ...]
    followups: dict[str, tuple[FollowUp, ...]]
    """The follow-up set by template name; empty when requests are single turns."""
    trace: Trace | None = None
    """TRACE's rows, prompt i being row i's; None without a trace."""
    tools: tuple[dict[str, Any], ...] = ()
    """The function tools every request offers (TOOLS); empty: none."""
    tool_results: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each offered function's results, for TOOL_ROUNDS above 1; empty otherwise."""
    shared_tokens: dict[str, int] = field(default_factory=dict)
    """Per prompt id, the tokens of its first turn the set declares shareable in the prefix cache (sharing.py)."""
    first_fresh: int = 0
    """The position in the set's fresh order of this run's first prompt (PROMPT_START; 0 for a random:IN:OUT set,
    which PROMPT_START draws anew)."""


def workload_of(config: RunConfig) -> Workload:
    """The workload ``config`` asks for (cached: the same settings give the same object)."""
    if config.trace:
        workload = _replay(config.trace, config.trace_limit, config.seed)
    else:
        workload = _build(config.prompts, config.seed, config.prefix_tokens, config.prefix_groups,
                          parse_turns(config.turns)[1] > 1, config.prompt_start)
    if not config.tools:
        return workload
    tools = load_tools(config.tools)
    results = tool_results(tuple(sorted(tool_names(tools))), config.tool_result_tokens, config.seed) \
        if config.tool_rounds > 1 else {}
    return replace(workload, tools=tools, tool_results=results)


@lru_cache(maxsize=2)
def _replay(path: str, limit: int, seed: int) -> Workload:
    trace = read_trace(Path(path), limit)
    prompts = trace_prompts(trace, seed)
    return Workload(prompts, {}, trace, shared_tokens=shared_tokens(prompts))


@lru_cache(maxsize=4)
def _build(spec: str, seed: int, prefix_tokens: int, prefix_groups: int, conversations: bool, start: int) -> Workload:
    prompts, first_fresh = fresh_prompt_set(spec, seed, start)
    if prefix_tokens:
        prompts = with_shared_prefixes(prompts, prefix_tokens, prefix_groups, seed)
    return Workload(prompts, followup_set(seed) if conversations else {}, shared_tokens=shared_tokens(prompts),
                    first_fresh=first_fresh)
