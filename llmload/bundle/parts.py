"""A bundle's files: the wheels in one tar (fixed order and times: the same wheels give the same bytes), cut into
parts of PART_MB MiB, each part's and the whole's sha256, and manifest.json, written last (a folder holding it
holds a whole bundle).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from llmload.system.files import write_atomic

__all__ = ["SCHEMA_VERSION", "MANIFEST", "WHOLE", "Piece", "sha256_of", "write_tar", "split_file", "join_parts",
           "write_manifest"]

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
WHOLE = "wheels.tar"
"""The name of the joined parts (install.py writes it beside the bundle, then removes it)."""
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Piece:
    """A file of the bundle: a part, or the whole the parts join into."""

    file: str
    bytes: int
    sha256: str


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_tar(wheels: Iterable[Path], path: Path) -> Piece:
    """The wheels under ``wheels/`` in one uncompressed tar (wheels are compressed already), sorted, times at 0."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for wheel in sorted(wheels, key=lambda p: p.name):
            info = tar.gettarinfo(str(wheel), arcname=f"wheels/{wheel.name}")
            info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
            with wheel.open("rb") as f:
                tar.addfile(info, f)
    return Piece(path.name, path.stat().st_size, sha256_of(path))


def split_file(path: Path, part_bytes: int, folder: Path) -> list[Piece]:
    """``path`` cut into ``<name>.part000``, ``.part001``, ... in ``folder``: each ``part_bytes`` long, the last the rest."""
    if part_bytes < 1:
        raise ValueError(f"part_bytes={part_bytes}: a part holds at least one byte")
    folder.mkdir(parents=True, exist_ok=True)
    pieces: list[Piece] = []
    with path.open("rb") as whole:
        while True:
            name = f"{path.name}.part{len(pieces):03d}"
            digest, size = hashlib.sha256(), 0
            with (folder / name).open("wb") as out:
                while size < part_bytes and (chunk := whole.read(min(_CHUNK, part_bytes - size))):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            if size == 0 and pieces:
                (folder / name).unlink()
                return pieces
            pieces.append(Piece(name, size, digest.hexdigest()))
            if size < part_bytes:
                return pieces


def join_parts(folder: Path, pieces: Sequence[Piece], path: Path) -> Piece:
    """The parts joined into ``path`` (what install.py does on the host), with the whole's size and sha256."""
    digest, size = hashlib.sha256(), 0
    with path.open("wb") as out:
        for piece in pieces:
            with (folder / piece.file).open("rb") as f:
                while chunk := f.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
    return Piece(path.name, size, digest.hexdigest())


def write_manifest(folder: Path, manifest: dict[str, Any]) -> Path:
    """manifest.json, with ``schema_version`` first; Pieces become objects."""
    def plain(value: Any) -> Any:
        if isinstance(value, Piece):
            return asdict(value)
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    text = json.dumps({"schema_version": SCHEMA_VERSION, **plain(manifest)}, indent=1) + "\n"
    return write_atomic(folder / MANIFEST, text)
