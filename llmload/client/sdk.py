"""The official openai SDK as a streaming client (CLIENT=openai), for users who want its behaviour.

Retries are off (the SDK retries twice by default); *_PROXY variables are ignored (trust_env off),
as llmload.system.control_http's proxy policy says. Each chunk is stamped when the SDK's iterator
yields it, which includes the SDK's own parsing time: the raw client is the exact one.
"""

from __future__ import annotations

import ssl
import time
from typing import Any

from llmload.client.accumulator import StreamAccumulator
from llmload.client.apis import APIS
from llmload.client.faults import error_message
from llmload.system.control_http import server_root, tls_context
from llmload.errors import RequestFailed

__all__ = ["OpenAIChatClient"]

# Parameters that openai's create() takes by name, per API; everything else goes in extra_body.
_NAMED = {
    "chat": ("model", "messages", "stream", "stream_options", "max_tokens", "temperature", "reasoning_effort"),
    "responses": ("model", "input", "stream", "max_output_tokens", "temperature", "reasoning"),
}


class OpenAIChatClient:
    """Streams through ``openai.OpenAI().chat.completions.create(stream=True)``, or ``responses.create(stream=True)``."""

    def __init__(self, base_url: str, api_key: str = "", timeout_s: float = 600.0, api: str = "chat") -> None:
        import httpx2  # lazy, as openai: heavy imports that only CLIENT=openai needs
        import openai

        from llmload.client.sdk_transport import DoneWatch

        self.api = APIS[api]
        self._named = _NAMED[api]
        self._openai = openai
        self._httpx = httpx2
        transport = httpx2.HTTPTransport(verify=tls_context())
        # Only chat ends in `data: [DONE]`, which the SDK hides: the watch scans its reads; the Responses API ends in
        # an event the accumulator sees, so its reads go unwatched.
        self._watch = DoneWatch(transport) if api == "chat" else None
        self._client = openai.OpenAI(
            base_url=f"{server_root(base_url)}/v1",
            api_key=api_key or "EMPTY",
            max_retries=0,
            timeout=timeout_s,
            http_client=openai.DefaultHttpxClient(transport=self._watch or transport, timeout=timeout_s, trust_env=False),
        )
        self._create = self._client.chat.completions.create if self._watch else self._client.responses.create

    def close(self) -> None:
        self._client.close()

    def stream_chat(self, body: dict[str, Any], request_id: str, acc: StreamAccumulator) -> float:
        """Faults are named as the raw client names them (see client/faults.py)."""
        named = {k: body[k] for k in self._named if k in body}
        extra = {k: v for k, v in body.items() if k not in self._named}
        openai = self._openai
        try:
            stream = self._create(**named, extra_body=extra or None, extra_headers={"X-Request-Id": request_id})
        except openai.APITimeoutError:
            raise RequestFailed("timeout", "no response headers within REQUEST_TIMEOUT") from None
        except openai.APIStatusError as e:
            raise RequestFailed(f"http_{e.status_code}", error_message(e.response.content)) from None
        except openai.APIConnectionError as e:
            cause = e.__cause__
            refused = isinstance(cause, (self._httpx.ConnectError, ssl.SSLError))
            raise RequestFailed("connect" if refused else "disconnected", _cause_text(e)) from None
        try:
            with stream:
                for chunk in stream:
                    arrived_s = time.monotonic()
                    acc.on_chunk(arrived_s, chunk.to_dict())
        except openai.APITimeoutError:
            raise RequestFailed("timeout", "no data within REQUEST_TIMEOUT mid-stream") from None
        except openai.APIConnectionError as e:
            raise RequestFailed("disconnected", _cause_text(e)) from None
        except openai.APIError as e:  # the SDK raises this for an error object in the stream
            raise RequestFailed("stream_error", str(e.message)[:300]) from None
        except ValueError as e:  # SSE data that is not JSON
            raise RequestFailed("protocol", f"SSE data is not JSON ({e})") from None
        end_s = time.monotonic()
        if self._watch is None:  # the Responses API: its end is an event the accumulator has seen
            if acc.done_s is None and acc.stream_error is None:
                raise RequestFailed("protocol", f"stream ended without {acc.end_mark}")
            return end_s
        if not self._watch.done_seen:
            raise RequestFailed("protocol", f"stream ended without {acc.end_mark}")
        acc.on_done(end_s)
        return end_s


def _cause_text(error: Exception) -> str:
    """The transport error behind the SDK's APIConnectionError ("Connection error." says nothing)."""
    cause = error.__cause__
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(error)
