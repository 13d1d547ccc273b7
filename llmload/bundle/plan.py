"""What a bundle is for, as pure functions: PLATFORM's grammar and the tags pip is given, PYTHON, EXTRA's
requirements, FREEZE's host packages, and which resolved wheels the host already has.

PLATFORM's grammar (pip's platform tags; a newer tag implies the older ones pip is also given):
    manylinux_2_Y_<arch>    glibc 2.Y or newer: also manylinux_2_Y-1 ... (down to 2_17, or 2_5 on x86_64 and
                            i686) and the legacy manylinux2014 (2_17), manylinux2010 (2_12), manylinux1 (2_5)
    manylinux2014_<arch>, manylinux2010_<arch>, manylinux1_<arch>   the same as manylinux_2_17, 2_12, 2_5
    musllinux_1_Y_<arch>    musl 1.Y or newer: also musllinux_1_Y-1 ... 1_1
    linux_<arch>            this exact (not portable) tag
    macosx_X_Y_<arch>       macOS X.Y or newer (arch x86_64, arm64 or universal2): also older macOS versions and universal2
    win_amd64, win_arm64, win32
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from llmload.errors import ConfigError

from .check import InvalidRequirement, InvalidVersion, Version, canonicalize_name, requirement

__all__ = ["LINUX_ARCHES", "Platform", "parse_platform", "split_extra", "read_freeze", "parse_freeze", "split_host",
           "default_out", "extra_names"]

LINUX_ARCHES = ("x86_64", "aarch64", "i686", "ppc64le", "s390x", "armv7l")
MAC_ARCHES = ("x86_64", "arm64", "universal2")
_LEGACY = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
_GRAMMAR = ("manylinux_2_Y_<arch>, manylinux2014_<arch>, musllinux_1_Y_<arch>, linux_<arch> (arch: "
            f"{', '.join(LINUX_ARCHES)}), macosx_X_Y_<{'|'.join(MAC_ARCHES)}>, win_amd64, win_arm64 or win32")


@dataclass(frozen=True)
class Platform:
    """The host a bundle is for: its platform tag, the tags pip is given, and its Python."""

    tag: str
    pip_platforms: tuple[str, ...]
    """The tag and every older one it implies, newest first (pip's --platform, one each)."""
    python: str
    """MAJOR.MINOR, or MAJOR.MINOR.PATCH as given."""
    os: str
    """linux, darwin or win32: sys.platform there."""
    machine: str
    """platform.machine() there (x86_64, aarch64, arm64, AMD64, ...)."""

    @property
    def python_minor(self) -> str:
        return ".".join(self.python.split(".")[:2])

    @property
    def abi(self) -> str:
        return "cp" + self.python_minor.replace(".", "")

    @property
    def markers(self) -> dict[str, str]:
        """The marker environment of the host's Python (PEP 508), for deciding which requirements apply there."""
        full = self.python if self.python.count(".") == 2 else f"{self.python}.0"
        system = {"linux": "Linux", "darwin": "Darwin", "win32": "Windows"}[self.os]
        return {"python_version": self.python_minor, "python_full_version": full, "implementation_name": "cpython",
                "implementation_version": full, "platform_python_implementation": "CPython", "sys_platform": self.os,
                "platform_system": system, "os_name": "nt" if self.os == "win32" else "posix",
                "platform_machine": self.machine, "platform_release": "", "platform_version": ""}


def _manylinux(glibc_minor: int, arch: str) -> tuple[str, ...]:
    oldest = 5 if arch in ("x86_64", "i686") else 17
    tags = [f"manylinux_2_{y}_{arch}" for y in range(glibc_minor, oldest - 1, -1)]
    tags += [f"{legacy}_{arch}" for legacy, y in _LEGACY.items() if glibc_minor >= y and (y >= 17 or arch in ("x86_64", "i686"))]
    return tuple(tags)


def _mac(major: int, minor: int, arch: str) -> tuple[str, ...]:
    versions = [(major, minor)] + [(m, 0) for m in range(major - 1, 10, -1)]
    if major == 10 or arch != "arm64":
        versions += [(10, m) for m in range(minor - 1 if major == 10 else 16, 8, -1)]
    arches = (arch,) if arch == "universal2" else (arch, "universal2")
    return tuple(f"macosx_{ma}_{mi}_{a}" for ma, mi in versions for a in arches)


def _pip_platforms(tag: str) -> tuple[tuple[str, ...], str, str] | None:
    """(the tags pip is given, sys.platform, machine) for a tag of the grammar, else None."""
    arches = "|".join(LINUX_ARCHES)
    if m := re.fullmatch(rf"manylinux_2_(\d+)_({arches})", tag):
        glibc, arch = int(m.group(1)), m.group(2)
        return (_manylinux(glibc, arch), "linux", arch) if glibc >= (5 if arch in ("x86_64", "i686") else 17) else None
    if m := re.fullmatch(rf"(manylinux2014|manylinux2010|manylinux1)_({arches})", tag):
        glibc, arch = _LEGACY[m.group(1)], m.group(2)
        return (_manylinux(glibc, arch), "linux", arch) if glibc >= 17 or arch in ("x86_64", "i686") else None
    if m := re.fullmatch(rf"musllinux_1_(\d+)_({arches})", tag):
        return tuple(f"musllinux_1_{y}_{m.group(2)}" for y in range(int(m.group(1)), 0, -1)), "linux", m.group(2)
    if m := re.fullmatch(rf"linux_({arches})", tag):
        return (tag,), "linux", m.group(1)
    if m := re.fullmatch(rf"macosx_(\d+)_(\d+)_({'|'.join(MAC_ARCHES)})", tag):
        major, minor, arch = int(m.group(1)), int(m.group(2)), m.group(3)
        if major < 10 or (arch == "arm64" and major < 11):
            return None
        return _mac(major, minor, arch), "darwin", "arm64" if arch == "universal2" else arch
    machine = {"win_amd64": "AMD64", "win_arm64": "ARM64", "win32": "x86"}.get(tag)
    return ((tag,), "win32", machine) if machine else None


def parse_platform(tag: str, python: str) -> Platform:
    """PLATFORM and PYTHON checked (ConfigError naming the setting) and expanded for pip."""
    found = _pip_platforms(tag.strip())
    if found is None:
        raise ConfigError(f"PLATFORM={tag!r} is not a platform tag of the grammar: give {_GRAMMAR}, "
                          "e.g. PLATFORM=manylinux_2_28_x86_64 (a host's glibc: ldd --version)")
    if not re.fullmatch(r"3\.(\d+)(\.\d+)?", python.strip()) or int(python.split(".")[1]) < 8:
        raise ConfigError(f"PYTHON={python!r} is not a Python version of 3.8 or later: give MAJOR.MINOR[.PATCH] of the "
                          "host's python3 (python3 --version), e.g. PYTHON=3.12")
    pip_platforms, os_name, machine = found
    return Platform(tag.strip(), pip_platforms, python.strip(), os_name, machine)


def split_extra(text: str) -> list[str]:
    """EXTRA's requirement specs: separated by spaces or commas (a comma inside one spec's versions stays)."""
    specs: list[str] = []
    for word in text.split():
        for piece in word.split(","):
            if not piece:
                continue
            if specs and not re.match(r"[A-Za-z0-9]", piece):
                specs[-1] += "," + piece  # numpy>=2,<2.5: the comma continues the spec before it
            else:
                specs.append(piece)
    for spec in specs:
        try:
            req = requirement(spec)
        except InvalidRequirement:
            req = None
        if req is None or req.url or req.marker:
            raise ConfigError(f"EXTRA: {spec!r} is not a requirement spec: give name[==version], space- or "
                              "comma-separated, e.g. EXTRA='vllm==0.25.0 pycountry'")
    return specs


def parse_freeze(text: str, source: str = "FREEZE") -> dict[str, str | None]:
    """The host's packages from `pip freeze` lines: canonical name to version (None: a bare name, any version).

    ``name==version`` or a bare name per line; ``name @ url`` counts as a bare name; comments, blanks and option
    lines (``-e``, ``--index-url``) are ignored.
    """
    host: dict[str, str | None] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:(?:===?)\s*([^\s;]+)|@\s*\S+)?", line)
        if not m:
            raise ConfigError(f"{source} line {number}: {raw.strip()!r} is neither name==version nor a bare name "
                              "(the lines `pip freeze` writes); fix the line or leave it out")
        host[canonicalize_name(m.group(1))] = m.group(2)
    return host


def read_freeze(path: str) -> dict[str, str | None]:
    """FREEZE's file read (empty path: the host has nothing the bundle needs)."""
    if not path:
        return {}
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"FREEZE={path}: no such file; give the host's `python3 -m pip freeze > host-freeze.txt`")
    return parse_freeze(file.read_text(encoding="utf-8", errors="replace"), f"FREEZE={path}")


def split_host(resolved: Mapping[str, str], host: Mapping[str, str | None],
               asked: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(bundled, left out) canonical names: the host's own version, or any version of a bare name, is left out.

    A version the host has but that differs (an EXTRA pin over FREEZE's) is bundled, in front of the host's; so is a
    bare name that EXTRA asks for (``asked``), whose version on the host is not known to meet EXTRA's spec.
    """
    bundled, left_out = [], []
    for name in sorted(resolved):
        kept = name in host and _same(host[name], resolved[name], name in asked)
        (left_out if kept else bundled).append(name)
    return bundled, left_out


def _same(have: str | None, resolved: str, asked: bool) -> bool:
    if have is None:
        return not asked
    try:
        return Version(have) == Version(resolved)
    except InvalidVersion:
        return have == resolved


def default_out(platform: Platform) -> Path:
    """OUT's default: results/bundle-<platform>-py<python>."""
    return Path("results") / f"bundle-{platform.tag}-py{platform.python_minor}"


def extra_names(specs: Sequence[str]) -> list[str]:
    """The canonical names EXTRA's specs ask for, in order."""
    return [canonicalize_name(requirement(s).name) for s in specs]
