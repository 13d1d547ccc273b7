"""TOOLS and TOOL_RESULT_TOKENS: the function tools a run offers, read from a JSON file and checked, and the results
its tool rounds send back, rendered from ``templates/tool_result/result.j2`` to an exact length.

A tools file is a JSON list of function tools in chat's form (``tools/example.json``):
``[{"type": "function", "function": {"name": "get_weather", "description": ..., "parameters": {JSON Schema}}}]``.
Each result is a JSON object of exactly TOOL_RESULT_TOKENS o200k tokens of text (``text_tokens``; the message's
frame is a few more), its ``details`` made of one-token words (wordtokens.py). They are built once per function
before the run, a few per function, so no template is rendered while requests are in flight.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import jinja2
import orjson

from llmload.errors import ConfigError, TemplateError
from llmload.promptsets.tokens import text_tokens
from llmload.promptsets.wordtokens import word_tokens

__all__ = ["RESULT_TEMPLATE", "RESULTS_PER_TOOL", "load_tools", "tool_names", "tool_results"]

RESULT_TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "tool_result" / "result.j2"
RESULTS_PER_TOOL = 4
"""Distinct results per function; a round takes them in turn."""
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what OpenAI's API allows a function name
_EXAMPLE = '[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", ...}}}]'


def load_tools(path: str) -> tuple[dict[str, Any], ...]:
    """The function tools of the TOOLS file at ``path``; ConfigError (one line: the file and what is wrong) else."""
    def wrong(what: str) -> ConfigError:
        return ConfigError(f"TOOLS={path}: {what}; give a JSON list of function tools like {_EXAMPLE}")

    try:
        tools = orjson.loads(Path(path).read_bytes())
    except OSError as e:
        raise ConfigError(f"TOOLS={path} cannot be read ({e.strerror or e}); give a JSON file of function tools") from None
    except orjson.JSONDecodeError as e:
        raise wrong(f"not JSON ({e})") from None
    if not isinstance(tools, list) or not tools:
        raise wrong("not a non-empty JSON list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        problem = _tool_problem(tool)
        if problem:
            raise wrong(f"tool {i + 1} {problem}")
        name = tool["function"]["name"]
        if name in names:
            raise wrong(f"tool {i + 1} repeats the name {name!r}")
        names.add(name)
    return tuple(tools)


def _tool_problem(tool: Any) -> str | None:
    """What keeps ``tool`` from being a function tool in chat's form; None when it is one."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return 'is not an object with "type": "function"'
    function = tool.get("function")
    if not isinstance(function, dict):
        return 'has no "function" object (the Responses API\'s flat form is made from chat\'s, not read)'
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return "has no name of 1-64 letters, digits, _ or -"
    parameters = function.get("parameters", {})
    if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
        return f"({name}) has parameters that are not a JSON Schema object"
    if not isinstance(function.get("description", ""), str):
        return f"({name}) has a description that is not text"
    return None


def tool_names(tools: Sequence[dict[str, Any]]) -> frozenset[str]:
    """The names of the functions offered."""
    return frozenset(tool["function"]["name"] for tool in tools)


@lru_cache(maxsize=4)
def tool_results(names: tuple[str, ...], tokens: int, seed: int, template: Path = RESULT_TEMPLATE) -> dict[str, tuple[str, ...]]:
    """RESULTS_PER_TOOL results of exactly ``tokens`` o200k tokens for each function in ``names``; ConfigError for a
    ``tokens`` below what the template's frame alone takes."""
    try:
        render = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(template.read_text()).render
    except (OSError, jinja2.TemplateError) as e:
        raise TemplateError(f"{template}: {e}") from None
    return {name: tuple(_sized(render, name, tokens, random.Random(f"tool_result:{seed}:{name}:{k}"))
                        for k in range(RESULTS_PER_TOOL)) for name in names}


def _sized(render: Any, name: str, tokens: int, rng: random.Random) -> str:
    """One result for ``name`` of exactly ``tokens`` tokens: the frame's own, then as many words as are left."""
    values = {"name": name, "elapsed_ms": rng.randint(3, 480), "matches": rng.randint(1, 9)}
    words = rng.choices(word_tokens(), k=tokens)
    count = 0
    for _ in range(4):  # the words are a token each, so this settles in a step; a boundary may move it by one
        text = render(**values, details="".join(words[:count]))
        missing = tokens - text_tokens(text)
        if missing == 0:
            return text
        count += missing
        if count < 0 or count > tokens:
            break
    frame = text_tokens(render(**values, details=""))
    raise ConfigError(f"TOOL_RESULT_TOKENS={tokens} cannot be met: a result of {name} takes {frame} tokens without its "
                      f"details; give TOOL_RESULT_TOKENS={frame + 1} or more")

