"""KEY=VALUE settings read against the option table (llmload/options.py): the Makefile's words to flags, the
parsers of each command and of Locust (its web UI's form included), the value grammars every stage shares
(durations, address:port) and the help text ``make help`` prints.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from typing import Any, Callable, Sequence

from llmload.errors import ConfigError
from llmload.options import COMMANDS, OPTIONS, Option, options_for

__all__ = ["FIXED_IN_WEB_UI_ENV", "add_suite_options", "settings_to_argv", "parse_settings", "check_range", "check_ranges",
           "parse_duration_s", "host_port", "help_lines"]


FIXED_IN_WEB_UI_ENV = "LLMLOAD_FIXED_IN_WEB_UI"
"""Comma-separated keys the web UI's form must not offer: the built-in target `make ui` started cannot change them."""


def add_suite_options(parser: Any, *, include_locust: bool = False, web_ui: bool = False,
                      table: Sequence[Option] = OPTIONS) -> None:
    """Add a table's options to an argparse (or Locust's configargparse) parser."""
    fixed = set(os.environ.get(FIXED_IN_WEB_UI_ENV, "").split(","))
    for o in sorted(table, key=lambda o: o.secret) if web_ui else table:  # the web UI's form lists secrets last
        if (o.locust_flag and not include_locust) or (web_ui and not o.to_locust):
            continue
        flags = [o.locust_flag, o.flag] if o.locust_flag and o.locust_flag != o.flag else [o.flag]
        kwargs: dict[str, Any] = dict(dest=o.dest, type=_checked_type(o), default=o.default, help=o.help)
        if o.choices:
            kwargs["choices"] = o.choices
        if web_ui:
            kwargs["include_in_web_ui"] = o.web_form and o.key not in fixed
            if o.secret:
                kwargs["is_secret"] = True
        parser.add_argument(*flags, **kwargs)


def settings_to_argv(settings: Sequence[str], table: Sequence[Option] = OPTIONS) -> list[str]:
    """Turn ``KEY=VALUE`` words (as the Makefile passes them) into flags; flags pass through."""
    by_key = {o.key: o for o in table}
    argv: list[str] = []
    for word in settings:
        key, sep, value = word.partition("=")
        if sep and not word.startswith("-") and re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
            option = by_key.get(key)
            if option is None:
                raise ConfigError(f"unknown setting {key}; known settings: {', '.join(by_key)}")
            argv.append(f"{option.flag}={value}")
        else:
            argv.append(word)
    return argv


def check_range(o: Option, value: Any) -> None:
    """ConfigError unless a numeric option's value is a finite number inside the option's range."""
    kind = o.value_type or type(o.default)
    if value is None or kind is bool or kind not in (int, float):
        return
    inside = (math.isfinite(value) and (o.minimum is None or value >= o.minimum)
              and (o.above is None or value > o.above) and (o.maximum is None or value <= o.maximum))
    if not inside:
        rules = [f"{word} {limit:g}" for word, limit in (("at least", o.minimum), ("more than", o.above), ("at most", o.maximum))
                 if limit is not None]
        default = "" if o.default is None else f" (the default is {o.key}={o.default})"
        raise ConfigError(f"{o.key}={value:g} is out of range: it must be a finite number{' ' if rules else ''}{' and '.join(rules)}{default}")


def check_ranges(options: argparse.Namespace, table: Sequence[Option] = OPTIONS) -> None:
    """check_range for every option of ``table`` in ``options`` (values from Locust's web UI form never met the parser)."""
    for o in table:
        if hasattr(options, o.dest):
            check_range(o, getattr(options, o.dest))


def _checked_type(o: Option) -> Callable[[str], Any]:
    """The option's type for argparse: cast by its type, then range-checked."""
    cast = o.value_type or type(o.default)

    def convert(text: str) -> Any:
        value = cast(text)
        try:
            check_range(o, value)
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return value

    convert.__name__ = cast.__name__  # argparse names the type in "invalid int value: 'x'"
    return convert


class _OneLineParser(argparse.ArgumentParser):
    def __init__(self, table: Sequence[Option]) -> None:
        super().__init__(prog="llmload", add_help=False)
        self.table = table
        add_suite_options(self, include_locust=True, table=table)

    def error(self, message: str) -> None:  # argparse would print usage and exit; we want one line
        match = re.match(r"argument ([^:]+): (.*)", message)
        if match:
            flags = set(match.group(1).split("/"))
            for o in self.table:
                if match.group(2).startswith(f"{o.key}="):
                    raise ConfigError(match.group(2))  # check_range's own line
                if flags & {o.flag, o.locust_flag}:
                    raise ConfigError(f"{o.key} (--{o.flag.lstrip('-')}): {match.group(2)}")
        raise ConfigError(message)


def parse_settings(settings: Sequence[str], table: Sequence[Option]) -> argparse.Namespace:
    """Parse KEY=VALUE words or flags against one option table; a secret given there is refused."""
    namespace = _OneLineParser(table).parse_args(settings_to_argv(settings, table))
    for o in table:
        if o.secret and getattr(namespace, o.dest):
            raise ConfigError(f"{o.key} on a command line is visible to every user in ps; export it as {o.key} in the "
                              f"environment instead (make passes {o.key}=... on to the environment, not to the command line)"
                              + (" or give API_KEY_FILE=path" if o.key == "API_KEY" else ""))
    return namespace


_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s?)?")


def parse_duration_s(text: str) -> float:
    """Seconds in a Locust-style time span: ``120``, ``120s``, ``2m``, ``1h30m``."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or not match:
        raise ConfigError(f"DURATION={text!r} is not a time span; use e.g. 120s, 2m or 1h30m")
    hours, minutes, seconds = match.groups()
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)


def host_port(text: str, key: str) -> tuple[str, int]:
    """``address:port`` split, or ConfigError naming the setting."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{key}={text!r} is not address:port; use e.g. 10.0.0.5:5557")
    return host.strip("[]"), int(port)


def _default_text(o: Option) -> str:
    if o.secret:
        return "(from the environment)"
    return "(off)" if o.default is None else repr(o.default) if o.default == "" else str(o.default)


_MAKE_TARGETS = {"vllm-cpu": "serve-vllm-cpu, stop-vllm-cpu"}


def help_lines(commands: Sequence[str] = COMMANDS) -> list[str]:
    """Every setting of the table, per command: ``KEY=default  help [choices]`` (``make help``, ``--help``)."""
    lines = []
    for command in commands:
        table = options_for(command)
        lines.append(f"Settings of make {_MAKE_TARGETS.get(command, command)} (KEY=VALUE):")
        width = max(len(f"{o.key}={_default_text(o)}") for o in table)
        for o in table:
            choices = f" [{'|'.join(o.choices)}]" if o.choices else ""
            lines.append(f"  {o.key}={_default_text(o):<{width - len(o.key) - 1}}  {o.help}{choices}")
    return lines
