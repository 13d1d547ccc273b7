"""Prompt token counting (exact, llmload.promptsets.tokens) and the synthetic output vocabulary."""

from __future__ import annotations

from typing import Any

from functools import lru_cache

from llmload.promptsets.tokens import harmony_encoding, harmony_text, prompt_tokens, text_tokens


def _content_text(content: Any) -> str:
    """Flatten OpenAI message content (string, list of parts, or None) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


@lru_cache(maxsize=1024)
def _cached_text_tokens(text: str) -> int:
    # Prompt sets repeat prompts; tokenizing an 8k prompt costs ~2 ms of the event loop.
    return text_tokens(text)


def text_token_ids(text: str) -> list[int]:
    """o200k ids of a text (the `prompt` form of /tokenize)."""
    return harmony_encoding().encode_ordinary(text)


def _flat(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": str(m.get("role", "user")), "content": _content_text(m.get("content"))} for m in messages]


def prompt_token_ids(messages: list[dict[str, Any]], effort: str = "medium") -> list[int]:
    """The ids of a chat as vLLM renders it for gpt-oss (the `messages` form of /tokenize)."""
    return harmony_encoding().encode(harmony_text(_flat(messages), effort), allowed_special="all")


def prompt_token_count(messages: list[dict[str, Any]], effort: str = "medium") -> int:
    """Prompt tokens of a chat request as vLLM renders it for gpt-oss (harmony frame included)."""
    return prompt_tokens(_flat(messages), effort, count=_cached_text_tokens)


# Output tokens cycle through short ASCII words so chunk JSON never needs escaping.
WORDS: tuple[str, ...] = (
    "the", "model", "token", "stream", "think", "about", "this", "answer",
    "plan", "check", "value", "then", "next", "step", "so", "we",
    "need", "to", "find", "a", "good", "way", "for", "it",
    "is", "and", "of", "in", "that", "with", "as", "on",
    "data", "load", "test", "time", "fast", "slow", "queue", "batch",
    "cache", "first", "last", "more", "less", "rate", "sum", "mean",
    "list", "item", "each", "case", "run", "call", "wait", "done",
    "ok", "yes", "no", "may", "will", "can", "use", "note",
)
# Each token's text is "<word> "; bytes are pre-encoded once for the hot path.
WORD_BYTES: tuple[bytes, ...] = tuple((w + " ").encode("ascii") for w in WORDS)


def tokens_text(count: int) -> str:
    """Concatenated text of the first count tokens (used for non-stream bodies)."""
    n = len(WORDS)
    full, rest = divmod(count, n)
    cycle = "".join(w + " " for w in WORDS)
    return cycle * full + "".join(WORDS[i] + " " for i in range(rest))
