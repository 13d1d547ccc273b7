"""What each request of a run sends: the next prompt (ORDER, CACHE), the conversation it opens (TURNS, the nonce, its
tool rounds) and its effort (EFFORT's draw), over the run's workload (workload.py). One per process; with workers,
each draws its own share (worker p of n takes positions p, p + n, ...; conversation ids stay unique).

CACHE=cold draws without repeating: the set's fresh order (ORDER=random: a shuffle seeded by SEED; sequence: the
set's own) from PROMPT_START on; a run that uses up the set sends a prompt again only with a nonce in front, so the
server shares no more of it than its frame (each such request is marked ``prompt_reused``). CACHE=warm repeats on
purpose: ORDER=random draws a random prompt per request, sequence walks the set round and round."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from llmload.loadtest.plan import Plan
from llmload.loadtest.efforts import EffortDraw
from llmload.loadtest.turns import TurnPlan
from llmload.loadtest.workload import Workload
from llmload.promptsets.catalog import Prompt
from llmload.promptsets.conversation import Conversation
from llmload.promptsets.followups import later_turns
from llmload.promptsets.sharing import frame_tokens

__all__ = ["ConversationDraw"]


@dataclass
class ConversationDraw:
    """The run's prompts, in its order, each opening a conversation of its drawn turns and effort."""

    workload: Workload
    plan: Plan
    turn_plan: TurnPlan
    efforts: EffortDraw
    in_sequence: bool
    """ORDER=sequence: the set's order, shared by every user (else a random prompt per request)."""
    nonce: bool
    tool_rounds: int
    """Each task's most rounds (TOOL_ROUNDS; 1 without TOOLS)."""
    cold: bool = True
    """CACHE=cold: no prompt is sent twice as it is."""
    seed: int = 0
    prefix_tokens: int = 0
    """PREFIX_TOKENS: the share a prompt keeps when a nonce follows its prefix."""
    _next_prompt: int = field(default=0, init=False)
    _conversations_started: int = field(default=0, init=False)
    _sent: set[str] = field(default_factory=set, init=False)
    _order: list[int] | None = field(default=None, init=False)

    @property
    def prompts(self) -> tuple[Prompt, ...]:
        return self.workload.prompts

    def next_prompt(self, rng: random.Random) -> tuple[Prompt, bool]:
        """The next prompt and whether this process sent it before: CACHE=cold, the fresh order's next; warm, a random
        prompt or with ORDER=sequence the set's next one (shared by all users)."""
        if self.cold or self.in_sequence:
            position = self.workload.first_fresh + self._next_prompt * self.plan.workers + self.plan.position
            self._next_prompt += 1
            prompt = self.prompts[self._fresh_order()[position % len(self.prompts)]]
        else:
            prompt = rng.choice(self.prompts)
        reused = prompt.id in self._sent
        self._sent.add(prompt.id)
        return prompt, reused

    def _fresh_order(self) -> list[int]:
        if self._order is None:
            self._order = list(range(len(self.prompts)))
            if self.cold and not self.in_sequence:
                random.Random(self.seed).shuffle(self._order)
        return self._order

    def new_conversation(self, rng: random.Random, warmup: bool = False, prompt: Prompt | None = None) -> tuple[Conversation, str]:
        """The next conversation a user (or the open-loop dispatcher) starts, and its effort (one for all its turns: the
        effort is in the server's header, so a change would cost every later turn its prefix cache).

        Its turns are drawn from TURNS; a warm-up is one turn of one round, so no conversation crosses into the
        measured requests. ``prompt``: its first turn's (a trace's row), else drawn as ORDER says.
        """
        reused = False
        if prompt is None:
            prompt, reused = self.next_prompt(rng)
        turns = 1 if warmup else self.turn_plan.turns(rng)
        followups = later_turns(prompt, turns, self.workload.followups, rng) if turns > 1 else []
        fresh_again = reused and self.cold  # a prompt sent before gets a nonce: the server has only its frame
        nonce = f"{rng.randrange(10**12):012d}" if self.nonce or fresh_again else None
        shared = self.workload.shared_tokens.get(prompt.id, 0)
        if nonce is not None:
            shared = min(shared, frame_tokens() + self.prefix_tokens)
        number = self._conversations_started * self.plan.workers + self.plan.position  # unique over the workers
        self._conversations_started += 1
        rounds = 1 if warmup else self.tool_rounds
        return (Conversation.start(str(number), prompt, followups, nonce, rounds, shared, reused), self.efforts.next())
