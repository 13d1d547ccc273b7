"""vLLM's automatic prefix caching, by blocks: which leading part of a prompt the KV cache already holds.

vLLM hashes a prompt's full blocks (``block_size`` tokens: the profile's engine.block_size, else vLLM's default
16), each hash chained from the one before, so a block matches only when everything before it matches too
(tokens.py makes the hashes). A request's cached tokens are the longest run of leading blocks the cache holds, at
most its length less one (the last token is always computed, for its logits). Running requests hold their blocks (a block two requests share is counted once toward KV
use); when the last holder ends, the block stays cached on a free list, least recently used first, and is evicted
only when new tokens need its space. Free cached blocks are free space, as in vLLM's kv_cache_usage_perc.

The counters are vLLM's prefix_cache_queries and hits: a request's prompt tokens and its cached tokens, counted at
its first admission (a preempted request's second lookup is not, as vLLM's stats leave it out). Work is per request
and per block at admission and release, never per token.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Sequence

__all__ = ["PrefixCache"]


class PrefixCache:
    """Cached blocks by hash: held by running requests (reference counts) or free (LRU, evictable)."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.queries = 0
        """Prompt tokens looked up (vllm:prefix_cache_queries_total)."""
        self.hits = 0
        """Of them, tokens found cached (vllm:prefix_cache_hits_total)."""
        self._holders: dict[int, int] = {}  # block hash -> running requests holding it
        self._free: OrderedDict[int, None] = OrderedDict()  # cached blocks nobody holds, least recently used first
        self._held: dict[Hashable, list[int]] = {}  # request -> the blocks it holds

    def match(self, blocks: Sequence[int], tokens: int) -> tuple[int, int]:
        """(leading blocks cached, how many of them are free) for a request of ``tokens`` tokens whose full blocks
        hash to ``blocks``."""
        limit = min(len(blocks), (tokens - 1) // self.block_size)
        holders, free = self._holders, self._free
        found = revived = 0
        while found < limit:
            block = blocks[found]
            if block in free:
                revived += 1
            elif block not in holders:
                break
            found += 1
        return found, revived

    def count(self, prompt_tokens: int, cached_tokens: int) -> None:
        """A request's first lookup, for the counters."""
        self.queries += prompt_tokens
        self.hits += cached_tokens

    def hold(self, owner: Hashable, blocks: Sequence[int]) -> None:
        """``owner`` takes cached ``blocks`` (what ``match`` found): free ones leave the free list."""
        held = self._held.setdefault(owner, [])
        holders, free = self._holders, self._free
        for block in blocks:
            if block in free:
                del free[block]
                holders[block] = 1
            else:
                holders[block] += 1
            held.append(block)

    def add(self, owner: Hashable, blocks: Sequence[int]) -> None:
        """``owner`` computed ``blocks``: each not cached yet becomes cached, held by it (one cached meanwhile by
        another request stays that one's, and ``owner``'s copy its own, as vLLM keeps the first)."""
        held = self._held.setdefault(owner, [])
        holders, free = self._holders, self._free
        for block in blocks:
            if block not in holders and block not in free:
                holders[block] = 1
                held.append(block)

    def release(self, owner: Hashable) -> int:
        """``owner`` ends or is preempted: blocks nobody else holds go to the free list, its last block nearest the
        front (vLLM frees in reverse, so a prompt's tail is evicted before its head). Returns the tokens of its
        blocks that other requests still hold."""
        held = self._held.pop(owner, None)
        if not held:
            return 0
        holders, free = self._holders, self._free
        shared = 0
        for block in reversed(held):
            left = holders[block] - 1
            if left:
                holders[block] = left
                shared += 1
            else:
                del holders[block]
                free[block] = None
        return shared * self.block_size

    def evict(self, room_tokens: int) -> None:
        """Drop the least recently used free blocks until the rest fit in ``room_tokens`` of KV space."""
        keep = max(0, room_tokens) // self.block_size
        free = self._free
        while len(free) > keep:
            free.popitem(last=False)

    def reset(self) -> bool:
        """Forget every cached block nobody holds, as vLLM's reset_prefix_cache: refused (False, nothing forgotten)
        while running requests hold blocks."""
        if self._held:
            return False
        self._free.clear()
        return True
