"""The user messages of a conversation's later turns: the follow-up set, or a ShareGPT conversation's own.

The follow-up set is rendered from ``templates/<task>/followup.LANG.j2``, grown from the task's own units like
the prompts (generate.py), a few hundred tokens each and counted exactly; it is built once, before the run,
so no template is rendered while requests are in flight. A prompt gets follow-ups of its own task and language
(``support_reply.ja`` for the Japanese support set; the built-in set names ``support_reply`` or
``support_reply_ja``); a prompt of no known task (random:IN:OUT, a file of other prompts) gets English ones of
any task. A ShareGPT prompt's later turns are the dataset's own human turns, in order (``LATER_TURNS``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmload.promptsets.catalog import Prompt
from llmload.promptsets.generate import generate_prompt, load_templates
from llmload.promptsets.tokens import prompt_tokens
from llmload.promptsets.workloads import LATER_TURNS

__all__ = ["FOLLOWUP_TOKENS", "FollowUp", "followup_set", "later_turns"]

FOLLOWUP_TOKENS = (200, 300, 400)
"""The follow-ups' lengths in tokens of text, in turn."""
PER_TEMPLATE = 12
_TOLERANCE = 0.1  # a follow-up needs an exact count, not an exact length
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@dataclass(frozen=True)
class FollowUp:
    """A later turn's user message and the body fields it sets itself (a ShareGPT turn's max_tokens)."""

    text: str
    request: dict[str, Any]
    tokens: int | None = None
    """The text's o200k tokens (the message's frame not included); None where not counted (ShareGPT's turns)."""


@lru_cache(maxsize=2)
def followup_set(seed: int, root: Path = TEMPLATES) -> dict[str, tuple[FollowUp, ...]]:
    """The follow-up set: per template name (``support_reply.en``), PER_TEMPLATE follow-ups; depends only on the seed."""
    frame = prompt_tokens([{"role": "user", "content": ""}])
    out = {}
    for template in load_templates(root, "followup"):
        made = []
        for k in range(PER_TEMPLATE):
            target = FOLLOWUP_TOKENS[k % len(FOLLOWUP_TOKENS)]
            rng = random.Random(f"{seed}:followup:{template.name}:{k}")
            messages, tokens = generate_prompt(template, target + frame, rng, tolerance=_TOLERANCE)
            made.append(FollowUp(messages[0]["content"], {}, tokens - frame))
        out[template.name] = tuple(made)
    return out


def _template_name(prompt: Prompt) -> str | None:
    """The follow-up template of a prompt's task and language: ``support_reply.en`` for the generated sets'
    ``support_reply.en``, the built-in set's ``support_reply`` and ``support_reply_ja`` -> ``.ja``."""
    name = prompt.meta.get("template")
    if not isinstance(name, str):
        return None
    if "." in name:
        return name
    task, _, lang = name.rpartition("_")
    return f"{task}.{lang}" if len(lang) == 2 and task else f"{name}.en"


def later_turns(prompt: Prompt, turns: int, followups: dict[str, tuple[FollowUp, ...]], rng: random.Random) -> list[FollowUp]:
    """The user messages of a conversation's turns 2 to ``turns`` on ``prompt``; fewer when its own run out (ShareGPT)."""
    own = prompt.meta.get(LATER_TURNS)
    if isinstance(own, list):
        return [FollowUp(text, {"max_tokens": out}) for text, out in own[:turns - 1]]
    pool = followups.get(_template_name(prompt) or "")
    if pool is None:
        pool = tuple(f for name, made in sorted(followups.items()) if name.endswith(".en") for f in made)
    return [rng.choice(pool) for _ in range(turns - 1)]
