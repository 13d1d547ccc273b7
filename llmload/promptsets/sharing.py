"""What a prompt set declares shareable in a server's prefix cache: per prompt, the tokens its first turn shares with
another prompt of the set (the server's chat frame, a shared prefix, a template's instructions, a trace's shared
blocks), so a run can tell a hit rate its workload explains from one an earlier run's cached prompts gave it.

The count is an upper bound: the longest prefix a prompt shares with any other prompt of the set, as if that other one
had been sent first, plus the chat frame every request shares. Prompts are compared as the text the server renders
(each message's role and content in order); a shared prefix's characters are turned into tokens at the prompt's own
ratio (its recorded token count over its length), else counted.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from llmload.promptsets.catalog import Prompt
from llmload.promptsets.tokens import prompt_tokens, text_tokens

__all__ = ["FRAME_ALLOWANCE_TOKENS", "frame_tokens", "shared_tokens", "common_prefix_chars"]

FRAME_ALLOWANCE_TOKENS = 32
"""Beyond gpt-oss's own frame (its system message and headers): another model's chat template, and vLLM's caching in
whole blocks (16 tokens), may share a few more."""


@lru_cache(maxsize=1)
def frame_tokens() -> int:
    """Tokens every request shares whatever its prompt: the chat frame of an empty conversation, and the allowance."""
    return prompt_tokens([{"role": "system", "content": ""}, {"role": "user", "content": ""}]) + FRAME_ALLOWANCE_TOKENS


_MARKER = re.compile("\x00[^\x00]*\x00")


def _rendered(prompt: Prompt) -> str:
    return "".join(f"\x00{m.get('role')}\x00{m.get('content')}" for m in prompt.messages)


def common_prefix_chars(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share (bisection over slices: C-speed comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def shared_tokens(prompts: Sequence[Prompt]) -> dict[str, int]:
    """Per prompt id, the tokens of its first turn the set declares shareable (see the module's docstring)."""
    # Sorted, a text's longest common prefix with any other is with a neighbour.
    texts = sorted((_rendered(p), i) for i, p in enumerate(prompts))
    keys = [text for text, _ in texts]
    frame = frame_tokens()
    shared: dict[str, int] = {}
    for position, (text, index) in enumerate(texts):
        prompt = prompts[index]
        longest = max((common_prefix_chars(text, keys[j]) for j in (position - 1, position + 1) if 0 <= j < len(keys)),
                      default=0)
        content = _MARKER.sub("", text[:longest])  # the roles are the frame's, counted in it
        known = prompt.meta.get("prompt_tokens")
        tokens = round(len(content) * known / len(text)) if isinstance(known, int) and text else text_tokens(content)
        shared[prompt.id] = max(shared.get(prompt.id, 0), tokens + frame)
    return shared

