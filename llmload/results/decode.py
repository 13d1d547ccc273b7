"""JSON read back into frozen dataclasses by their type hints: the one decoder for every result file.

A key the class does not name is left out (files hold more than their readers use). An absent field
takes its default, or None when it may be None; any other absent field, or a value of the wrong
type, raises ResultsError naming where it is (``no ttft_ms.median``, ``ttft_ms.median: 'x' is not a float``).
A file's ``schema_version`` is checked first: every version up to the reader's own is read (what an older
file lacks takes its default), a newer one is named in one line.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from llmload.errors import ResultsError

__all__ = ["decode", "check_schema_version"]

T = TypeVar("T")
_LEAVES: dict[Any, tuple[type, ...]] = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def decode(cls: type[T], data: Any) -> T:
    """``data`` (decoded JSON) as an instance of dataclass ``cls``; ResultsError (one line) when it is not one."""
    return _value(cls, data, "")


def check_schema_version(data: Any, path: Path | str, newest: int) -> int:
    """The schema version ``data`` (decoded JSON) was written in, when this llmload reads it (1 to ``newest``);
    ResultsError (one line) for a newer version, or for none."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if type(version) is int and 1 <= version <= newest:
        return version
    if type(version) is int and version > newest:
        raise ResultsError(f"{path}: schema_version {version} is newer than this llmload reads (up to {newest}): "
                           "read it with a newer llmload")
    raise ResultsError(f"{path}: schema_version {version!r} is not one this llmload reads (1 to {newest})")


def _at(where: str, text: str) -> ResultsError:
    return ResultsError(f"{where}: {text}" if where else text)


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _value(hint: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]  # the files hold only ``X | None`` unions
        return _value(inner, value, where)
    if dataclasses.is_dataclass(hint):
        return _record(hint, value, where)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise _at(where, f"{value!r:.60} is not a list")
        items = [_value(args[0], item, f"{where}[{i}]") for i, item in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise _at(where, f"{value!r:.60} is not a mapping")
        return {key: _value(args[1], item, _join(where, key)) for key, item in value.items()}
    allowed = _LEAVES[hint]
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise _at(where, f"{value!r:.60} is not {'an' if hint is int else 'a'} {hint.__name__}")
    return value


def _record(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise _at(where, f"{data!r:.60} is not a mapping")
    values = {}
    for f in dataclasses.fields(cls):
        hint = _hints(cls)[f.name]
        if f.name in data:
            values[f.name] = _value(hint, data[f.name], _join(where, f.name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            if type(None) not in typing.get_args(hint):
                raise ResultsError(f"no {_join(where, f.name)}")
            values[f.name] = None
    return cls(**values)
