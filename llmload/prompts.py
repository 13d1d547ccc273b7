"""Prompt sets: the built-in stand-in set and JSONL files of chat prompts.

A prompts JSONL file has one object a line with at least ``id`` and ``messages`` (OpenAI chat
messages); other fields (``template``, ``target_tokens``, ``prompt_tokens``) are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from llmload.errors import PromptSetError

__all__ = ["Prompt", "load_prompt_set", "BUILTIN"]

BUILTIN = "builtin"


@dataclass(frozen=True)
class Prompt:
    """One prompt: the messages sent, and what else its set recorded about it."""

    id: str
    messages: list[dict[str, str]]
    meta: dict[str, Any] = field(default_factory=dict)


def _parse_lines(lines: list[bytes], source: str) -> tuple[Prompt, ...]:
    prompts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = orjson.loads(line)
            messages = item["messages"]
            prompt_id = str(item.get("id", number))
        except (orjson.JSONDecodeError, KeyError, TypeError) as e:
            raise PromptSetError(f"{source}:{number}: not a prompt line ({type(e).__name__}: {e}); each line needs \"messages\"") from None
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "content" in m for m in messages):
            raise PromptSetError(f"{source}:{number}: \"messages\" must be a list of {{role, content}} objects")
        meta = {k: v for k, v in item.items() if k not in ("id", "messages")}
        prompts.append(Prompt(prompt_id, messages, meta))
    if not prompts:
        raise PromptSetError(f"{source} holds no prompts")
    return tuple(prompts)


@lru_cache(maxsize=8)
def load_prompt_set(spec: str) -> tuple[Prompt, ...]:
    """The prompts named by PROMPTS: ``builtin`` or a path to a prompts JSONL file."""
    if spec == BUILTIN:
        data = resources.files("llmload").joinpath("data/builtin_prompts.jsonl").read_bytes()
        return _parse_lines(data.splitlines(), "builtin prompt set")
    path = Path(spec)
    if not path.is_file():
        raise PromptSetError(f"PROMPTS={spec}: no such file; use {BUILTIN} or a path to a prompts JSONL file")
    return _parse_lines(path.read_bytes().splitlines(), str(path))
