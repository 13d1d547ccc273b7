"""Structured output (RESPONSE_FORMAT): the format a run asks for, and each answer judged against it once its request
has ended (never per event: the client only keeps the answer's text).

    json_object         the answer must be a JSON object (chat's response_format {"type": "json_object"})
    json_schema:PATH    the answer must be valid against the JSON Schema in PATH (jsonschema's validator of the
                        schema's own draft); sent as {"type": "json_schema", "json_schema": {name, schema, strict}}
                        (chat) or text.format {"type": "json_schema", name, schema, strict} (the Responses API)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import orjson

from llmload.errors import ConfigError

__all__ = ["ResponseFormat", "parse_response_format", "judge_answer"]

_FORMS = "json_object or json_schema:PATH (a JSON Schema file)"
_REASON_CHARS = 200
_INSTANCE_CHARS = 40
"""How much of the offending value a reason quotes."""


@dataclass(frozen=True)
class ResponseFormat:
    """What RESPONSE_FORMAT asks of every answer."""

    kind: str
    """json_object or json_schema."""
    name: str = ""
    """json_schema: the schema's name sent with it (the file's stem, as the APIs allow names)."""
    schema: dict[str, Any] | None = field(default=None, compare=False)
    validator: Any = field(default=None, compare=False, repr=False)
    """json_schema: jsonschema's validator of the schema's draft, built once."""

    def chat_field(self) -> dict[str, Any]:
        """Chat's ``response_format``."""
        if self.kind == "json_object":
            return {"type": "json_object"}
        return {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.schema, "strict": True}}

    def responses_field(self) -> dict[str, Any]:
        """The Responses API's ``text.format``: the same, flattened."""
        if self.kind == "json_object":
            return {"type": "json_object"}
        return {"type": "json_schema", "name": self.name, "schema": self.schema, "strict": True}


def parse_response_format(text: str) -> ResponseFormat | None:
    """RESPONSE_FORMAT as a ResponseFormat (None when empty: off); ConfigError names a value that is neither form,
    a schema file that cannot be read, is not JSON, or is not a JSON Schema."""
    text = text.strip()
    if not text:
        return None
    if text == "json_object":
        return ResponseFormat("json_object")
    kind, sep, path = text.partition(":")
    if kind != "json_schema" or not sep or not path:
        raise ConfigError(f"RESPONSE_FORMAT={text!r} is not {_FORMS}")
    return _schema_format(path)


def _schema_format(path: str) -> ResponseFormat:
    setting = f"RESPONSE_FORMAT=json_schema:{path}"
    try:
        schema = orjson.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{setting}: no such file; give the path of a JSON Schema file") from None
    except OSError as e:
        raise ConfigError(f"{setting}: cannot be read ({e.strerror or e}); give the path of a JSON Schema file") from None
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{setting}: not JSON ({e}); give a JSON Schema file") from None
    if not isinstance(schema, dict):
        raise ConfigError(f"{setting}: a JSON Schema must be a JSON object here, not {type(schema).__name__}")
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "the top level"
        raise ConfigError(f"{setting} is not a JSON Schema: at {where}, {_first_line(e.message)}") from None
    name = re.sub(r"[^A-Za-z0-9_-]", "_", Path(path).stem)[:64] or "schema"
    return ResponseFormat("json_schema", name, schema, validator_class(schema))


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= _REASON_CHARS else line[: _REASON_CHARS - 3] + "..."


def judge_answer(response_format: ResponseFormat, text: str) -> dict[str, Any]:
    """The record fields of a finished answer judged against ``response_format``: answer_json (it parsed as JSON),
    answer_valid (a JSON object for json_object; valid against the schema for json_schema) and answer_invalid (why
    not, one short line; None when valid)."""
    if not text.strip():
        return {"answer_json": False, "answer_valid": False, "answer_invalid": "no answer text"}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return {"answer_json": False, "answer_valid": False, "answer_invalid": _first_line(f"not JSON: {e}")}
    if response_format.validator is None:
        valid = isinstance(value, dict)
        return {"answer_json": True, "answer_valid": valid,
                "answer_invalid": None if valid else f"a JSON {type(value).__name__}, not an object"}
    error = jsonschema.exceptions.best_match(response_format.validator.iter_errors(value))
    if error is None:
        return {"answer_json": True, "answer_valid": True, "answer_invalid": None}
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    message, shown = error.message, repr(error.instance)
    if len(shown) > _INSTANCE_CHARS and message.startswith(shown):  # "<the value> is not of type 'number'"
        message = shown[: _INSTANCE_CHARS - 4] + "...'" + message[len(shown):]
    return {"answer_json": True, "answer_valid": False, "answer_invalid": _first_line(f"at {where}: {message}")}
