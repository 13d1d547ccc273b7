"""What a tune varies: GRID's flags and environment variables, or a scenario's explicit list of configurations.

    GRID='max-num-batched-tokens=2048,4096,8192 async-scheduling=off,on env:VLLM_ATTENTION_BACKEND=FLASH_ATTN,TRITON_ATTN'

Each entry is ``name=value,value,...``: a flag (``--name value``), a boolean flag (values ``off`` and ``on``: absent
or present), or ``env:NAME`` (the server's environment). ``default`` leaves the flag out (the server's own default).
The configurations are the entries' Cartesian product, the first axis varying slowest; the first configuration
(each entry's first value) is the baseline. A scenario's ``server.configs`` lists configurations by name instead,
each adding ``args`` and ``env`` to SERVE, or replacing it with its own ``command``; its first is the baseline.
Pure: text in, configurations out; ConfigError (one line) for a malformed GRID.
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Sequence

from llmload.errors import ConfigError

__all__ = ["Axis", "Configuration", "parse_grid", "grid_configurations", "scenario_configurations", "BOOLEAN", "DEFAULT"]

BOOLEAN = ("off", "on")
DEFAULT = "default"
ENV = "env:"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Axis:
    """One GRID entry: a flag (or ``env:NAME``) and its values in order."""

    key: str
    values: tuple[str, ...]

    @property
    def is_env(self) -> bool:
        return self.key.startswith(ENV)

    @property
    def boolean(self) -> bool:
        return not self.is_env and set(self.values) <= set(BOOLEAN)


@dataclass(frozen=True)
class Configuration:
    """One server configuration of a tune."""

    name: str
    args: tuple[str, ...] = ()
    """Words added to SERVE's command line."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables added to the server's environment."""
    command: str | None = None
    """A scenario's own launch command, replacing SERVE (its args still follow it)."""
    settings: dict[str, str] = field(default_factory=dict)
    """What it sets, by GRID key (``max-num-batched-tokens``: ``4096``): the report's columns."""

    @property
    def slug(self) -> str:
        """A folder name for it: its name with anything but letters, digits, '.', '_' and '-' replaced."""
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name).strip("_") or "config"


def parse_grid(text: str) -> tuple[Axis, ...]:
    """GRID's entries; ConfigError naming the entry for one without values, a flag given twice, or a bad name."""
    axes: list[Axis] = []
    for word in text.split():
        key, sep, values = word.partition("=")
        key = key.removeprefix("--")
        name = key.removeprefix(ENV)
        if not sep or not values.strip(","):
            raise ConfigError(f"GRID: {word!r} has no values; give them after '=', e.g. {key}=2048,4096 "
                              f"({'env:NAME=a,b for a variable' if key.startswith(ENV) else 'off,on for a boolean flag'})")
        if not _NAME.fullmatch(name):
            raise ConfigError(f"GRID: {key!r} is not a flag or env:NAME (letters, digits, '.', '_', '-')")
        if any(a.key == key for a in axes):
            raise ConfigError(f"GRID: {key} is given twice; give its values once, e.g. {key}=a,b")
        listed = tuple(v for v in values.split(",") if v)
        if len(set(listed)) != len(listed):
            raise ConfigError(f"GRID: {word!r} repeats a value")
        axes.append(Axis(key, listed))
    if not axes:
        raise ConfigError("GRID is empty: give what varies, e.g. GRID='max-num-batched-tokens=2048,4096'")
    return tuple(axes)


def _words(axis: Axis, value: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The command words and environment one axis's value adds."""
    if value == DEFAULT:
        return (), {}
    if axis.is_env:
        return (), {axis.key.removeprefix(ENV): value}
    if axis.boolean:
        return ((f"--{axis.key}",) if value == "on" else ()), {}
    return (f"--{axis.key}", value), {}


def grid_configurations(axes: Sequence[Axis]) -> list[Configuration]:
    """The Cartesian product of the axes, the first axis varying slowest: the first is the baseline."""
    configurations = []
    for combo in itertools.product(*(axis.values for axis in axes)):
        args: list[str] = []
        env: dict[str, str] = {}
        for axis, value in zip(axes, combo):
            words, variables = _words(axis, value)
            args += words
            env |= variables
        settings = {axis.key: value for axis, value in zip(axes, combo)}
        configurations.append(Configuration(" ".join(f"{k}={v}" for k, v in settings.items()), tuple(args), env,
                                            settings=settings))
    return configurations


def scenario_configurations(raw: Any, where: str = "server.configs") -> list[Configuration]:
    """A scenario's ``server.configs``: a list of {name, args (text or list), env (mapping), command (text)}."""
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: give a list of configurations, each with a name, e.g. "
                          "[{name: baseline}, {name: tuned, args: '--max-num-batched-tokens 4096'}]")
    configurations: list[Configuration] = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise ConfigError(f"{at}: needs a name (text)")
        unknown = set(item) - {"name", "args", "env", "command"}
        if unknown:
            raise ConfigError(f"{at}: unknown key {sorted(unknown)[0]!r}; a configuration has name, args, env, command")
        args = item.get("args") or ()
        args = tuple(shlex.split(args)) if isinstance(args, str) else tuple(str(a) for a in args)
        env = item.get("env") or {}
        if not isinstance(env, dict):
            raise ConfigError(f"{at}: env must be a mapping of NAME: value")
        command = item.get("command")
        if command is not None and not isinstance(command, str):
            raise ConfigError(f"{at}: command must be text")
        if any(c.name == item["name"] for c in configurations):
            raise ConfigError(f"{at}: the name {item['name']!r} is given twice")
        configurations.append(Configuration(item["name"].strip(), args, {str(k): str(v) for k, v in env.items()},
                                            command, {"args": " ".join(args)} if args else {}))
    return configurations
