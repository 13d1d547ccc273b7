"""Prompt sets, by the PROMPTS spec: generated sets, files, ShareGPT, random, the built-in set.

    2k, 4k, 8k          prompts/<size>.jsonl, written by `make prompts`
    PATH                a prompts JSONL file: one {"id", "messages", ...} object a line
    sharegpt:PATH[:N]   N (default 1000) ShareGPT prompts, filtered as vLLM's bench does
    random:IN:OUT[:N]   N (default 1000) random prompts of IN tokens with OUT output tokens
    builtin             twelve short business prompts

A line's optional ``request`` object (e.g. max_tokens, ignore_eos) is merged into its requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import orjson

from llmload.errors import PromptSetError

__all__ = ["Prompt", "load_prompt_set", "fresh_prompt_set", "BUILTIN", "GENERATED", "prompt_overrides"]

BUILTIN = "builtin"
GENERATED = ("2k", "4k", "8k")
GENERATED_DIR = Path("prompts")


@dataclass(frozen=True)
class Prompt:
    """One prompt: the messages sent, and what else its set recorded about it."""

    id: str
    messages: list[dict[str, str]]
    request: dict[str, Any] = field(default_factory=dict)
    """Body fields this prompt sets for itself (random:IN:OUT forces max_tokens and ignore_eos)."""
    meta: dict[str, Any] = field(default_factory=dict)


def _prompt(item: Any, source: str) -> Prompt:
    if not isinstance(item, dict) or not isinstance(item.get("messages"), list):
        raise PromptSetError(f"{source}: not a prompt; each line needs \"messages\", a list of {{role, content}} objects")
    if not all(isinstance(m, dict) and isinstance(m.get("content"), str) and "role" in m for m in item["messages"]):
        raise PromptSetError(f"{source}: \"messages\" must be a list of {{role, content}} objects")
    request = item.get("request", {})
    if not isinstance(request, dict):
        raise PromptSetError(f"{source}: \"request\" must be an object")
    meta = {k: v for k, v in item.items() if k not in ("id", "messages", "request")}
    return Prompt(str(item.get("id", source)), item["messages"], request, meta)


def _parse_lines(lines: list[bytes], source: str) -> tuple[Prompt, ...]:
    prompts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise PromptSetError(f"{source}:{number}: not JSON ({e})") from None
        prompts.append(_prompt(item, f"{source}:{number}"))
    if not prompts:
        raise PromptSetError(f"{source} holds no prompts")
    return tuple(prompts)


def _count(text: str, spec: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise PromptSetError(f"PROMPTS={spec}: {text!r} is not a whole number") from None


@lru_cache(maxsize=8)
def load_prompt_set(spec: str, seed: int = 0) -> tuple[Prompt, ...]:
    """The prompts named by a PROMPTS spec (see the module docstring)."""
    from llmload.promptsets import workloads as datasets  # lazy: it loads the tokenizer

    if spec == BUILTIN:
        data = resources.files("llmload").joinpath("data/builtin_prompts.jsonl").read_bytes()
        return _parse_lines(data.splitlines(), "builtin prompt set")
    kind, _, rest = spec.partition(":")
    if kind == "sharegpt" and rest:
        path, _, count = rest.rpartition(":") if rest.rsplit(":", 1)[-1].isdigit() else (rest, "", "1000")
        lines = datasets.sharegpt_prompts(Path(path), _count(count, spec), seed)
        return tuple(_prompt(line, f"{spec}:{line['id']}") for line in lines)
    if kind == "random":
        parts = rest.split(":")
        if len(parts) not in (2, 3):
            raise PromptSetError(f"PROMPTS={spec}: use random:IN:OUT or random:IN:OUT:N")
        input_len, output_len, count = (_count(p, spec) for p in (*parts, "1000")[:3])
        lines = datasets.random_prompts(input_len, output_len, count, seed)
        return tuple(_prompt(line, f"{spec}:{line['id']}") for line in lines)
    path = GENERATED_DIR / f"{spec}.jsonl" if spec in GENERATED else Path(spec)
    if path.is_dir():
        raise PromptSetError(f"PROMPTS={spec} is a folder; give a prompts JSONL file in it, e.g. PROMPTS={path / '2k.jsonl'}")
    if not path.is_file():
        hint = "run `make prompts` first" if spec in GENERATED else f"use 2k, 4k, 8k, {BUILTIN}, sharegpt:PATH, random:IN:OUT or a prompts JSONL path"
        raise PromptSetError(f"PROMPTS={spec}: {path} does not exist; {hint}")
    return _parse_lines(path.read_bytes().splitlines(), str(path))


def fresh_prompt_set(spec: str, seed: int, start: int) -> tuple[tuple[Prompt, ...], int]:
    """The set a run draws its fresh prompts from at PROMPT_START ``start``, and the position in it its first is at:
    a random:IN:OUT set is drawn anew for each start (its seed made from both; position 0), any other set is the same
    set from position ``start``."""
    if spec.startswith("random:"):
        return load_prompt_set(spec, seed * 1_000_003 + start if start else seed), 0
    return load_prompt_set(spec, seed), start


def prompt_overrides(prompts: Sequence[Prompt]) -> dict[str, str]:
    """Body fields the prompts set themselves, over the run's options: ``{"max_tokens": "128"}`` or ``"4-1024"``."""
    values: dict[str, set[Any]] = {}
    for prompt in prompts:
        for key, value in prompt.request.items():
            values.setdefault(key, set()).add(value)
    out = {}
    for key, seen in sorted(values.items()):
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen)
        out[key] = f"{min(seen):g}-{max(seen):g}" if numbers and len(seen) > 1 else ", ".join(sorted(str(v) for v in seen))
    return out
