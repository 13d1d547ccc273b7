"""TRACE: request traces to replay, read from the two public formats, and the prompts their rows ask for.

    Mooncake JSONL   one object a line: ``timestamp`` (ms), ``input_length``, ``output_length`` and optional
                     ``hash_ids``: block i of the prompt (its tokens 512*i to 512*i+511) is the block of that hash id,
                     so rows that share hash ids share those blocks of prompt, text for text
    Azure CSV        the Azure LLM inference traces: a header with ``TIMESTAMP`` (date and time), ``ContextTokens``
                     and ``GeneratedTokens``

Each row's prompt is one user message of exactly its input length in tokens (the server adds its harmony frame, as
with random:IN:OUT), made of one-token words (wordtokens.py): a hash id's block is the same words wherever it
appears, a row's tokens past its last block (all of them without hash ids) are blocks of its own, and no two blocks
share a prefix. Its max_tokens is its output length (at least 1). All of it is built before the run: nothing is
made while requests are in flight.
"""

from __future__ import annotations

import csv
import io
import math
import random
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from llmload.errors import PromptSetError
from llmload.promptsets.catalog import Prompt
from llmload.promptsets.tokens import prompt_tokens
from llmload.promptsets.wordtokens import word_tokens

__all__ = ["BLOCK_TOKENS", "FORMATS", "TraceRow", "Trace", "read_trace", "trace_prompts"]

BLOCK_TOKENS = 512
"""The tokens of prompt one Mooncake hash id stands for."""
FORMATS = ("mooncake", "azure")
_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@dataclass(frozen=True)
class TraceRow:
    """One request of a trace."""

    line: int
    """Where it stands in the file (1 is the first line), for messages and prompt ids."""
    offset_s: float
    """When it is sent, in seconds after the trace's first request (before TRACE_SPEED)."""
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    """A trace's rows, in the order they are sent."""

    path: str
    format: str
    rows: tuple[TraceRow, ...]


def _fail(path: Path, line: int | None, what: str) -> PromptSetError:
    return PromptSetError(f"TRACE={path}{f':{line}' if line else ''}: {what}")


def _whole(value: Any, name: str, path: Path, line: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise _fail(path, line, f"{name} must be a whole number of 0 or more, not {value!r}")
    return int(value)


def _mooncake_row(text: bytes, path: Path, line: int) -> tuple[float, TraceRow]:
    """(its timestamp in ms, the row)."""
    try:
        item = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise _fail(path, line, f"not JSON ({e})") from None
    missing = [k for k in ("timestamp", "input_length", "output_length") if not isinstance(item, dict) or k not in item]
    if missing:
        raise _fail(path, line, f"a Mooncake row needs timestamp, input_length and output_length; {missing[0]} is missing")
    timestamp = item["timestamp"]
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or not math.isfinite(timestamp):
        raise _fail(path, line, f"timestamp must be a number of milliseconds, not {timestamp!r}")
    hash_ids = item.get("hash_ids", [])
    if not isinstance(hash_ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hash_ids):
        raise _fail(path, line, f"hash_ids must be a list of whole numbers, not {hash_ids!r}")
    return timestamp, TraceRow(line, 0.0, _whole(item["input_length"], "input_length", path, line),
                                        _whole(item["output_length"], "output_length", path, line), tuple(hash_ids))


def _azure_time_s(text: str, path: Path, line: int) -> float:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise _fail(path, line, f"TIMESTAMP {text!r} is not a date and time like 2023-11-16 18:15:46.6805900") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def _azure_rows(text: str, path: Path, limit: int) -> list[tuple[float, TraceRow]]:
    reader = csv.reader(io.StringIO(text))
    header = [name.strip() for name in next(reader)]
    columns = [header.index(name) for name in _AZURE_COLUMNS]
    rows = []
    for values in reader:
        line = reader.line_num
        if not values:
            continue
        if len(values) < len(header):
            raise _fail(path, line, f"{len(values)} values, the header names {len(header)}")
        if limit and len(rows) >= limit:
            break
        stamp, context, generated = (values[i] for i in columns)
        try:
            numbers = int(context), int(generated)
        except ValueError:
            raise _fail(path, line, f"ContextTokens and GeneratedTokens must be whole numbers, not {context!r}, {generated!r}") from None
        rows.append((_azure_time_s(stamp, path, line), TraceRow(line, 0.0, *(_whole(n, name, path, line) for n, name in
                                                                               zip(numbers, _AZURE_COLUMNS[1:])))))
    return rows


def read_trace(path: Path, limit: int = 0) -> Trace:
    """The trace in ``path`` (its first ``limit`` rows; 0: all), in send order; PromptSetError names the file and line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise _fail(path, None, "no such file") from None
    except IsADirectoryError:
        raise _fail(path, None, "is a folder; give a trace file") from None
    first = data.lstrip()[:1]
    text = data.decode("utf-8", "replace")
    if first == b"{":
        kind, per_s = "mooncake", 1000.0
        rows = []
        for number, line in enumerate(data.splitlines(), 1):
            if line.strip():
                if limit and len(rows) >= limit:
                    break
                rows.append(_mooncake_row(line, path, number))
    elif all(name in text.split("\n", 1)[0] for name in _AZURE_COLUMNS):
        kind, per_s, rows = "azure", 1.0, _azure_rows(text, path, limit)
    else:
        raise _fail(path, None, "unknown trace format: neither Mooncake JSONL (objects with timestamp, input_length, "
                                "output_length) nor an Azure LLM inference CSV (a header with TIMESTAMP, ContextTokens, "
                                "GeneratedTokens)")
    if not rows:
        raise _fail(path, None, "holds no requests")
    first = min(t for t, _ in rows)  # in the format's own unit: subtracted before dividing, the offsets stay exact
    ordered = sorted((((t - first) / per_s, row) for t, row in rows), key=lambda pair: pair[0])  # ties keep file order
    return Trace(str(path), kind, tuple(TraceRow(row.line, offset_s, row.input_tokens, row.output_tokens, row.hash_ids)
                                        for offset_s, row in ordered))


class _Blocks:
    """The text of a trace's blocks of prompt: each one's first CHUNK words its own (so no two blocks share a prefix),
    the rest runs of CHUNK words from a pool of POOL runs (one draw each, not CHUNK: a 10,000-row trace of 40
    million tokens is built in seconds). A key is a hash id or a row's own block; its text depends on the key and
    the seed only, whatever the order blocks are asked for."""

    CHUNK, POOL = 64, 4096

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._words = word_tokens()
        draw = random.Random(f"trace-pool:{seed}")
        self._pool = [draw.choices(self._words, k=self.CHUNK) for _ in range(self.POOL)]
        self._pool_text = ["".join(run) for run in self._pool]
        self._full: dict[int | str, str] = {}

    def text(self, key: int | str, tokens: int) -> str:
        """The block's first ``tokens`` words (BLOCK_TOKENS: all of it, kept for the other rows that share it)."""
        if tokens == BLOCK_TOKENS and key in self._full:
            return self._full[key]
        draw = random.Random(f"trace:{self._seed}:{key}")
        own, runs = draw.choices(self._words, k=self.CHUNK), draw.choices(range(self.POOL), k=BLOCK_TOKENS // self.CHUNK - 1)
        if tokens == BLOCK_TOKENS:
            text = self._full[key] = "".join(own) + "".join(self._pool_text[r] for r in runs)
            return text
        parts, left = ["".join(own[:tokens])], tokens - self.CHUNK
        for r in runs:
            if left <= 0:
                break
            parts.append(self._pool_text[r] if left >= self.CHUNK else "".join(self._pool[r][:left]))
            left -= self.CHUNK
        return "".join(parts)


def trace_prompts(trace: Trace, seed: int = 0) -> tuple[Prompt, ...]:
    """One prompt per row, in send order: exactly its input length in tokens, its hash ids' blocks shared text for text."""
    blocks = _Blocks(seed)
    header = prompt_tokens([{"role": "user", "content": ""}])
    prompts = []
    for row in trace.rows:
        parts = [blocks.text(h, min(BLOCK_TOKENS, row.input_tokens - BLOCK_TOKENS * i))
                 for i, h in enumerate(row.hash_ids) if row.input_tokens > BLOCK_TOKENS * i]
        own = row.input_tokens - min(row.input_tokens, BLOCK_TOKENS * len(row.hash_ids))
        parts += [blocks.text(f"row-{row.line}-{i}", min(BLOCK_TOKENS, own - BLOCK_TOKENS * i))
                  for i in range(math.ceil(own / BLOCK_TOKENS))]
        prompts.append(Prompt(f"trace-{row.line}", [{"role": "user", "content": "".join(parts)}],
                              {"max_tokens": max(1, row.output_tokens)},
                              {"prompt_tokens": header + row.input_tokens, "input_tokens": row.input_tokens,
                               "output_tokens": row.output_tokens, "trace_line": row.line}))
    return tuple(prompts)
