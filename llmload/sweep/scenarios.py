"""Scenarios: YAML files naming a study's load-test cells, which the sweep runs one by one.

    name: h100-grid                   # optional (the file's stem); letters, digits, '.', '_', '-'
    description: ...
    server:                           # what the server was, recorded with every result (strings)
      gpu: h100                       # also the GPU of every cell that sets none
      command: "vllm serve openai/{MODEL} --async-scheduling"   # {KEY}: that cell's setting
    defaults: {DURATION: 120s}        # settings every cell shares
    grid:                             # cartesian product; the first axis varies slowest
      MODEL: [gpt-oss-20b, gpt-oss-120b]
      GPU+MODEL: [[a100, gpt-oss-120b], [l4, gpt-oss-20b]]    # settings that vary together
    cells:                            # explicit cells after the grid's, each merged over defaults
      - {PROMPTS: "random:128:4:1000", USERS: 1000, REQUESTS: 1000, REPEATS: 3}

Settings are the run options of ``llmload/options.py``, checked by the parser
``python -m llmload load`` uses; prompt files are not read. ``RUNNER_KEYS`` (HOST, OUT, SPEEDUP, the
API key and web UI settings) say where and how a sweep runs, not what it measures: they are given to the sweep.
REPEATS (in defaults or a cell) runs each cell that many times; it is no part of the cell's key, so raising it
later keeps the runs already made.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llmload.errors import ConfigError, ScenarioError
from llmload.loadtest.runconfig import LaunchConfig, parse_run_args, parse_values
from llmload.options import OPTIONS, RUNNER_KEYS, option_by_key

__all__ = ["Cell", "Scenario", "cell_key", "cell_options", "make_cell", "load_scenario"]

TOP_LEVEL = ("name", "description", "server", "defaults", "grid", "cells")
_BY_KEY = {o.key: o for o in OPTIONS}
_SETTABLE = {**_BY_KEY, "REPEATS": option_by_key("REPEATS")}
"""What a scenario may set: the run options, and REPEATS, which the sweep reads itself."""
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class _Bad(Exception):
    """A mistake at one place in the file; the message starts with the place."""


@dataclass(frozen=True)
class Cell:
    """One load test of a scenario."""

    index: int
    settings: dict[str, str]  # KEY -> value, exactly as passed on a command line
    key: str  # sha256 of the sorted settings as JSON, 12 hex digits: same settings, same key
    label: str  # the settings that tell it from the scenario's other cells: gpt-oss-120b 4k high u8
    server: dict[str, str]  # the scenario's server with this cell's {KEY} placeholders filled in
    duration_s: float | None  # DURATION in seconds (before any SPEEDUP); None when REQUESTS decides
    repeats: int = 1  # REPEATS: how many times the sweep runs it (not in settings, so not in its key)


@dataclass(frozen=True)
class Scenario:
    """A loaded, checked scenario file."""

    name: str
    description: str
    path: Path
    server: dict[str, str]  # as written: {KEY} placeholders left in (each Cell has them filled)
    cells: tuple[Cell, ...]
    configs: list[Any] | None = None
    """server.configs: a tune's configurations by name (llmload/tune/grid.py reads them); None: not given."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"{key!r} is given twice", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cell_key(settings: dict[str, str]) -> str:
    """A cell's key: the sha256 of its sorted settings as JSON, 12 hex digits (same settings, same key)."""
    return hashlib.sha256(_json(settings).encode()).hexdigest()[:12]


def cell_options(settings: dict[str, str], host: str = "", speedup: float = 1.0) -> LaunchConfig:
    """A cell's settings parsed as `load` parses them, defaults from the option table; raises ConfigError."""
    return parse_run_args([f"{k}={v}" for k, v in settings.items()] + [f"HOST={host}", f"SPEEDUP={speedup:g}"])


def make_cell(index: int, settings: dict[str, str], label: str, server: dict[str, str], repeats: int = 1) -> Cell:
    """The Cell that runs ``settings``: its key from them, its DURATION as `load` reads it (None under REQUESTS)."""
    config = cell_options(settings)
    return Cell(index, settings, cell_key(settings), label, server, None if config.ends_with_last_request else config.duration_s, repeats)


def _setting(key: Any, value: Any, where: str) -> str:
    """One setting's command-line text, checked on its own."""
    if key in RUNNER_KEYS:
        raise _Bad(f"{where}: {key} is given to the sweep (make sweep {key}=...), not written in a scenario")
    option = _SETTABLE.get(key) if isinstance(key, str) else None
    if option is None:
        raise _Bad(f"{where}: unknown setting {key!r}; known settings: {', '.join(k for k in _SETTABLE if k not in RUNNER_KEYS)}")
    if value is None:
        raise _Bad(f"{where}: no value; write \"\" for an empty setting")
    if isinstance(value, bool):  # YAML 1.1 reads on/off (and yes/no) as booleans
        text = "on" if value else "off"
    elif isinstance(value, (str, int, float)) or (key == "EXTRA_BODY" and isinstance(value, dict)):
        text = _json(value) if isinstance(value, dict) else str(value)
    else:
        raise _Bad(f"{where}: {value!r} is not a single value")
    if option.choices and text not in option.choices:
        raise _Bad(f"{where}: {text!r} is not one of {', '.join(option.choices)}")
    if type(option.default) is int and not re.fullmatch(r"\s*[+-]?\d+\s*", text):
        raise _Bad(f"{where}: {text!r} is not a whole number")
    if key == "REPEATS":
        if int(text) < 1:
            raise _Bad(f"{where}: REPEATS={text.strip()} must be at least 1 (how many times each cell runs)")
        return text.strip()
    try:
        parse_values([f"{key}={text}"])  # its own grammar here; the rules between settings per cell, below
    except ConfigError as e:
        raise _Bad(f"{where}: {e}") from None
    return text


def _mapping(value: Any, where: str) -> dict[Any, Any]:
    if value is not None and not isinstance(value, dict):
        raise _Bad(f"{where}: must be a mapping of KEY: value, not {type(value).__name__} {value!r}")
    return value or {}


def _server(raw: Any) -> dict[str, str]:
    for name, value in _mapping(raw, "server").items():
        if name == "configs":
            continue  # a tune's configurations: read by the tune
        if not isinstance(value, str):
            raise _Bad(f"server.{name}: {value!r} is not a string; quote it (YAML reads 0.10 as 0.1)")
        for key in _PLACEHOLDER.findall(value):
            if key not in _BY_KEY or key in RUNNER_KEYS:
                raise _Bad(f"server.{name}: {{{key}}} names no scenario setting")
    return {str(name): value for name, value in _mapping(raw, "server").items() if name != "configs"}


def _grid(raw: Any, defaults: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    """The grid's cells in order, as (where, settings over defaults)."""
    axes: list[list[dict[str, str]]] = []
    seen: set[str] = set()
    for axis, values in _mapping(raw, "grid").items():
        keys = [k.strip() for k in str(axis).split("+")]
        for key in keys:
            if key == "REPEATS":
                raise _Bad(f"grid.{axis}: REPEATS runs a cell again, it is no axis; set it in defaults or in a cell")
            if key in defaults or key in seen:
                place = "also set in defaults" if key in defaults else "already a grid axis"
                raise _Bad(f"grid.{axis}: {key} is {place}; give a setting in one place")
            seen.add(key)
        if not isinstance(values, list):
            raise _Bad(f"grid.{axis}: {values!r} is not a list; write [{values}], or put the one value in defaults")
        if not values:
            raise _Bad(f"grid.{axis}: is empty; give at least one value")
        column = []
        for i, value in enumerate(values):
            if len(keys) == 1:
                column.append({keys[0]: _setting(keys[0], value, f"grid.{axis}[{i}]")})
            elif isinstance(value, list) and len(value) == len(keys):
                column.append({k: _setting(k, v, f"grid.{axis}[{i}].{k}") for k, v in zip(keys, value)})
            else:
                raise _Bad(f"grid.{axis}[{i}]: {value!r} is not a list of {len(keys)} values ({', '.join(keys)})")
        axes.append(column)
    if not axes:
        raise _Bad("grid: is empty; give at least one KEY: [values]")
    cells = []
    for n, combo in enumerate(itertools.product(*axes)):
        varying = {k: v for part in combo for k, v in part.items()}
        cells.append((f"grid cell {n} ({' '.join(f'{k}={v}' for k, v in varying.items())})", {**defaults, **varying}))
    return cells


def _short(key: str, value: str) -> str:
    if key in ("USERS", "REQUESTS"):
        return ("u" if key == "USERS" else "n") + value
    if key == "PROMPTS":
        kind, _, rest = value.partition(":")
        if kind == "sharegpt":
            count = rest.rsplit(":", 1)[-1]
            return f"sharegpt:{count}" if ":" in rest and count.isdigit() else "sharegpt"
        return value if kind == "random" or "/" not in value else Path(value).stem
    if key in ("GPU", "MODEL") or (key == "EFFORT" and value != "none"):
        return value
    if key == "RESPONSE_FORMAT":  # json_object, json_schema:<the schema file's stem>, or text (off)
        kind, _, path = value.partition(":")
        return f"{kind}:{Path(path).stem}" if path else kind or "text"
    return f"{key.lower()}={value}"


def _labels(all_settings: list[dict[str, str]]) -> list[str]:
    """Per cell, the settings that differ between cells (all of them for a lone cell)."""
    order = list(dict.fromkeys(k for s in all_settings for k in s))
    varying = [k for k in order if len({s.get(k) for s in all_settings}) > 1] if len(all_settings) > 1 else order
    return [" ".join(_short(k, s[k]) for k in varying if k in s) for s in all_settings]


def _fill(server: dict[str, str], settings: dict[str, str], where: str) -> dict[str, str]:
    def value(match: re.Match[str]) -> str:
        if not settings.get(match.group(1)):
            raise _Bad(f"server: {match.group(0)} but {where} sets no {match.group(1)}")
        return settings[match.group(1)]
    return {name: _PLACEHOLDER.sub(value, text) for name, text in server.items()}


def _cells(data: dict[str, Any], server: dict[str, str]) -> tuple[Cell, ...]:
    defaults = {str(k): _setting(k, v, f"defaults.{k}") for k, v in _mapping(data.get("defaults"), "defaults").items()}
    entries = _grid(data.get("grid"), defaults) if "grid" in data else []
    if "cells" in data and (not isinstance(data["cells"], list) or not data["cells"]):
        raise _Bad(f"cells: {data['cells']!r} is not a non-empty list of settings mappings")
    for i, cell in enumerate(data.get("cells") or []):
        own = {str(k): _setting(k, v, f"cells[{i}].{k}") for k, v in _mapping(cell, f"cells[{i}]").items()}
        entries.append((f"cells[{i}]", {**defaults, **own}))
    if not entries:
        raise _Bad("no cells: give grid, cells or both")
    gpu = server.get("gpu", "") if not _PLACEHOLDER.search(server.get("gpu", "")) else ""
    checked: dict[str, tuple[str, dict[str, str], LaunchConfig]] = {}
    repeats: dict[str, int] = {}
    for where, settings in entries:
        runs = int(settings.pop("REPEATS", "1"))
        if gpu and settings.setdefault("GPU", gpu) != gpu:
            raise _Bad(f"{where}: GPU {settings['GPU']!r} but server.gpu is {gpu!r}")
        try:
            ns = cell_options(settings)
        except ConfigError as e:
            raise _Bad(f"{where}: {e}") from None
        if ns.ends_with_last_request and "DURATION" in settings:
            raise _Bad(f"{where}: DURATION does not apply with {'REQUESTS' if ns.requests else 'TRACE'} (the cell ends with its "
                       "last request); leave one out")
        key = cell_key(settings)
        if key in checked:
            raise _Bad(f"{where}: the same settings as {checked[key][0]} (cell key {key}); each cell must differ")
        checked[key] = (where, settings, ns)
        repeats[key] = runs
    labels = _labels([settings for _, settings, _ in checked.values()])
    return tuple(make_cell(i, settings, label, _fill(server, settings, where), repeats[key])
                 for i, ((key, (where, settings, _)), label) in enumerate(zip(checked.items(), labels)))


def load_scenario(path: Path) -> Scenario:
    """Read and check a scenario file; raises ScenarioError (one line) on any mistake in it."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except OSError as e:
        raise ScenarioError(f"{path}: cannot be read ({e.strerror})") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise ScenarioError(f"{path}: {f'line {mark.line + 1}: ' if mark else ''}not valid YAML: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    try:
        if not isinstance(data, dict):
            raise _Bad("is empty" if data is None else f"the top level must be a mapping of {', '.join(TOP_LEVEL)}")
        for key in (k for k in data if k not in TOP_LEVEL):
            raise _Bad(f"unknown key {key!r} at top level; allowed: {', '.join(TOP_LEVEL)}")
        name = data.get("name", path.stem)
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise _Bad(f"name: {name!r} is not a plain name (letters, digits, '.', '_', '-')")
        description = data.get("description") or ""
        if not isinstance(description, str):
            raise _Bad(f"description: {description!r} is not text")
        server = _server(data.get("server"))
        configs = _mapping(data.get("server"), "server").get("configs")
        if configs is not None and not isinstance(configs, list):
            raise _Bad(f"server.configs: {configs!r} is not a list of configurations")
        return Scenario(name, description.strip(), path, server, _cells(data, server), configs)
    except _Bad as e:
        raise ScenarioError(f"{path}: {e}") from None
