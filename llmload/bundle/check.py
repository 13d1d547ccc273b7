"""The bundle's check, run on the host before any server starts: ``python3 check.py DIR [--model FOLDER]``.

install.py runs it after installing (with DIR first on PYTHONPATH, HF_HUB_OFFLINE=1); it can run again alone.
1. requirements: every Requires-Dist of every distribution in DIR (and of the extras asked of them, which
   ``pip check`` skips: mistral_common needs pycountry only through ``pydantic-extra-types[pycountry]``) against
   DIR and the host's own packages; also the host's packages that a different version in DIR shadows;
2. imports: each EXTRA's top-level modules, the suite's, and for vLLM the modules that reach its lazy needs;
3. vLLM with a model folder: one chat template rendered offline, as a chat request renders it.
One line per gap; exit code 1 on any. Standard library and pip only (packaging, else pip's vendored copy):
this file is copied into the bundle as it is, and the suite's builder walks dependencies with the same code.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Iterable, Mapping, Sequence

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # a host without packaging: pip's own copy
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef]

__all__ = ["Dist", "Gap", "Walk", "walk", "requirement", "canonicalize_name", "InvalidRequirement", "main"]

# What a chat request reaches lazily, past the entry point's imports (vLLM 0.25): mistral_common's tokenizer
# imports pydantic_extra_types.language_code, which imports pycountry; xgrammar (structured output, tool
# calls' structural tags) loads apache-tvm-ffi (tvm_ffi). A module a vLLM version lacks is reported, not failed.
DEEP_IMPORTS = {"vllm": ("vllm.entrypoints.openai.api_server", "vllm.tokenizers.mistral",
                         "vllm.tool_parsers.structural_tag_registry", "vllm.v1.structured_output.backend_xgrammar")}
REACHED = {"pycountry": "pycountry", "tvm_ffi": "apache-tvm-ffi", "xgrammar": "xgrammar"}
"""Modules whose import the check reports (module: distribution), so a reader sees the lazy needs were reached."""


@dataclass(frozen=True)
class Dist:
    """One installed (or resolved) distribution: its name, version, Requires-Dist lines and where it is."""

    name: str
    version: str
    requires: tuple[str, ...] = ()
    where: str = "host"

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)


@dataclass(frozen=True)
class Gap:
    """A requirement not met: ``found`` is None when nothing of that name is installed."""

    requirer: str
    requirement: str
    found: Dist | None
    overridden: bool = False

    def line(self) -> str:
        have = f"{self.found.name} {self.found.version} is installed ({self.found.where})" if self.found else "not installed"
        if self.overridden:
            return f"overridden: {self.requirer} requires {self.requirement}; {have} (an EXTRA pin won)"
        return f"unmet: {self.requirer} requires {self.requirement}, {have}"


@dataclass
class Walk:
    """What a walk reached (name: extras asked of it) and the gaps it met, overridden ones included."""

    reached: dict[str, set[str]] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)

    @property
    def unmet(self) -> list[Gap]:
        return [g for g in self.gaps if not g.overridden]


def requirement(text: str) -> Requirement:
    """A PEP 508 requirement (InvalidRequirement when ``text`` is none)."""
    return Requirement(text)


def _applies(req: Requirement, env: Mapping[str, str] | None, extra: str) -> bool:
    return req.marker is None or req.marker.evaluate({**(env or {}), "extra": extra})


def _satisfied(req: Requirement, dist: Dist) -> bool:
    try:
        return req.specifier.contains(Version(dist.version), prereleases=True)
    except InvalidVersion:
        return True  # a version PEP 440 cannot read: nothing to compare, so no claim either way


def walk(index: Mapping[str, Dist], *, start: Iterable[Dist] = (), roots: Iterable[str] = (),
         env: Mapping[str, str] | None = None, overrides: Iterable[str] = ()) -> Walk:
    """Follow Requires-Dist from ``start`` (each without extras) and ``roots`` (requirement lines) through ``index``.

    ``index`` maps canonical names to what is installed (or resolved); ``env`` is the marker environment (None: this
    interpreter's); a requirement on a name in ``overrides`` is reported overridden, never unmet.
    """
    overridden = {canonicalize_name(n) for n in overrides}
    result = Walk()
    queue: list[tuple[str, str, str]] = [("EXTRA", text, "") for text in roots]  # (requirer, requirement, extra)
    seen: set[tuple[str, str]] = set()

    def visit(dist: Dist, extras: Iterable[str]) -> None:
        asked = result.reached.setdefault(dist.key, set())
        for extra in ("", *extras):
            if (dist.key, extra) in seen:
                continue
            seen.add((dist.key, extra))
            if extra:
                asked.add(extra)
            label = f"{dist.name}{f'[{extra}]' if extra else ''} {dist.version}"
            queue.extend((label, text, extra) for text in dist.requires)

    for dist in start:
        visit(dist, ())
    while queue:
        requirer, text, extra = queue.pop(0)
        req = requirement(text)
        if not _applies(req, env, extra):
            continue
        found = index.get(canonicalize_name(req.name))
        shown = str(Requirement(str(req).split(";")[0]))  # without its marker, which held
        if found is None or not _satisfied(req, found):
            result.gaps.append(Gap(requirer, shown, found, canonicalize_name(req.name) in overridden))
        if found is not None:
            visit(found, sorted(req.extras))
    return result


def _installed(paths: Sequence[str], where: str) -> dict[str, Dist]:
    """Distributions on ``paths``, the first of each name winning (as imports do)."""
    from importlib import metadata

    found: dict[str, Dist] = {}
    for d in metadata.distributions(path=list(paths)):
        name = d.metadata["Name"]
        if name and canonicalize_name(name) not in found:
            found[canonicalize_name(name)] = Dist(name, d.version, tuple(d.requires or ()), where)
    return found


def top_level_modules(paths: Sequence[str], name: str) -> list[str]:
    """The importable top-level names of the first distribution ``name`` on ``paths`` (top_level.txt, else its RECORD)."""
    from importlib import metadata

    for d in metadata.distributions(path=list(paths)):
        if canonicalize_name(d.metadata["Name"] or "") != canonicalize_name(name):
            continue
        listed = (d.read_text("top_level.txt") or "").split()
        if not listed:
            firsts = {Path(str(f)).parts[0] for f in d.files or ()}
            listed = [p[:-3] if p.endswith(".py") else p for p in firsts
                      if not p.endswith((".dist-info", ".data", ".pth")) and p not in ("..", "bin", "__pycache__")]
        names = sorted({m for m in listed if m.isidentifier()})
        return [m for m in names if not m.startswith("_")] or names
    return []


def _import(module: str) -> str | None:
    """None when ``module`` imports, else the one-line reason."""
    try:
        importlib.import_module(module)
    except BaseException as e:  # noqa: BLE001 - a module may raise anything (SystemExit included) on import
        if isinstance(e, KeyboardInterrupt):
            raise
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")
    return None


class _Unset(SimpleNamespace):
    """The few fields of vLLM's ModelConfig that rendering reads; any other reads as None (vLLM's own default)."""

    def __getattr__(self, name: str) -> None:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def _render(model: Path) -> str:
    """One chat template of the model folder rendered offline as vLLM renders a chat request; the prompt's length."""
    messages = [{"role": "user", "content": "Say hello."}]
    config = json.loads((model / "config.json").read_text()) if (model / "config.json").is_file() else {}
    try:
        from vllm.renderers.hf import safe_apply_chat_template
        from vllm.tokenizers import get_tokenizer
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("vllm"):
            raise
        from transformers import AutoTokenizer  # this vLLM has no such functions: transformers renders it

        text = AutoTokenizer.from_pretrained(str(model)).apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    else:
        model_config = _Unset(model=str(model), tokenizer=str(model), trust_remote_code=False,
                              hf_config=_Unset(model_type=config.get("model_type")))
        text = safe_apply_chat_template(model_config, get_tokenizer(str(model)), messages, tokenize=False,  # type: ignore[arg-type]
                                        add_generation_prompt=True)
    if config.get("model_type") == "gpt_oss":  # gpt-oss chat goes through harmony, whose encoding must be on disk
        from openai_harmony import HarmonyEncodingName, load_harmony_encoding

        load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    return f"{len(str(text))} characters"


def _shadowed(bundle: Mapping[str, Dist], host: Mapping[str, Dist], index: Mapping[str, Dist]) -> list[Gap]:
    """The host's packages' requirements that a different version in the bundle, in front of the host's, breaks."""
    shadowed = {k for k, d in bundle.items() if k in host and host[k].version != d.version}
    gaps = []
    for d in (d for k, d in host.items() if k not in bundle):
        for text in d.requires:
            req = requirement(text)
            key = canonicalize_name(req.name)
            if key in shadowed and _applies(req, None, "") and not _satisfied(req, index[key]):
                gaps.append(Gap(f"{d.name} {d.version} (host)", str(req).split(";")[0], index[key]))
    return gaps


def run_check(target: Path, manifest: Mapping[str, object], model: Path | None) -> tuple[list[str], list[str]]:
    """The gaps that stop the bundle (empty: it may start) and the overridden requirements, one line each."""
    target = target.resolve()
    bundle = _installed([str(target)], "bundle")
    host_paths = [p for p in sys.path if p and Path(p).resolve() != target]
    host = _installed(host_paths, "host")
    index = {**host, **bundle}
    found = walk(index, start=bundle.values(), overrides=[str(n) for n in manifest.get("overrides", {})])  # type: ignore[union-attr]
    gaps = found.gaps + _shadowed(bundle, host, index)
    failures = [g.line() for g in gaps if not g.overridden]
    notes = [g.line() for g in gaps if g.overridden]
    print(f"check: requirements of the {len(bundle)} distributions in {target}, against them and the host's "
          f"{len(host)}: {len(failures) or 'none'} unmet, {len(notes)} overridden")
    imports = [canonicalize_name(str(n)) for n in manifest.get("imports", [])]  # type: ignore[union-attr]
    modules = [m for n in imports for m in top_level_modules([str(target)], n) or top_level_modules(host_paths, n)]
    deep = [m for n in imports for m in DEEP_IMPORTS.get(n, ())]
    imported = []
    for module in modules + deep:
        reason = _import(module)
        if reason and module in deep and reason.startswith("ModuleNotFoundError") and f"'{module}'" in reason:
            print(f"check: import {module}: no such module in this version (skipped)")
        elif reason:
            failures.append(f"import {module} failed: {reason}")
        else:
            imported.append(module)
    reached = [f"{m} ({d})" for m, d in REACHED.items() if m in sys.modules]
    print(f"check: imported {', '.join(imported) or 'nothing'}" + (f"; reached {', '.join(reached)}" if reached else ""))
    if "vllm" in imports and model is None:
        print("check: chat template: skipped, no model folder given (--model FOLDER renders one offline)")
    elif "vllm" in imports and model is not None:
        try:
            print(f"check: chat template of {model} rendered offline: {_render(model)}")
        except Exception as e:  # noqa: BLE001 - any failure here is what a chat request would answer 500 with
            failures.append(f"chat template of {model} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return failures, notes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="check.py", description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="the folder install.py installed into")
    parser.add_argument("--model", type=Path, default=None, help="a model (or tokenizer) folder to render a chat template of")
    parser.add_argument("--manifest", type=Path, default=Path(__file__).with_name("manifest.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    target = str(args.target.resolve())
    if target not in [str(Path(p).resolve()) for p in sys.path if p]:
        sys.path.insert(0, target)
    manifest = json.loads(args.manifest.read_text()) if args.manifest.is_file() else {}
    failures, notes = run_check(args.target, manifest, args.model)
    for line in notes + failures:
        print(line)
    print(f"check: FAILED, {len(failures)} gaps (each above); fix them before any server starts" if failures else "check: passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
