"""Text of an exact number of o200k tokens, cheap to build and never re-counted: words that are one token each.

Each word is an o200k token made of a space and 2-12 lowercase ASCII letters. o200k's pre-tokenizer starts a new
piece at every space before letters and BPE never merges across pieces, so a text of n such words is exactly n
tokens, texts of words joined are as many tokens as their words, and so is any leading run of a text's words.
The shared prefixes (PREFIX_TOKENS) and a trace's prompts (TRACE) are built of them, like vLLM bench's random
prefixes and SGLang's generated ones.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from llmload.promptsets.tokens import harmony_encoding

__all__ = ["word_tokens", "word_text"]

_WORD = re.compile(rb" [a-z]{2,12}")


@lru_cache(maxsize=1)
def word_tokens() -> tuple[str, ...]:
    """Every o200k token that is a space and 2-12 lowercase letters and encodes back to itself, in rank order."""
    encoding = harmony_encoding()
    words = []
    for value in encoding.token_byte_values():
        if _WORD.fullmatch(value):
            text = value.decode("ascii")
            if len(encoding.encode_ordinary(text)) == 1:
                words.append((encoding.encode_single_token(value), text))
    return tuple(text for _, text in sorted(words))


def word_text(rng: random.Random, count: int) -> str:
    """``count`` words drawn by ``rng``: a text of exactly ``count`` o200k tokens (it starts with a space)."""
    return "".join(rng.choices(word_tokens(), k=count))
