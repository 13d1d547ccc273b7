"""JSON-lines files as the suite writes them: appended a line at a time, maybe cut short by a kill."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import orjson

__all__ = ["iter_json_lines"]


def iter_json_lines(path: Path) -> Iterator[Any]:
    """Each complete line's JSON value; a torn last line (a killed writer) is skipped."""
    with Path(path).open("rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                return
            yield orjson.loads(line)
