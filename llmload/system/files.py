"""Writing a file whole or not at all: a reader (or a crash) never sees half of it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` through ``path.partial``, synced, then renamed over ``path``."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    partial.replace(path)
    return path
