"""The two workloads of vLLM's bench that the A100 report used: ShareGPT and random token prompts.

Both follow ``vllm bench serve``'s rules, with o200k tokens (gpt-oss's tokenizer) as the unit:
- ShareGPT: the first turn of each conversation with two or more turns is the prompt, the second
  turn's token count is the output length; prompts under 4 tokens, outputs under 4, prompts over
  1,024 and pairs over 2,048 tokens are skipped; conversations are shuffled with the seed. The later
  human turns are kept (``later_turns``, each with its answer's length) for TURNS.
- random IN:OUT: prompts of exactly IN tokens of random text, OUT output tokens forced with
  max_tokens and ignore_eos.
Lengths count the user message's text, as vLLM's bench does; ``prompt_tokens`` adds the harmony
frame the server puts around it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from llmload.errors import PromptSetError
from llmload.promptsets.tokens import harmony_encoding, prompt_tokens, text_tokens

__all__ = ["LATER_TURNS", "sharegpt_prompts", "random_prompts"]

LATER_TURNS = "later_turns"
"""A ShareGPT prompt's meta key for its later turns: [[user message, its answer's tokens], ...]."""

_MIN_LEN, _MAX_PROMPT_LEN, _MAX_TOTAL_LEN = 4, 1024, 2048
_ORDINARY_VOCAB = 199_998  # o200k ids below the first special token


def _line(prompt_id: str, text: str, request: dict[str, Any], **meta: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": text}]
    return {"id": prompt_id, "messages": messages, "prompt_tokens": prompt_tokens(messages), "request": request, **meta}


def sharegpt_prompts(path: Path, count: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Up to ``count`` prompt lines from a ShareGPT JSON file (a list of {"conversations": [...]})."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise PromptSetError(f"PROMPTS=sharegpt:{path}: no such file") from None
    except orjson.JSONDecodeError as e:
        raise PromptSetError(f"PROMPTS=sharegpt:{path}: not JSON ({e})") from None
    if not isinstance(data, list):
        raise PromptSetError(f"PROMPTS=sharegpt:{path}: expected a JSON list of conversations, got {type(data).__name__}")
    conversations = []
    for number, entry in enumerate(data):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list) or not all(isinstance(t, dict) and isinstance(t.get("value"), str) for t in turns):
            raise PromptSetError(f"PROMPTS=sharegpt:{path}: entry {number} has no \"conversations\" list of {{from, value}} turns")
        if len(turns) >= 2:
            conversations.append((number, turns))
    random.Random(seed).shuffle(conversations)
    lines = []
    for number, turns in conversations:
        if len(lines) >= count:
            break
        prompt, completion = turns[0]["value"], turns[1]["value"]
        prompt_len, output_len = text_tokens(prompt), text_tokens(completion)
        if prompt_len < _MIN_LEN or output_len < _MIN_LEN or prompt_len > _MAX_PROMPT_LEN or prompt_len + output_len > _MAX_TOTAL_LEN:
            continue
        lines.append(_line(f"sharegpt-{number}", prompt, {"max_tokens": output_len}, input_tokens=prompt_len,
                           output_tokens=output_len, **{LATER_TURNS: _later_turns(turns)}))
    if not lines:
        raise PromptSetError(f"PROMPTS=sharegpt:{path}: no conversation passes the length filter")
    return lines


def _later_turns(turns: list[dict[str, Any]]) -> list[list[Any]]:
    """A conversation's later human turns, in order, each with its answer's length as its max_tokens (as the first
    turn's): [[text, tokens], ...]; TURNS sends them."""
    return [[turns[i]["value"], max(1, text_tokens(turns[i + 1]["value"]))] for i in range(2, len(turns) - 1, 2)]


def _random_text(rng: random.Random, input_len: int) -> str:
    """Text of random tokens that re-encodes to exactly ``input_len`` tokens."""
    encoding = harmony_encoding()
    ids = [rng.randrange(_ORDINARY_VOCAB) for _ in range(input_len)]
    for _ in range(20):
        text = encoding.decode(ids)
        actual = encoding.encode_ordinary(text)
        if len(actual) == input_len:
            return text
        # Decoding can merge or split tokens; trim or extend and try again.
        ids = actual[:input_len] if len(actual) > input_len else actual + [rng.randrange(_ORDINARY_VOCAB) for _ in range(input_len - len(actual))]
    raise PromptSetError(f"could not make a random prompt of exactly {input_len} tokens")


def random_prompts(input_len: int, output_len: int, count: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` random prompts of ``input_len`` tokens, each forced to ``output_len`` output tokens."""
    if input_len < 1 or output_len < 1 or count < 1:
        raise PromptSetError(f"PROMPTS=random:{input_len}:{output_len}:{count}: lengths and count must be positive")
    rng = random.Random(seed)
    request = {"max_tokens": output_len, "ignore_eos": True}
    return [_line(f"random-{i}", _random_text(rng, input_len), request, input_tokens=input_len, output_tokens=output_len)
            for i in range(count)]
