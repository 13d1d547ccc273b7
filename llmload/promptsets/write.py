"""`make prompts`: write prompts/2k.jsonl, 4k.jsonl, 8k.jsonl with their statistics, on every core.

Each set's ``<size>.stats.json`` gives the prompt token counts and the mean shared-prefix length:
for each prompt, the longest prefix (in tokens, the server's system header included) that it
shares with any other prompt of the set, which is what vLLM's prefix cache can reuse.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import orjson

from llmload.errors import ConfigError
from llmload.system.files import write_atomic
from llmload.promptsets.generate import SIZES, Template, generate_set, load_templates
from llmload.promptsets.tokens import harmony_encoding, harmony_text

__all__ = ["SetStats", "write_prompt_sets", "shared_prefix_tokens"]

STATS_SCHEMA_VERSION = 1
_CHUNK = 250  # prompts per worker task
_PREFIX_CHARS = 4000  # how much of each prompt the shared-prefix statistic looks at


@dataclass(frozen=True)
class SetStats:
    """What one written set holds."""

    size: str
    count: int
    target_tokens: int
    prompt_tokens_mean: float
    prompt_tokens_min: int
    prompt_tokens_max: int
    max_deviation_ratio: float
    shared_prefix_tokens_mean: float
    templates: dict[str, int]
    seed: int
    schema_version: int = STATS_SCHEMA_VERSION


def prompt_prefix(messages: list[dict[str, str]]) -> tuple[int, ...]:
    """The tokens of a prompt's first 4,000 characters as the server renders it."""
    return tuple(harmony_encoding().encode(harmony_text(messages)[:_PREFIX_CHARS], allowed_special="all"))


def shared_prefix_tokens(prompts: Sequence[list[dict[str, str]]]) -> list[int]:
    """Per prompt, the longest token prefix it shares with another prompt (looking at its first 4,000 characters)."""
    return longest_shared([prompt_prefix(m) for m in prompts])


def longest_shared(prefixes: Sequence[tuple[int, ...]]) -> list[int]:
    """Per prefix, the longest run of leading tokens it shares with any other."""
    order = sorted(range(len(prefixes)), key=prefixes.__getitem__)
    shared = [0] * len(prefixes)
    for a, b in zip(order, order[1:]):  # in sorted order, the longest shared prefix is with a neighbour
        x, y = prefixes[a], prefixes[b]
        n = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
        shared[a], shared[b] = max(shared[a], n), max(shared[b], n)
    return shared


_templates: list[Template] = []


def _load_worker(root: str) -> None:
    global _templates
    _templates = load_templates(Path(root))


def _generate_chunk(size: str, start: int, stop: int, seed: int) -> tuple[list[dict[str, Any]], list[tuple[int, ...]]]:
    lines = list(generate_set(_templates, size, SIZES[size], stop, seed, start=start))
    return lines, [prompt_prefix(line["messages"]) for line in lines]


def write_prompt_sets(sizes: Sequence[str], count: int, seed: int, templates_dir: Path, out_dir: Path) -> list[SetStats]:
    """Write each set (atomically) and its stats; the same arguments always write the same bytes."""
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        raise ConfigError(f"SIZES: unknown size {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    if count < 1:
        raise ConfigError(f"COUNT={count} must be at least 1")
    load_templates(templates_dir)  # template errors surface here, once, before any worker starts
    harmony_encoding()  # loaded before the fork, so workers inherit it
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, initializer=_load_worker, initargs=(str(templates_dir),)) as pool:
        # Every chunk of every size is queued at once, so no worker idles while a set is written.
        futures = {size: [pool.submit(_generate_chunk, size, start, min(start + _CHUNK, count), seed)
                          for start in range(0, count, _CHUNK)] for size in sizes}
        for size in sizes:
            chunks = [future.result() for future in futures[size]]
            lines = [line for chunk_lines, _ in chunks for line in chunk_lines]
            prefixes = [prefix for _, chunk_prefixes in chunks for prefix in chunk_prefixes]
            write_atomic(out_dir / f"{size}.jsonl", b"".join(orjson.dumps(line) + b"\n" for line in lines))
            stats = _stats(size, lines, longest_shared(prefixes), seed)
            (out_dir / f"{size}.stats.json").write_bytes(orjson.dumps(asdict(stats), option=orjson.OPT_INDENT_2) + b"\n")
            results.append(stats)
    return results


def _stats(size: str, lines: list[dict[str, Any]], shared: list[int], seed: int) -> SetStats:
    tokens = np.array([line["prompt_tokens"] for line in lines])
    target = SIZES[size]
    templates: dict[str, int] = {}
    for line in lines:
        templates[line["template"]] = templates.get(line["template"], 0) + 1
    return SetStats(
        size=size, count=len(lines), target_tokens=target, prompt_tokens_mean=float(tokens.mean()),
        prompt_tokens_min=int(tokens.min()), prompt_tokens_max=int(tokens.max()),
        max_deviation_ratio=float(np.abs(tokens - target).max() / target),
        shared_prefix_tokens_mean=float(np.mean(shared)),
        templates=templates, seed=seed,
    )
