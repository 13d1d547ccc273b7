"""Per-request token sinks that turn engine events into HTTP responses."""

from __future__ import annotations

import time
from typing import Any, Protocol

from .chunks import BAD_JSON_EVENT, END, SSE_TYPE, JsonText, ToolCall, completion_body, http_chunk
from .engine import DONE, Engine, Sequence
from .http11 import HttpConnection
from .sendlog import SendLog


class StreamEncoding(Protocol):
    """How one API's stream is written (chunks.StreamEncoder for chat, response_events.ResponsesEncoder for the
    Responses API): what goes with the headers, before token 1, per token, after the last, and on a fault."""

    call: ToolCall | None
    json_text: JsonText | None

    def opening(self) -> bytes: ...

    def role(self) -> bytes: ...

    def token(self, generated: int, reasoning_tokens: int, finish_reason: str | None) -> bytes: ...

    def tokens(self, first: int, last: int, reasoning_tokens: int, finish_reason: str | None) -> bytes: ...

    def closing(self, completion_tokens: int, reasoning_tokens: int, cached_tokens: int, finish_reason: str,
                include_usage: bool, terminal: bool = True) -> bytes: ...

    def error_event(self, message: str) -> bytes: ...


class _Response:
    """What stream and non-stream responses share: fault disconnects and connection events."""

    def __init__(self, conn: HttpConnection, engine: Engine) -> None:
        self.conn = conn
        self.engine = engine
        self.seq: Sequence | None = None  # set right after Engine.submit

    def _fault_disconnect(self, seq: Sequence) -> bool:
        """Injected fault: drop the connection once disconnect_after tokens went out."""
        if seq.disconnect_after is None or seq.generated <= seq.disconnect_after:
            return False
        self.engine.cancel(seq)
        self._finished()
        self.conn.active = None
        self.conn.close()
        return True

    def _finished(self) -> None:
        """Hook for end-of-response bookkeeping."""

    def on_lost(self) -> None:
        """Client went away: stop generating and free the slot."""
        if self.seq is not None:
            self.engine.cancel(self.seq)
        self._finished()

    def on_pause(self) -> None:
        """Socket buffer full: hold tokens back."""
        if self.seq is not None:
            self.engine.pause(self.seq)

    def on_resume(self) -> None:
        """Socket drained: continue."""
        if self.seq is not None:
            self.engine.resume(self.seq)


class StreamResponse(_Response):
    """SSE response: one pre-framed HTTP chunk per token."""

    def __init__(self, conn: HttpConnection, engine: Engine, enc: StreamEncoding, request_id: str,
                 include_usage: bool, send_log: SendLog | None, fault: str | None = None, stream_interval: int = 1) -> None:
        super().__init__(conn, engine)
        self.enc = enc
        self.stream_interval = stream_interval
        """vLLM's --stream-interval: after the first token, tokens go out that many at a time (and the last at once)."""
        self._held_from: int | None = None
        self.request_id = request_id
        self.include_usage = include_usage
        self.send_log = send_log
        self.sent_s: list[float] | None = [] if send_log is not None else None
        self.fault = fault
        """A stream fault (chunks.FAULTS) this response injects, or None."""

    def on_token(self, seq: Sequence, due_s: float) -> None:
        """Write this token's chunk (plus role/usage/[DONE] around the first/last)."""
        if seq.disconnect_after is not None and self._fault_disconnect(seq):
            return
        transport = self.conn.transport
        if transport.is_closing():  # peer reset; connection_lost has not run yet
            self.engine.cancel(seq)
            self._finished()
            return
        g = seq.generated
        if g == 1 and self.fault == "slow-headers":
            self.start_stream()
        if self.fault in ("bad-json", "error-object") and g == max(1, seq.total_tokens // 2):
            self._break_stream(seq, transport)
            return
        last = seq.state == DONE
        if self.stream_interval > 1 and g > 1 and not last and (g - 1) % self.stream_interval:
            if self._held_from is None:
                self._held_from = g  # held back, as vLLM's API server buffers a stream interval
            return
        first, self._held_from = self._held_from or g, None
        finish = seq.finish_reason if last else None
        chunk = (self.enc.tokens(first, g, seq.reasoning_tokens, finish) if first != g
                 else self.enc.token(g, seq.reasoning_tokens, finish))
        if g == 1:
            chunk = self.enc.role() + chunk  # vLLM sends the role chunk right before token 1
        if last:
            chunk += self.enc.closing(g, seq.reasoning_tokens, seq.cached_tokens, seq.finish_reason, self.include_usage,
                                      terminal=self.fault != "no-done")
        if self.sent_s is not None:
            self.sent_s.append(time.monotonic())  # taken immediately before the write
        transport.write(chunk)
        if last:
            self._finished()
            self.conn.finish()

    def _break_stream(self, seq: Sequence, transport: Any) -> None:
        """Injected fault mid-stream: SSE data that is not JSON, or an error object then [DONE]; the request ends."""
        self.engine.cancel(seq)
        if self.fault == "bad-json":
            transport.write(http_chunk(BAD_JSON_EVENT) + END)
        else:
            transport.write(self.enc.error_event(f"engine failed on request {self.request_id} after {seq.generated} "
                                                 "tokens (fault injection)"))
        self._finished()
        self.conn.finish()

    def start_stream(self) -> None:
        """The headers, and what the API writes with them (the Responses API: response.created)."""
        self.conn.start_stream(200, SSE_TYPE, self)
        opening = self.enc.opening()
        if opening:
            self.conn.transport.write(opening)

    def _finished(self) -> None:
        """Record send times once per stream (complete or not), with the prompt tokens found cached."""
        if self.send_log is not None and self.sent_s is not None:
            self.send_log.add(self.request_id, self.sent_s, 0 if self.seq is None else self.seq.cached_tokens)
            self.sent_s = None


class FullResponse(_Response):
    """Non-stream response: one JSON body when the last token is due."""

    def __init__(self, conn: HttpConnection, engine: Engine, chat_id: str, created: int,
                 model: str) -> None:
        super().__init__(conn, engine)
        self.chat_id = chat_id
        self.created = created
        self.model = model
        self.call: ToolCall | None = None
        self.json_text: JsonText | None = None

    def on_token(self, seq: Sequence, due_s: float) -> None:
        """Only the last token (or an injected disconnect) produces output."""
        if seq.disconnect_after is not None and self._fault_disconnect(seq):
            return
        if seq.state == DONE:
            self.conn.send(200, completion_body(
                self.chat_id, self.created, self.model, seq.prompt_tokens, seq.cached_tokens,
                seq.reasoning_tokens, seq.answer_tokens, seq.finish_reason, self.call, self.json_text))
