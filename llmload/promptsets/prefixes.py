"""PREFIX_TOKENS and PREFIX_GROUPS: the same system message of exactly N tokens before every prompt, from G
distinct ones (like vLLM bench's prefix repetition and SGLang's generated shared prefix).

Prompt i of a set gets prefix i mod G, so with ORDER=sequence request n gets prefix n mod G. Each prefix is N
random one-token words (wordtokens.py), seeded by SEED and the group: groups share nothing beyond the
server's own header. vLLM renders a system message as developer instructions (tokens.py), so the server sees
N tokens of text and a few of frame more; each prompt's ``prompt_tokens`` counts them.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Sequence

from llmload.promptsets.catalog import Prompt
from llmload.promptsets.tokens import message_tokens
from llmload.promptsets.wordtokens import word_text

__all__ = ["PREFIX_GROUP", "shared_prefixes", "with_shared_prefixes"]

PREFIX_GROUP = "prefix_group"
"""The meta key of the shared prefix a prompt starts with: its group, 0 to G-1."""


def shared_prefixes(tokens: int, groups: int, seed: int) -> tuple[str, ...]:
    """``groups`` distinct texts of exactly ``tokens`` o200k tokens each."""
    return tuple(word_text(random.Random(f"prefix:{seed}:{group}"), tokens) for group in range(groups))


def with_shared_prefixes(prompts: Sequence[Prompt], tokens: int, groups: int, seed: int) -> tuple[Prompt, ...]:
    """The prompts, prompt i led by system message i mod ``groups``; a known ``prompt_tokens`` grows by that message."""
    messages = [{"role": "system", "content": text} for text in shared_prefixes(tokens, groups, seed)]
    sizes = [message_tokens(m) for m in messages]
    prefixed = []
    for i, prompt in enumerate(prompts):
        group = i % groups
        meta = {**prompt.meta, PREFIX_GROUP: group}
        if isinstance(meta.get("prompt_tokens"), int):
            meta["prompt_tokens"] += sizes[group]  # messages are counted apart: special tokens part them
        prefixed.append(replace(prompt, messages=[messages[group], *prompt.messages], meta=meta))
    return tuple(prefixed)
