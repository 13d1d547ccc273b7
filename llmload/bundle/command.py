"""``python -m llmload bundle PLATFORM=... PYTHON=... [EXTRA=...] [FREEZE=file] [PART_MB=N] [OUT=folder]``.

Resolves the suite (its wheel, built from this checkout) and EXTRA for the host with pip, leaves out what FREEZE says
the host has, downloads the rest and writes them in parts with manifest.json, install.py and check.py.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from llmload.errors import ConfigError

from .check import Dist, canonicalize_name, requirement, walk
from .parts import MANIFEST, WHOLE, sha256_of, split_file, write_manifest, write_tar
from .pip import (OVERRIDE_LABEL, Conflict, ResolveFailed, Resolved, build_suite_wheel, download, metadata, pip_command,
                  resolve, write_stub)
from .plan import Platform, default_out, extra_names, parse_platform, read_freeze, split_extra, split_host

__all__ = ["run_bundle", "Plan"]

_MIB = 1024 * 1024
_ROUNDS = 30
"""At most this many resolutions: each round wins a conflict for EXTRA or adds what the host's markers need."""


@dataclass(frozen=True)
class Plan:
    """What the host needs: the resolution reached under the host's markers, and where each part of it came from."""

    resolved: dict[str, Resolved]
    suite: frozenset[str]
    """Names reached from the suite's wheel."""
    extra: frozenset[str]
    """Names reached from EXTRA."""
    won: dict[str, list[str]]
    """Per name an EXTRA requirement won: what the others required of it."""
    added: tuple[str, ...]
    """Requirements pip left out because its markers were this Python's: asked of it as well."""


def _version(r: Resolved) -> str:
    return r.version.removesuffix(f"+{OVERRIDE_LABEL}")


def _win(conflicts: Sequence[Conflict], overrides: set[str], won: set[str], extra: Sequence[str]) -> list[str]:
    """The packages whose requirements lose to EXTRA in these conflicts ("name version"); ConfigError for the rest."""
    for c in conflicts:
        if c.name not in overrides:
            raise ConfigError(c.line(extra))
    won.update(c.name for c in conflicts)
    return sorted({d.who for c in conflicts for d in c.demands if d.who not in ("EXTRA", "FREEZE")})


def plan_bundle(pip: Sequence[str], platform: Platform, suite_wheel: Path, extra: Sequence[str], host: dict[str, str | None], work: Path) -> Plan:
    """pip's resolution for the host, EXTRA winning the conflicts it names, walked again under the host's markers."""
    overrides = set(extra_names(extra))
    constraints = [f"{n}=={v}" for n, v in sorted(host.items()) if v and n not in overrides]
    suite_root = "{}=={}".format(*suite_wheel.name.split("-")[:2])
    suite_key = canonicalize_name(suite_wheel.name.split("-")[0])
    stubs: dict[str, Resolved] = {}
    """The packages that lost a conflict to EXTRA: the version pip chose, held there by an === constraint (else pip
    backtracks to the real wheel, or to older versions that lose the same way)."""
    stub_files: dict[str, Path] = {}
    won: set[str] = set()
    added: list[str] = []
    for _ in range(_ROUNDS):
        held = [f"{r.name}==={_version(r)}+{OVERRIDE_LABEL}" for r in stubs.values()]
        suite_stub = stub_files.get(suite_key, suite_wheel)
        try:
            resolved = resolve(pip, platform, [str(suite_stub), *extra, *added], [*constraints, *held], work / "resolve",
                               work / "stubs" if stubs else None)
        except ResolveFailed as failed:
            if failed.no_wheel:
                raise ConfigError(failed.no_wheel.line(platform)) from None
            if not failed.conflicts:
                raise ConfigError(f"pip could not resolve the bundle for PLATFORM={platform.tag} PYTHON={platform.python}: "
                                  f"{failed.message}") from None
            before = set(won)
            changed = False
            for who in _win(failed.conflicts, overrides, won, extra):
                name, version = who.split()[0].split("[")[0], who.split()[1].split("+")[0]
                key = canonicalize_name(name)
                if key not in stubs or _version(stubs[key]) != version:
                    stubs[key] = metadata(pip, platform, str(suite_wheel) if key == suite_key else f"{name}=={version}",
                                          work / "metadata")
                    changed = True
                lost = [d.requirement for c in failed.conflicts for d in c.demands if d.who == who]
                print(f"bundle: EXTRA wins over {name} {version}'s {', '.join(lost)}", flush=True)
            if not changed and won == before:
                raise ConfigError(failed.conflicts[0].line(extra)) from None
            shutil.rmtree(work / "stubs", ignore_errors=True)
            stub_files = {key: write_stub(original, won, work / "stubs") for key, original in stubs.items()}
            continue
        index = {k: Dist(r.name, _version(r), (stubs[k] if k in stubs else r).requires) for k, r in resolved.items()}
        env = platform.markers
        whole = walk(index, roots=[suite_root, *extra, *added], env=env, overrides=overrides)
        missing = [g.requirement for g in whole.unmet if g.requirement not in added]
        if whole.unmet and not missing:
            raise ConfigError(f"pip's resolution does not hold on the host: {whole.unmet[0].line()}")
        if missing:
            print(f"bundle: on Python {platform.python} the host also needs {', '.join(missing)}: resolving again", flush=True)
            added += missing
            continue
        lost: dict[str, list[str]] = {}
        for g in whole.gaps:  # overridden ones only: the unmet were asked of pip again above
            lost.setdefault(canonicalize_name(requirement(g.requirement).name), []).append(f"{g.requirer} requires {g.requirement}")
        return Plan({k: r for k, r in resolved.items() if k in whole.reached},
                    frozenset(walk(index, roots=[suite_root], env=env, overrides=overrides).reached),
                    frozenset(walk(index, roots=[*extra, *added], env=env, overrides=overrides).reached), lost, tuple(added))
    raise ConfigError(f"no resolution for PLATFORM={platform.tag} PYTHON={platform.python} after {_ROUNDS} rounds of "
                      f"conflicts won by EXTRA ({', '.join(sorted(won))}); pin fewer packages in EXTRA")


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"OUT={out} is a file, not a folder; choose another OUT")
    if (out / MANIFEST).exists():
        raise ConfigError(f"OUT={out} already holds a bundle ({MANIFEST}); choose another OUT (a bundle is never overwritten)")


def _checkout() -> Path:
    return Path(__file__).resolve().parents[2]


def run_bundle(options: argparse.Namespace) -> int:
    platform = parse_platform(options.platform, options.python)
    extra = split_extra(options.extra)
    host = read_freeze(options.freeze)
    out = Path(options.out) if options.out else default_out(platform)
    _check_out(out)
    with tempfile.TemporaryDirectory(prefix="llmload-bundle-") as tmp:
        work = Path(tmp)
        pip = pip_command(work)
        suite_wheel = build_suite_wheel(pip, _checkout(), work)
        print(f"bundle: resolving the suite ({suite_wheel.name}){' and ' + ' '.join(extra) if extra else ''} for "
              f"{platform.tag}, Python {platform.python} with pip (minutes for large sets: pip reads each candidate's metadata)",
              flush=True)
        plan = plan_bundle(pip, platform, suite_wheel, extra, host, work)
        versions = {k: _version(r) for k, r in plan.resolved.items()}
        bundled, left_out = split_host(versions, host, extra_names(extra))
        suite_key = canonicalize_name(suite_wheel.name.split("-")[0])
        specs = [f"{plan.resolved[k].name}=={versions[k]}" for k in bundled if k != suite_key]
        print(f"bundle: downloading {len(specs)} wheels ({len(left_out)} left out: the host has them)", flush=True)
        wheel_dir = work / "wheels"
        files = download(pip, platform, specs, wheel_dir) if specs else []
        wheel_dir.mkdir(exist_ok=True)
        files.append(Path(shutil.copy2(suite_wheel, wheel_dir / suite_wheel.name)))
        wheels = _wheel_entries(plan, files, bundled, versions)
        whole = write_tar([wheel_dir / w["file"] for w in wheels], work / WHOLE)
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob(f"{WHOLE}.part*"):
            stale.unlink()
        parts = split_file(work / WHOLE, options.part_mb * _MIB, out)
    for script in ("install.py", "check.py"):
        shutil.copy2(Path(__file__).with_name(script), out / script)
    manifest = {"platform": platform.tag, "pip_platforms": list(platform.pip_platforms), "python": platform.python,
                "extra": list(extra), "imports": [suite_key, *extra_names(extra)],
                "overrides": {n: plan.won.get(n, []) for n in sorted(plan.won)}, "added_for_host_markers": list(plan.added),
                "wheels": wheels,
                "left_out": [{"name": plan.resolved[k].name, "version": versions[k], "host": host[k]} for k in left_out],
                "part_bytes": options.part_mb * _MIB, "parts": parts, "whole": whole}
    write_manifest(out, manifest)
    print("\n".join(_summary(out, manifest, host)))
    return 0


def _wheel_entries(plan: Plan, files: Sequence[Path], bundled: Sequence[str], versions: dict[str, str]) -> list[dict]:
    """One manifest entry per wheel, each checked against pip's hash where the index gave one."""
    by_key = {canonicalize_name(f.name.split("-")[0]): f for f in files}
    missing = [k for k in bundled if k not in by_key]
    if missing:
        raise ConfigError(f"pip download brought no wheel of {', '.join(missing)}; run make bundle again")
    entries = []
    for key in bundled:
        f, r = by_key[key], plan.resolved[key]
        digest = sha256_of(f)
        if r.sha256 and OVERRIDE_LABEL not in r.version and digest != r.sha256:
            raise ConfigError(f"{f.name}: sha256 {digest} is not the index's {r.sha256}; run make bundle again")
        origin = "+".join(s for s, keys in (("suite", plan.suite), ("extra", plan.extra)) if key in keys)
        entries.append({"file": f.name, "name": r.name, "version": versions[key], "sha256": digest,
                        "bytes": f.stat().st_size, "from": origin or "added"})
    return entries


def _named(wheel: dict) -> str:
    return f"{wheel['name']} {wheel['version']} ({wheel['bytes'] / _MIB:.0f} MiB)"


def _summary(out: Path, manifest: dict, host: dict[str, str | None]) -> list[str]:
    wheels, parts = manifest["wheels"], manifest["parts"]
    total = sum(w["bytes"] for w in wheels) / _MIB
    largest = sorted(wheels, key=lambda w: -w["bytes"])[:5]
    lines = [f"Bundle for {manifest['platform']}, Python {manifest['python']}: {len(wheels)} wheels, {total:.1f} MiB, "
             f"{len(parts)} parts of at most {manifest['part_bytes'] // _MIB} MiB in {out}/",
             f"  from EXTRA: {sum('extra' in w['from'] for w in wheels)}, the suite's: {sum('suite' in w['from'] for w in wheels)}; "
             f"largest: {', '.join(_named(w) for w in largest)}"]
    left = manifest["left_out"]
    if left:
        bare = sum(1 for x in left if x["host"] is None)
        lines.append(f"  left out, the host has them (FREEZE): {len(left)} ({bare} by name only, the check compares their "
                     f"versions there): {', '.join(x['name'] for x in left)}")
    for name, lost in manifest["overrides"].items():
        lines.append(f"  EXTRA won over {name}: {'; '.join(lost) or 'a conflict pip named'}")
    if manifest["added_for_host_markers"]:
        lines.append(f"  needed under Python {manifest['python']}'s markers, which pip here evaluated for its own: "
                     f"{', '.join(manifest['added_for_host_markers'])}")
    lines += [f"On the host (no registry needed), carry {out}/ whole (manifest.json, install.py, check.py, the parts), e.g.",
              f"  rsync -a {out}/ HOST:bundle/",
              "  ssh HOST python3 bundle/install.py bundle/site" + (" --model /path/to/model" if any(
                  n == "vllm" for n in manifest["imports"]) else ""),
              "install.py checks each part's and the whole's sha256, installs with pip --no-index --no-deps --target, "
              "then runs check.py: exit 0 only when every requirement is met and the imports work"]
    return lines
