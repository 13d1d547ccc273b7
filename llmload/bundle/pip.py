"""The pip calls a bundle makes, for the host's platform and Python rather than this one's: the suite's wheel, the
resolution (``pip install --dry-run --report``: metadata, no install), one package's metadata, the downloads; and
pip's failures read into one line each.

pip evaluates environment markers for the Python it runs on, not for ``--python-version``: command.py walks the
resolution again with the host's markers and asks pip for what that walk finds missing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from llmload.errors import ConfigError

from .check import canonicalize_name
from .plan import Platform

__all__ = ["Resolved", "Demand", "Conflict", "NoWheel", "ResolveFailed", "parse_failure", "target_args", "resolve",
           "metadata", "download", "build_suite_wheel", "write_stub", "pip_command", "OVERRIDE_LABEL"]

OVERRIDE_LABEL = "llmload.override"
"""The local version label of a stand-in wheel: its metadata leaves out the requirements an EXTRA requirement wins."""
_HERE = (sys.executable, "-m", "pip", "--disable-pip-version-check")
_NEWER = (24, 2)
"""pip before 24.2 checks Requires-Python in ``pip install --dry-run`` against the Python it runs on, not --python-version."""


@dataclass(frozen=True)
class Resolved:
    """One distribution of pip's resolution."""

    name: str
    version: str
    requires: tuple[str, ...]
    provides_extra: tuple[str, ...]
    url: str
    sha256: str | None

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)


@dataclass(frozen=True)
class Demand:
    """Who asks what of a name in a conflict: a package (``vllm 0.25.0``), EXTRA or FREEZE (the host's pin)."""

    who: str
    requirement: str


@dataclass(frozen=True)
class Conflict:
    """Requirements on one name that no version meets together."""

    name: str
    demands: tuple[Demand, ...]

    def line(self, extra: Sequence[str]) -> str:
        said = [f"the host has {d.requirement} (FREEZE)" if d.who == "FREEZE" else
                f"EXTRA asks {d.requirement}" if d.who == "EXTRA" else f"{d.who} requires {d.requirement}" for d in self.demands]
        example = " ".join([*extra, f"{self.name}==<version>"])
        others = sorted({d.who.split()[0] for d in self.demands if d.who not in ("EXTRA", "FREEZE")})
        return (f"conflict over {self.name}: {', '.join(said)}; to let one side win, pin {self.name} in EXTRA (e.g. "
                f"EXTRA='{example}'){f', or {others[0]} to a version that takes the other side' if others else ''}: an "
                "EXTRA requirement overrides what the others require of its name")


@dataclass(frozen=True)
class NoWheel:
    """A requirement no wheel for the platform meets."""

    requirement: str
    requirer: str
    versions: tuple[str, ...]

    def line(self, platform: Platform) -> str:
        name = re.match(r"[A-Za-z0-9._-]+", self.requirement)
        have = f"those with one stop at {self.versions[-1]}" if self.versions else "it has none at all"
        return (f"no wheel of {self.requirement}{f' (required by {self.requirer})' if self.requirer else ''} for "
                f"PLATFORM={platform.tag} PYTHON={platform.python_minor} ({have}); a newer PLATFORM may have one (the "
                f"host's glibc: ldd --version), or pin a version that has one in EXTRA (e.g. "
                f"{name.group(0) if name else 'name'}=={self.versions[-1] if self.versions else '<version>'}), which overrides the requirement")


class ResolveFailed(Exception):
    """pip's resolver failed: ``conflicts``, ``no_wheel`` or else ``message`` (its last ERROR line)."""

    def __init__(self, conflicts: Sequence[Conflict] = (), no_wheel: NoWheel | None = None, message: str = "") -> None:
        said = "; ".join(f"{c.name}: {', '.join(f'{d.who} asks {d.requirement}' for d in c.demands)}" for c in conflicts)
        super().__init__(message or (f"conflicts over {said}" if conflicts else "") or
                         (f"no wheel of {no_wheel.requirement}" if no_wheel else "pip failed"))
        self.conflicts = tuple(conflicts)
        self.no_wheel = no_wheel
        self.message = message


_NAME = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)")


def _demand(who: str, text: str) -> tuple[str, Demand]:
    text = text.split(";")[0].strip()
    m = _NAME.fullmatch(text)
    name, spec = (m.group(1), m.group(3).replace(" and ", ",").replace(" ", "")) if m else (text, "")
    return canonicalize_name(name), Demand(who, f"{name}{spec}")


def parse_failure(output: str) -> ResolveFailed:
    """pip's output of a failed resolution read: the conflicts it names, a requirement without a wheel, or its error."""
    lines = output.splitlines()
    if "The conflict is caused by:" in lines:
        by_name: dict[str, dict[str, Demand]] = {}
        for line in lines[lines.index("The conflict is caused by:") + 1:]:
            if not line.strip():
                break
            text = line.strip()
            if m := re.fullmatch(r"The user requested \(constraint\) (.+)", text):
                key, demand = _demand("FREEZE", m.group(1))
            elif m := re.fullmatch(r"The user requested (.+)", text):
                key, demand = _demand("EXTRA", m.group(1))
            elif m := re.fullmatch(r"(\S+) (\S+) depends on (.+)", text):
                key, demand = _demand(f"{m.group(1)} {m.group(2)}", m.group(3))
            else:
                continue
            known = by_name.setdefault(key, {}).get(demand.who)
            if known is None or len(demand.requirement) > len(known.requirement):
                by_name[key][demand.who] = demand
        conflicts = []
        for key, demands in by_name.items():
            specific = [d for d in demands.values() if re.search(r"[<>=!~]", d.requirement)]  # not a bare "depends on numpy"
            conflicts.append(Conflict(key, tuple(specific or demands.values())))
        return ResolveFailed(conflicts=conflicts)
    for line in lines:
        m = re.match(r"ERROR: Could not find a version that satisfies the requirement (.+?)(?: \(from ([^()]+)\))?"
                     r" \(from versions: (.*)\)$", line)
        if m:
            versions = tuple(v for v in m.group(3).split(", ") if v and v != "none")
            return ResolveFailed(no_wheel=NoWheel(m.group(1).split(";")[0].strip(), m.group(2) or "", versions))
    errors = [line.removeprefix("ERROR: ") for line in lines if line.startswith("ERROR:")]
    return ResolveFailed(message=errors[-1] if errors else (lines[-1] if lines else "pip failed without a word"))


def target_args(platform: Platform) -> list[str]:
    """pip's options for wheels of the host's platform and Python, binaries only."""
    return ["--only-binary=:all:", *(f"--platform={tag}" for tag in platform.pip_platforms),
            f"--python-version={platform.python_minor}", "--implementation=cp", f"--abi={platform.abi}"]


def _run(pip: Sequence[str], args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*pip, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)


def pip_command(work: Path) -> list[str]:
    """This Python's pip, or where it is older than 24.2 a newer pip's wheel (fetched by this one, not installed), run
    from where it lies: the command line of every later pip call."""
    from importlib.metadata import version

    here = version("pip")
    if tuple(int(n) for n in re.findall(r"\d+", here)[:2]) >= _NEWER:
        return list(_HERE)
    done = _run(_HERE, ["download", "--no-deps", "--quiet", f"--dest={work / 'pip'}", f"pip>={'.'.join(map(str, _NEWER))}"])
    wheels = sorted((work / "pip").glob("pip-*.whl"))
    if done.returncode != 0 or not wheels:
        raise ConfigError(f"pip {here} here checks Requires-Python against this Python, not PYTHON's, and no newer pip "
                          f"could be fetched ({parse_failure(done.stdout).message}): python -m pip install -U pip")
    print(f"bundle: pip {here} here reads Requires-Python for this Python, not PYTHON's: {wheels[-1].name} (fetched, not "
          "installed) resolves instead", flush=True)
    return [sys.executable, str(wheels[-1] / "pip"), "--disable-pip-version-check"]


def _report(path: Path) -> dict[str, Resolved]:
    found = {}
    for item in json.loads(path.read_text())["install"]:
        meta, info = item["metadata"], item.get("download_info", {})
        hashes = info.get("archive_info", {}).get("hashes", {})
        r = Resolved(meta["name"], meta["version"], tuple(meta.get("requires_dist", ())), tuple(meta.get("provides_extra", ())),
                     info.get("url", ""), hashes.get("sha256"))
        found[r.key] = r
    return found


def resolve(pip: Sequence[str], platform: Platform, roots: Sequence[str], constraints: Sequence[str], work: Path,
            find_links: Path | None = None, no_deps: bool = False) -> dict[str, Resolved]:
    """pip's resolution of ``roots`` for the platform under ``constraints``, installing nothing (ResolveFailed)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "constraints.txt").write_text("".join(f"{c}\n" for c in constraints))
    report = work / "report.json"
    report.unlink(missing_ok=True)
    args = ["install", "--dry-run", "--ignore-installed", f"--report={report}", f"--target={work / 'none'}",
            *target_args(platform), f"--constraint={work / 'constraints.txt'}", *roots]
    if find_links is not None:
        args.insert(1, f"--find-links={find_links}")
    if no_deps:
        args.insert(1, "--no-deps")
    done = _run(pip, args)
    if done.returncode != 0 or not report.is_file():
        raise parse_failure(done.stdout)
    return _report(report)


def metadata(pip: Sequence[str], platform: Platform, spec: str, work: Path) -> Resolved:
    """One distribution's metadata (its Requires-Dist) for the platform, its dependencies left alone."""
    try:
        found = resolve(pip, platform, [spec], [], work, no_deps=True)
    except ResolveFailed as failed:
        raise ConfigError(f"pip found no metadata of {spec} for PLATFORM={platform.tag}: {failed}") from None
    return next(iter(found.values()))


def download(pip: Sequence[str], platform: Platform, specs: Sequence[str], dest: Path) -> list[Path]:
    """The wheels of ``specs`` (exact pins) for the platform into ``dest``, each alone (--no-deps)."""
    dest.mkdir(parents=True, exist_ok=True)
    done = _run(pip, ["download", "--no-deps", "--quiet", f"--dest={dest}", *target_args(platform), *specs])
    if done.returncode != 0:
        raise ConfigError(f"pip download failed: {parse_failure(done.stdout).message}")
    return sorted(dest.glob("*.whl"))


def build_suite_wheel(pip: Sequence[str], checkout: Path, work: Path) -> Path:
    """The suite's wheel (pip wheel --no-deps), built from a copy of this checkout so none of its files change."""
    if not (checkout / "pyproject.toml").is_file():
        raise ConfigError(f"{checkout} holds no pyproject.toml: make bundle builds the suite's wheel from a checkout of it")
    source = work / "suite-source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("llmload", "plots"):
        shutil.copytree(checkout / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        if (checkout / name).is_file():
            shutil.copy2(checkout / name, source / name)
    done = _run(pip, ["wheel", "--no-deps", "--quiet", f"--wheel-dir={work / 'suite'}", str(source)])
    wheels = sorted((work / "suite").glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise ConfigError(f"pip wheel of the suite failed: {parse_failure(done.stdout).message}")
    return wheels[0]


def write_stub(dist: Resolved, drop: set[str], folder: Path) -> Path:
    """A stand-in wheel of ``dist`` (version +llmload.override) without its requirements on the names in ``drop``.

    Only pip's resolver reads it, as the newest match of ``name==version``; the real wheel is downloaded instead.
    """
    keep = [r for r in dist.requires if canonicalize_name(_NAME.match(r.strip()).group(1)) not in drop]  # type: ignore[union-attr]
    version = f"{dist.version.split('+')[0]}+{OVERRIDE_LABEL}"
    stem = f"{re.sub(r'[-.]+', '_', dist.name)}-{version}"
    lines = ["Metadata-Version: 2.1", f"Name: {dist.name}", f"Version: {version}",
             *(f"Provides-Extra: {e}" for e in dist.provides_extra), *(f"Requires-Dist: {r}" for r in keep)]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{stem}.dist-info/METADATA", "\n".join(lines) + "\n")
        z.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: llmload\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{stem}.dist-info/RECORD", "")
    return path
