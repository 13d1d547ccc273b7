"""What a server says in its log it actually ran with: vLLM's `non-default args`, engine config, attention backend,
batch and KV sizes, async scheduling; SGLang's `server_args=ServerArgs(...)`.

Formats as vLLM logs them (0.9 to 0.32; the prefix `(APIServer pid=1) INFO 12-06 04:47:33 [api_utils.py:286] ` may
be missing or preceded by a timestamp):
    non-default args: {'host': '127.0.0.1', 'port': 8000, 'max_num_seqs': 32, 'api_key': '***'}   (a dict's repr)
    Initializing a V1 LLM engine (v0.32.0) with config: model='m', dtype=torch.bfloat16, max_seq_len=10240, ...
    Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER'].
    Chunked prefill is enabled with max_num_batched_tokens=8192.
    GPU KV cache size: 112,347 tokens, Maximum concurrency for 98,304 tokens per request: 1.14x
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Iterable

__all__ = ["SECRET_KEYS", "read_effective", "split_top_level", "parse_mapping"]

SCHEMA_VERSION = 1
SECRET_KEYS = frozenset({"api_key", "hf_token", "watermark_config", "admin_api_key"})
"""Argument names whose values are never written (vLLM >= 0.3x logs them as '***'; older ones verbatim)."""
_MAX_LINES = 40
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_HEADER = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s?(.*)$")
_SGLANG_HEADER = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]\s+(?:(?:DEBUG|INFO|WARNING|ERROR)\s+\S+:\d+:\s+)?(.*)$")
_OPEN, _CLOSE = "([{<", ")]}>"
_INTERESTING = re.compile(r"backend|async|schedul|batched.tokens|num.seqs|concurrency|kv cache|cuda ?graph|graph captur|"
                          r"prefix.cach|chunked.prefill|quantiz|speculative|enforce.eager|torch\.compile", re.IGNORECASE)


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` cut at each ``separator`` outside quotes and brackets, pieces stripped: "a=1, b=(2, 3)" -> 2."""
    pieces, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif c == separator and depth == 0:
            pieces.append(text[start:i].strip())
            start = i + 1
        i += 1
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def _value(text: str) -> Any:
    """A Python literal's value; the text itself (an enum's or an object's repr, ``torch.bfloat16``) otherwise."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 300)


def _scalars(mapping: dict[str, Any]) -> dict[str, Any]:
    """``mapping``'s values that are one value or short text; a dict's (vLLM's compilation_config) likewise, one
    level down."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, str) and value.startswith("{"):
            value = parse_mapping(value, ":")
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if _scalar(v)}
        if isinstance(value, dict) or _scalar(value):
            out[key] = value
    return out


def parse_mapping(text: str, assign: str) -> dict[str, Any]:
    """``{'k': v, ...}`` (``assign`` ":") or ``k=v, ...`` (``assign`` "=") as a dict; a value that is no literal
    is kept as its text, and a secret's (SECRET_KEYS) as "***"."""
    body = text.strip()
    if assign == ":":
        if not (body.startswith("{") and body.endswith("}")):
            return {}
        body = body[1:-1]
    out: dict[str, Any] = {}
    for piece in split_top_level(body):
        key, found, value = piece.partition(assign)
        if not found:
            continue
        key = key.strip().strip("'\"")
        if key.isidentifier():
            out[key] = "***" if key in SECRET_KEYS else _value(value.strip())
    return out


def _message(line: str) -> str:
    """A log line without its logger's prefix (vLLM's or SGLang's) and colours."""
    line = _ANSI.sub("", line).strip()
    for header in (_HEADER, _SGLANG_HEADER):
        found = header.search(line)
        if found:
            return found.group(1).strip()
    return line


def _number(text: str) -> int | float:
    text = text.replace(",", "")
    return float(text) if "." in text else int(text)


_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]]
_RULES: tuple[_Rule, ...] = (
    (re.compile(r"non-default args: (\{.*\})\s*$"), lambda m: {"server": "vllm", "non_default_args": parse_mapping(m[1], ":")}),
    (re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\) with config: (.*)$"),
     lambda m: {"server": "vllm", "version": m[1],
                "engine_config": _scalars(parse_mapping(m[2], "="))}),
    (re.compile(r"vLLM API server version (\S+)"), lambda m: {"server": "vllm", "version": m[1]}),
    (re.compile(r"Using (\w+) attention backend out of potential backends: \[(.*)\]"),
     lambda m: {"attention_backend": m[1], "attention_backends_possible": [b.strip(" '\"") for b in m[2].split(",")]}),
    (re.compile(r"^Using (?:AttentionBackendEnum\.)?([A-Z][A-Z0-9_]+) backend\.?$"), lambda m: {"attention_backend": m[1]}),
    (re.compile(r"^Using (.+?) backend on V1 engine\.?$"), lambda m: {"attention_backend": m[1]}),
    (re.compile(r"Attention backend not specified\. Use (\w+) backend by default"), lambda m: {"attention_backend": m[1]}),
    (re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)"),
     lambda m: {"max_num_batched_tokens": int(m[1])}),
    (re.compile(r"KV cache size: ([\d,]+) tokens"), lambda m: {"kv_cache_tokens": _number(m[1])}),
    (re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"),
     lambda m: {"max_concurrency": _number(m[2]), "max_concurrency_tokens_per_request": _number(m[1])}),
    (re.compile(r"Asynchronous scheduling is (enabled|disabled)"), lambda m: {"async_scheduling": m[1] == "enabled"}),
    (re.compile(r"Async(?:hronous)? scheduling (?:is disabled|will be disabled|not supported|is not (?:compatible|supported))"),
     lambda m: {"async_scheduling": False}),
    (re.compile(r"Using max model len (\d+)"), lambda m: {"max_model_len": int(m[1])}),
    (re.compile(r"Resolved architecture: (\S+)"), lambda m: {"architecture": m[1]}),
    (re.compile(r"server_args=ServerArgs\((.*)\)\s*$"),
     lambda m: {"server": "sglang", "server_args": _scalars(parse_mapping(m[1], "="))}),
)
_BANNER_VERSION = re.compile(r"█\s+version\s+(\S+)$")


def read_effective(lines: Iterable[str]) -> dict[str, Any]:
    """What the log says the server ran with: the fields its lines give (the first of each wins, as logged at
    startup), and ``lines``: other lines about settings that no rule reads (deduplicated, at most 40)."""
    found: dict[str, Any] = {}
    unparsed: list[str] = []
    for line in lines:
        message = _message(line)
        if not message:
            continue
        matched = False
        for pattern, read in _RULES:  # every rule: one line can say two things (KV cache size, concurrency)
            match = pattern.search(message)
            if match:
                matched = True
                for key, value in read(match).items():
                    found.setdefault(key, value)
        if not matched:
            banner = _BANNER_VERSION.search(message)
            if banner:
                found.setdefault("version", banner[1])
            elif _INTERESTING.search(message) and message not in unparsed and len(unparsed) < _MAX_LINES:
                unparsed.append(message[:500])
    return {"schema_version": SCHEMA_VERSION, **found, "lines": unparsed}
