"""Writing a file whole or not at all: a reader (or a crash) never sees half of it."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Sequence

__all__ = ["write_atomic", "write_csv_atomic"]


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


def write_csv_atomic(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """``rows`` as a CSV table, written whole: one column per key, in the order the rows first name them."""
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return write_atomic(path, table.getvalue())
