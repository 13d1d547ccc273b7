"""Requests the server refused or broke, said first: how many, and its most frequent messages as it wrote them.

A failure whose category is the server's (an HTTP status, an error in the stream, a connection it closed) is the
server's doing, not the load generator's: a run the server failed is judged by that, and the generator's self-check
does not blame itself for it (summary.py). Messages are grouped by their text with request ids and numbers replaced
(as Locust's failures table groups them), each quoted by its first example's first 200 characters. Pure.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from llmload.results.records import RequestRecord

__all__ = ["ServerMessage", "ServerFailures", "server_failures", "normalised_detail", "is_server_fault",
           "SERVER_FAILED_SHARE", "QUOTE_CHARS", "MESSAGES_SHOWN"]

QUOTE_CHARS = 200
MESSAGES_SHOWN = 3
SERVER_FAILED_SHARE = 0.5
"""When at least this share of a run's measured requests failed by the server's doing, the server failed the run."""
_GROUPING_LIMIT = 160
_ID = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{6,}")
"""Request ids, hashes, uuids: a word of six or more characters with both letters and digits."""
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def normalised_detail(detail: str | None) -> str:
    """A failure's detail with request ids and numbers replaced: the text failures are grouped by."""
    return _NUMBER.sub("N", _ID.sub("<id>", detail or ""))[:_GROUPING_LIMIT]


def is_server_fault(error: str | None) -> bool:
    """A failure the server answered or caused: an HTTP status, an error in the stream, a connection it closed."""
    return error is not None and (error.startswith("http_") or error in ("stream_error", "disconnected"))


@dataclass(frozen=True)
class ServerMessage:
    category: str
    message: str
    """Its first example's first QUOTE_CHARS characters, as the server wrote it."""
    count: int


@dataclass(frozen=True)
class ServerFailures:
    """The measured requests the server refused or broke."""

    requests: int
    """Measured requests in all (interrupted ones left out)."""
    failed_by_server: int
    by_category: dict[str, int]
    messages: list[ServerMessage]
    """The most frequent messages, most frequent first (at most MESSAGES_SHOWN)."""

    @property
    def server_failed_the_run(self) -> bool:
        return bool(self.requests) and self.failed_by_server >= SERVER_FAILED_SHARE * self.requests


def server_failures(records: Sequence[RequestRecord]) -> ServerFailures | None:
    """What the server failed of ``records`` (measured ones); None when it failed none."""
    judged = [r for r in records if r.error != "interrupted"]
    failed = [r for r in judged if is_server_fault(r.error)]
    if not failed:
        return None
    groups: Counter[tuple[str, str]] = Counter((r.error or "", normalised_detail(r.error_detail)) for r in failed)
    first: dict[tuple[str, str], str] = {}
    for r in failed:
        first.setdefault((r.error or "", normalised_detail(r.error_detail)), r.error_detail or "(no message)")
    messages = [ServerMessage(category, first[(category, text)][:QUOTE_CHARS], n)
                for (category, text), n in groups.most_common(MESSAGES_SHOWN)]
    return ServerFailures(len(judged), len(failed), dict(Counter(r.error or "" for r in failed)), messages)
