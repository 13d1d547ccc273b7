"""Prompts as vLLM tokenizes them (exact, llmload.promptsets.tokens), their KV blocks' hashes for the prefix cache,
and the synthetic output vocabulary."""

from __future__ import annotations

from array import array
from functools import lru_cache
from typing import Any

from llmload.promptsets.tokens import harmony_encoding, harmony_text, rendered_message, system_header


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
def _text_ids(text: str) -> bytes:
    """o200k ids of a message's text, 4 bytes each. Prompt sets repeat prompts and a conversation resends its history:
    tokenizing an 8k prompt costs ~2 ms of the event loop."""
    return array("I", harmony_encoding().encode_ordinary(text)).tobytes()


@lru_cache(maxsize=64)
def _frame_ids(frame: str) -> bytes:
    """Ids of a piece of harmony's frame (the system message, a message's header, the end), special tokens included."""
    return array("I", harmony_encoding().encode(frame, allowed_special="all")).tobytes()


def text_token_ids(text: str) -> list[int]:
    """o200k ids of a text (the `prompt` form of /tokenize)."""
    return harmony_encoding().encode_ordinary(text)


def _flat(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": str(m.get("role", "user")), "content": _content_text(m.get("content"))} for m in messages]


def prompt_token_ids(messages: list[dict[str, Any]], effort: str = "medium") -> list[int]:
    """The ids of a chat as vLLM renders it for gpt-oss (the `messages` form of /tokenize)."""
    return harmony_encoding().encode(harmony_text(_flat(messages), effort), allowed_special="all")


def _prompt_ids(messages: list[dict[str, Any]], effort: str) -> bytes:
    """``prompt_token_ids``, 4 bytes each, from each message's cached ids: special tokens split harmony's text, so
    the pieces between them tokenize alone."""
    parts = [_frame_ids(system_header(effort))]
    for message in _flat(messages):
        rendered = rendered_message(message)
        if rendered is not None:
            parts += (_frame_ids(f"<|start|>{rendered[0]}<|message|>"), _text_ids(rendered[1]), _frame_ids("<|end|>"))
    parts.append(_frame_ids("<|start|>assistant"))
    return b"".join(parts)


def prompt_blocks(messages: list[dict[str, Any]], effort: str, block_size: int) -> tuple[int, tuple[int, ...]]:
    """A chat request's prompt tokens as vLLM renders it for gpt-oss (harmony frame included), and the hashes of its
    full blocks of ``block_size`` tokens, each chained from the one before (vLLM's prefix-cache keys)."""
    ids = _prompt_ids(messages, effort)
    step = 4 * block_size
    hashes = []
    chained = 0
    for start in range(0, len(ids) - step + 1, step):
        chained = hash((chained, ids[start:start + step]))
        hashes.append(chained)
    return len(ids) // 4, tuple(hashes)


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
