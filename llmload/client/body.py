"""The JSON body of one streamed request: ``/v1/chat/completions`` or ``/v1/responses`` (the Responses API)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmload.results.structured import ResponseFormat

__all__ = ["ChatOptions", "chat_body", "responses_body", "responses_tools"]


@dataclass(frozen=True)
class ChatOptions:
    """The per-run request settings every request of a run shares."""

    model: str
    effort: str = "medium"
    """low, medium, high, or none (reasoning_effort left out)."""
    max_tokens: int = 0
    """0 leaves max_tokens out (the server's default)."""
    temperature: float = 1.0
    continuous_usage: bool = True
    """Ask for token counts on every chunk (vLLM's stream_options.continuous_usage_stats)."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    tools: tuple[dict[str, Any], ...] = ()
    """Function tools offered with every request (TOOLS), in chat's form; empty: none (and no tool_choice)."""
    tool_choice: str = "auto"
    response_format: ResponseFormat | None = None
    """RESPONSE_FORMAT: chat's response_format, the Responses API's text.format; None leaves them out."""


def chat_body(options: ChatOptions, messages: list[dict[str, Any]], request: dict[str, Any] | None = None) -> dict[str, Any]:
    """The request body: the run's options, then the prompt's own ``request`` fields, then ``extra_body``."""
    stream_options: dict[str, bool] = {"include_usage": True}
    if options.continuous_usage:
        stream_options["continuous_usage_stats"] = True
    body: dict[str, Any] = {
        "model": options.model,
        "messages": messages,
        "stream": True,
        "stream_options": stream_options,
        "temperature": options.temperature,
    }
    if options.max_tokens:
        body["max_tokens"] = options.max_tokens
    if options.effort != "none":
        body["reasoning_effort"] = options.effort
    if options.tools:
        body["tools"] = list(options.tools)
        body["tool_choice"] = options.tool_choice
    if options.response_format is not None:
        body["response_format"] = options.response_format.chat_field()
    if request:
        body.update(request)
    body.update(options.extra_body)
    return body


def responses_body(options: ChatOptions, messages: list[dict[str, Any]], request: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Responses API's body for the same request: ``input`` (the messages), ``reasoning.effort``,
    ``max_output_tokens`` (also for a prompt's own ``max_tokens``); no stream_options, which it has not (its usage
    comes once, at the end)."""
    body: dict[str, Any] = {
        "model": options.model,
        "input": messages,
        "stream": True,
        "temperature": options.temperature,
    }
    if options.max_tokens:
        body["max_output_tokens"] = options.max_tokens
    if options.effort != "none":
        body["reasoning"] = {"effort": options.effort}
    if options.tools:
        body["tools"] = responses_tools(options.tools)
        body["tool_choice"] = options.tool_choice
    if options.response_format is not None:
        body["text"] = {"format": options.response_format.responses_field()}
    if request:
        request = dict(request)
        if "max_tokens" in request:
            body["max_output_tokens"] = request.pop("max_tokens")
        body.update(request)
    body.update(options.extra_body)
    return body



def responses_tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """Chat's function tools (``{"type": "function", "function": {...}}``) in the Responses API's flat form
    (``{"type": "function", "name", "description", "parameters", ...}``)."""
    return [{"type": "function", **tool["function"]} for tool in tools]
