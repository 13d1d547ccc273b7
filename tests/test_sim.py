"""Tests for llmload.sim: engine math on a fake clock, and real simulator processes over HTTP."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest

from llmload.errors import ServerError
from llmload.promptsets.tokens import harmony_encoding, harmony_text, prompt_tokens, text_tokens
from llmload.sim import ProfileError, lookup_profile, start_sim, stop_sim
from llmload.sim.engine import DONE, Engine, plan_output
from llmload.sim.profiles import sample_lengths
from llmload.sim.stepmodel import Frontend, prefill_pairs, step_time_s

ROOT = Path(__file__).resolve().parents[1]
MODEL = "openai/gpt-oss-20b"
USER = [{"role": "user", "content": "Explain continuous batching in one paragraph."}]


# ---- engine on a fake clock ------------------------------------------------------------

class Recorder:
    """Token sink that records scheduled times per sequence."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def on_token(self, seq, due_s: float) -> None:
        self.times.append(due_s)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _engine(profile=None, **kw) -> tuple[Engine, FakeClock]:
    clk = FakeClock()
    return Engine(profile or lookup_profile("h100", "gpt-oss-20b"), clock=clk, **kw), clk


def _run(engine: Engine, prompts: list[int], max_tokens: int = 20) -> list[Recorder]:
    """Submit all prompts at t=0 with exactly max_tokens outputs and run to completion."""
    recs = [Recorder() for _ in prompts]
    for p, rec in zip(prompts, recs):
        engine.submit(p, max_tokens=max_tokens, ignore_eos=True, sink=rec, now_s=0.0)
    engine.advance(math.inf)
    return recs


def _max_num_seqs(profile, seqs: int):
    return dataclasses.replace(profile, engine=dataclasses.replace(profile.engine, max_num_seqs=seqs))


def _instant_frontend(profile=None):
    """The profile with an API server that costs nothing: token times are the engine's step ends."""
    return dataclasses.replace(profile or lookup_profile("h100", "gpt-oss-20b"), frontend=Frontend(0.0, 0.0, 0.0))


@pytest.mark.pure
def test_ttft_grows_with_prompt_tokens():
    prof = _instant_frontend()
    small = _run(_engine(prof)[0], [1000])[0].times[0]
    big = _run(_engine(prof)[0], [20000])[0].times[0]
    assert small == pytest.approx(step_time_s(prof.step, 1000, 0, prefill_pairs(0, 1000)))
    budget = prof.engine.max_num_batched_tokens  # 20000 tokens: chunks of the step budget, one step each
    chunks = [(done, min(budget, 20000 - done)) for done in range(0, 20000, budget)]
    assert len(chunks) == 3
    assert big == pytest.approx(sum(step_time_s(prof.step, c, 0, prefill_pairs(done, c)) for done, c in chunks))
    assert big > small


@pytest.mark.pure
def test_prompts_share_the_step_budget_first_come_first_served():
    prof = _instant_frontend()
    a, b = _run(_engine(prof)[0], [5500, 11000])
    first_step = step_time_s(prof.step, prof.engine.max_num_batched_tokens, 0, prefill_pairs(0, 5500) + prefill_pairs(0, 2692))
    assert a.times[0] == pytest.approx(first_step)  # a whole, then b's first chunk fills the step
    assert b.times[0] > a.times[0]  # b's rest waits for the next step, beside a's first decode


@pytest.mark.pure
def test_queueing_behind_max_num_seqs():
    prof = _max_num_seqs(_instant_frontend(), 2)
    a, b, c = _run(_engine(prof)[0], [100, 100, 100])
    # c is admitted only when a slot frees (a and b end in the same step), then pays its own prefill.
    assert c.times[0] - max(a.times[-1], b.times[-1]) == pytest.approx(step_time_s(prof.step, 100, 0, prefill_pairs(0, 100)))


@pytest.mark.pure
def test_kv_capacity_limits_admission():
    prof = _instant_frontend()
    prof = dataclasses.replace(prof, engine=dataclasses.replace(prof.engine, kv_capacity_tokens=1500))
    eng, _ = _engine(prof)
    eng.submit(1000, max_tokens=5, ignore_eos=True, now_s=0.0)
    eng.submit(1000, max_tokens=5, ignore_eos=True, now_s=0.0)
    eng.advance(0.0)  # the first step: room for one prompt's KV
    assert (eng.running, eng.waiting) == (1, 1)
    eng.advance(math.inf)
    assert (eng.running, eng.waiting, eng.kv_used_tokens) == (0, 0, 0)


@pytest.mark.pure
def test_the_api_server_serves_tokens_and_requests_in_the_order_they_reach_it():
    prof = dataclasses.replace(lookup_profile("h100", "gpt-oss-20b"), frontend=Frontend(1.0, 0.5, 0.0))
    eng, _ = _engine(prof)
    first = Recorder()
    eng.submit(100, max_tokens=200, ignore_eos=True, sink=first, now_s=0.0)  # the engine sees it at 1.5 s
    eng.advance(1.6)
    eng.submit(100, max_tokens=5, ignore_eos=True, now_s=1.6)  # reaches the API server at 2.6 s
    eng.advance(math.inf)
    # the first request's tokens from steps that ended before 2.6 s were not held behind the second's work
    assert 1.6 < first.times[-1] < 2.6


@pytest.mark.pure
def test_the_servers_ttft_e2e_and_queue_time_start_at_its_engine_arrival():
    """As vLLM's gpt-oss path stamps them: after the API server's latency_s and request_s, not at the HTTP request."""
    prof = dataclasses.replace(lookup_profile("h100", "gpt-oss-20b"), frontend=Frontend(1.0, 0.5, 0.0))
    eng, _ = _engine(prof)
    alone = Recorder()
    eng.submit(100, max_tokens=5, ignore_eos=True, sink=alone, now_s=0.0)
    eng.advance(math.inf)
    latency = eng.latency
    assert latency.request_queue_time.sum == 0.0  # one request: nothing ahead of it in the engine's queue
    assert latency.time_to_first_token.sum == pytest.approx(alone.times[0] - 1.5)
    assert latency.e2e_request_latency.sum == pytest.approx(alone.times[-1] - 1.5)


@pytest.mark.pure
def test_queue_time_leaves_out_the_rest_of_the_step_a_request_reached_the_engine_during():
    """vLLM's engine core takes new requests in between steps (QUEUED): the running step's rest is in TTFT only."""
    eng, _ = _engine(_instant_frontend())
    first, second = Recorder(), Recorder()
    eng.submit(4000, max_tokens=2, ignore_eos=True, sink=first, now_s=0.0)
    eng.advance(0.001)
    eng.submit(100, max_tokens=2, ignore_eos=True, sink=second, now_s=0.001)
    eng.advance(0.001)
    assert eng.waiting == 0  # as vLLM's num_requests_waiting: not in the scheduler's queue before the step ends
    eng.advance(math.inf)
    assert first.times[0] > 0.01  # the second reached the engine early in the first's prefill step
    latency = eng.latency
    assert latency.request_queue_time.sum == 0.0  # each was taken into a step as soon as the engine took it in
    assert latency.time_to_first_token.sum == pytest.approx(first.times[0] + second.times[0] - 0.001)


@pytest.mark.pure
def test_itl_grows_with_running_count():
    prof = _instant_frontend()
    alone = _run(_engine(prof)[0], [100])[0].times
    gaps = [b - a for a, b in zip(alone, alone[1:])]
    # each gap is one decode step of one sequence attending its prompt and what it generated so far
    assert gaps == pytest.approx([step_time_s(prof.step, 1, 100 + i, 0) for i in range(19)])
    crowd = _run(_engine(prof)[0], [100] * 10)
    # The first of ten, early on: all ten are decoding.
    assert crowd[0].times[2] - crowd[0].times[1] == pytest.approx(step_time_s(prof.step, 10, 10 * 101, 0))
    assert crowd[0].times[2] - crowd[0].times[1] > gaps[1]


@pytest.mark.pure
def test_fixed_mode_exact_and_no_prefill_queue():
    eng, _ = _engine(fixed_ttft_s=0.05, fixed_itl_s=0.01)
    recs = _run(eng, [50000] * 5, max_tokens=30)
    for rec in recs:
        assert rec.times[0] == pytest.approx(0.05)
        assert [b - a for a, b in zip(rec.times, rec.times[1:])] == pytest.approx([0.01] * 29)


@pytest.mark.pure
def test_the_engine_keeps_vllms_request_histograms():
    eng, _ = _engine(fixed_ttft_s=0.05, fixed_itl_s=0.02, profile=_max_num_seqs(lookup_profile("h100", "gpt-oss-20b"), 2))
    _run(eng, [100] * 3, max_tokens=11)  # the third waits for a slot: 0.05 + 10 * 0.02 = 0.25 s
    h = eng.latency
    assert h.time_to_first_token.counts[h.time_to_first_token.bounds.index(0.06)] == 2  # 0.05 s: le=0.06
    assert h.time_to_first_token.sum == pytest.approx(0.05 + 0.05 + 0.30)
    assert sum(h.inter_token_latency.counts) == 30 and h.inter_token_latency.sum == pytest.approx(30 * 0.02)
    assert h.request_time_per_output_token.sum == pytest.approx(3 * 0.02)
    assert h.e2e_request_latency.sum == pytest.approx(0.25 + 0.25 + 0.50)
    assert h.request_queue_time.sum == pytest.approx(0.25) and sum(h.request_queue_time.counts) == 3


@pytest.mark.pure
def test_itl_per_seq_grows_a_fixed_gap_by_a_set_amount_per_running_sequence():
    alone = _run(_engine(fixed_ttft_s=0.0, fixed_itl_s=0.002, itl_per_seq_s=0.003)[0], [10], max_tokens=5)[0]
    assert [b - a for a, b in zip(alone.times, alone.times[1:])] == pytest.approx([0.005] * 4)
    crowd = _run(_engine(fixed_ttft_s=0.0, fixed_itl_s=0.002, itl_per_seq_s=0.003)[0], [10] * 8, max_tokens=5)
    assert crowd[0].times[1] - crowd[0].times[0] == pytest.approx(0.002 + 8 * 0.003)
    profile = _instant_frontend()
    modelled = _run(_engine(profile)[0], [100], max_tokens=3)[0]
    own_slope = _run(_engine(profile, itl_per_seq_s=0.01)[0], [100], max_tokens=3)[0]
    assert (own_slope.times[2] - own_slope.times[1]) - (modelled.times[2] - modelled.times[1]) == pytest.approx(0.01)


@pytest.mark.pure
def test_speedup_divides_all_durations():
    normal = _run(_engine()[0], [3000, 9000])
    fast = _run(_engine(speedup=40)[0], [3000, 9000])
    for n, f in zip(normal, fast):
        assert f.times == pytest.approx([t / 40 for t in n.times])
    fixed = _run(_engine(fixed_ttft_s=1.0, fixed_itl_s=0.5, speedup=10)[0], [10], max_tokens=3)[0]
    assert fixed.times == pytest.approx([0.1, 0.15, 0.2])


@pytest.mark.pure
def test_lateness_does_not_accumulate():
    eng, clk = _engine(fixed_ttft_s=0.0, fixed_itl_s=0.01)
    rec = Recorder()
    eng.submit(10, max_tokens=10, ignore_eos=True, sink=rec, now_s=0.0)
    for step in range(10):
        clk.t = step * 0.01 + 0.007  # every wake-up is 7 ms late
        eng.advance(clk.t)
    assert rec.times == pytest.approx([i * 0.01 for i in range(10)])


@pytest.mark.pure
def test_cancel_frees_slot_and_metrics():
    prof = _instant_frontend()
    prof = dataclasses.replace(prof, engine=dataclasses.replace(prof.engine, max_num_seqs=1))
    eng, _ = _engine(prof)
    a = eng.submit(100, max_tokens=50, ignore_eos=True, now_s=0.0)
    b = eng.submit(100, max_tokens=50, ignore_eos=True, now_s=0.0)
    eng.advance(0.0)
    assert eng.waiting == 1
    eng.cancel(a)
    eng.cancel(a)  # idempotent
    assert (eng.running, eng.waiting) == (0, 1)
    eng.advance(eng.next_due_s())  # the step in flight ends; the next takes b into the freed slot
    assert (eng.running, eng.waiting) == (1, 0)
    eng.advance(math.inf)
    assert b.state == DONE and b.generated == 50
    assert eng.request_success_total == {"stop": 0, "length": 1}
    assert eng.generation_tokens_total == 50 and eng.prompt_tokens_total == 100


@pytest.mark.pure
def test_length_model_deterministic_and_effort_ordered():
    assert sample_lengths("low", 3, 17) == sample_lengths("low", 3, 17)
    assert sample_lengths(None, 3, 17) == sample_lengths("medium", 3, 17) == sample_lengths("none", 3, 17)
    means = {e: statistics.mean(sample_lengths(e, 1, i)[0] for i in range(4000))
             for e in ("low", "medium", "high")}
    assert means["low"] == pytest.approx(150, rel=0.05)
    assert means["medium"] == pytest.approx(450, rel=0.05)
    assert means["high"] == pytest.approx(1600, rel=0.05)
    answers = statistics.mean(sample_lengths("low", 1, i)[1] for i in range(4000))
    assert answers == pytest.approx(350, rel=0.05)


@pytest.mark.pure
def test_plan_output():
    assert plan_output(100, 50, None, False) == (100, 50, "stop")
    assert plan_output(100, 50, 150, False) == (100, 50, "stop")
    assert plan_output(100, 50, 30, False) == (30, 0, "length")
    assert plan_output(100, 50, 120, False) == (100, 20, "length")
    assert plan_output(100, 50, 300, True) == (200, 100, "length")


@pytest.mark.pure
def test_fault_injection_deterministic():
    def fails(seed):
        eng, _ = _engine(seed=seed, fail_rate=0.3)
        return [eng.submit(10, now_s=0.0).fail for _ in range(400)]
    assert fails(5) == fails(5)
    assert 0.2 < sum(fails(5)) / 400 < 0.4


@pytest.mark.pure
def test_profile_lookup():
    p = lookup_profile("H100", "openai/gpt-oss-120b")
    assert p == lookup_profile("h100", "gpt-oss-120b")
    assert (p.served_model, p.engine.max_num_seqs, p.engine.max_num_batched_tokens) == ("openai/gpt-oss-120b", 1024, 8192)
    assert (p.kind, p.weights) == ("extrapolated", "mxfp4")
    with pytest.raises(ProfileError, match="does not fit on l4"):
        lookup_profile("l4", "gpt-oss-120b")
    with pytest.raises(ProfileError, match="a100, h100, h200, l4"):
        lookup_profile("tpu", "gpt-oss-20b")
    with pytest.raises(ValueError, match="gpt-oss-20b, gpt-oss-120b"):
        lookup_profile("h100", "llama")


# ---- a tiny blocking HTTP/1.1 client -----------------------------------------------------

class Response:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self.chunks: list[tuple[float, bytes]] = []  # (monotonic time completed, payload)
        self.sent_s = 0.0
        self.complete = False

    def json(self):
        return orjson.loads(self.body)

    def events(self) -> list:
        """SSE payloads in order ('[DONE]' kept as a string)."""
        out = []
        for _, payload in self.chunks:
            assert payload.startswith(b"data: ") and payload.endswith(b"\n\n"), payload
            data = payload[6:-2]
            out.append("[DONE]" if data == b"[DONE]" else orjson.loads(data))
        return out


class Client:
    """Keep-alive client on a plain socket; timestamps each chunk on arrival."""

    def __init__(self, base: str) -> None:
        u = urlsplit(base)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> float:
        data = self.sock.recv(65536)
        t = time.monotonic()
        if not data:
            raise EOFError
        self.buf += data
        return t

    def request(self, method: str, path: str, body=None, headers=None) -> Response:
        sent_s = self.send(method, path, body, headers)
        return self.read(sent_s)

    def send(self, method: str, path: str, body=None, headers=None) -> float:
        self.sock.sendall(self.encode(method, path, body, headers))
        return time.monotonic()

    @staticmethod
    def encode(method: str, path: str, body=None, headers=None) -> bytes:
        raw = orjson.dumps(body) if isinstance(body, (dict, list)) else (body or b"")
        head = f"{method} {path} HTTP/1.1\r\nhost: sim\r\ncontent-length: {len(raw)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        return head.encode() + b"\r\n" + raw

    def read(self, sent_s: float = 0.0) -> Response:
        r = Response()
        r.sent_s = sent_s
        try:
            while b"\r\n\r\n" not in self.buf:
                self._fill()
            end = self.buf.index(b"\r\n\r\n")
            lines = self.buf[:end].decode().split("\r\n")
            self.buf = self.buf[end + 4:]
            r.status = int(lines[0].split()[1])
            r.headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            if r.headers.get("transfer-encoding") == "chunked":
                self._read_chunks(r)
            else:
                n = int(r.headers.get("content-length", "0"))
                while len(self.buf) < n:
                    self._fill()
                r.body, self.buf = bytes(self.buf[:n]), self.buf[n:]
            r.complete = True
        except EOFError:
            pass
        return r

    def _read_chunks(self, r: Response) -> None:
        # Walk the buffer with an offset: re-slicing per chunk is quadratic on long streams.
        t, pos = time.monotonic(), 0
        while True:
            while self.buf.find(b"\r\n", pos) < 0:
                t = self._fill()
            size_end = self.buf.index(b"\r\n", pos)
            size = int(self.buf[pos:size_end], 16)
            while len(self.buf) < size_end + 2 + size + 2:
                t = self._fill()
            payload = bytes(self.buf[size_end + 2:size_end + 2 + size])
            pos = size_end + 2 + size + 2
            if size == 0:
                self.buf = self.buf[pos:]
                r.body = b"".join(p for _, p in r.chunks)
                return
            r.chunks.append((t, payload))


def _stop_clean(proc) -> None:
    """Stop a simulator; it must exit 0 with nothing (no asyncio warnings) on stderr."""
    assert stop_sim(proc) == 0
    assert proc.sim_stderr == ""


def _chat(**kw) -> dict:
    return {"model": MODEL, "messages": USER, **kw}


def _token_chunks(events: list) -> list[dict]:
    return [e for e in events if isinstance(e, dict) and e["choices"] and
            ("reasoning" in e["choices"][0]["delta"] or
             e["choices"][0]["delta"].get("content") not in (None, ""))]


def _token_times(r: Response) -> list[float]:
    """Arrival time of each token-bearing chunk."""
    return [t for (t, _), e in zip(r.chunks, r.events()) if _token_chunks([e])]


def _metric(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}model_name=\"{MODEL}\"\}} (\S+)$", text, re.M)
    assert m, (name, text)
    return float(m.group(1))


# ---- simulator processes -----------------------------------------------------------------

@pytest.fixture(scope="module")
def sim():
    proc, base = start_sim(["--speedup", "1000", "--seed", "7"])
    yield base
    _stop_clean(proc)


@pytest.fixture
def client(sim):
    c = Client(sim)
    yield c
    c.close()


@pytest.mark.integration
def test_stream_chunk_shapes_and_counts(client):
    r = client.request("POST", "/v1/chat/completions",
                       _chat(stream=True, reasoning_effort="low", stream_options={"include_usage": True}),
                       {"X-Request-Id": "abc-1"})
    assert r.status == 200 and r.complete
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    ev = r.events()
    role = ev[0]
    assert role == {"id": "chatcmpl-abc-1", "object": "chat.completion.chunk", "created": role["created"],
                    "model": MODEL, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                 "logprobs": None, "finish_reason": None}]}
    assert ev[-1] == "[DONE]"
    usage_chunk = ev[-2]
    assert usage_chunk["choices"] == [] and usage_chunk["id"] == "chatcmpl-abc-1"
    tokens = ev[1:-2]
    assert tokens == _token_chunks(ev)
    kinds = [next(iter(e["choices"][0]["delta"])) for e in tokens]
    n_reason = kinds.count("reasoning")
    assert kinds == ["reasoning"] * n_reason + ["content"] * (len(kinds) - n_reason)  # reasoning first
    assert n_reason > 0 and len(kinds) > n_reason
    assert [e["choices"][0]["finish_reason"] for e in tokens] == [None] * (len(tokens) - 1) + ["stop"]
    assert all("usage" not in e for e in tokens)
    u = usage_chunk["usage"]
    assert u["completion_tokens_details"]["reasoning_tokens"] == n_reason
    assert u["completion_tokens"] == len(tokens)
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    cached = u["prompt_tokens_details"]["cached_tokens"]  # as vLLM with --enable-prompt-tokens-details
    assert cached % 16 == 0 and 0 <= cached < u["prompt_tokens"]  # whole blocks of the prefix cache, never the last token
    # Keep-alive: the same socket serves the next request.
    assert client.request("GET", "/health").status == 200


@pytest.mark.integration
def test_continuous_usage_stats(client):
    r = client.request("POST", "/v1/chat/completions", _chat(
        stream=True, max_tokens=12, stream_options={"include_usage": True, "continuous_usage_stats": True}))
    ev = r.events()
    with_choices = [e for e in ev if isinstance(e, dict) and e["choices"]]
    assert [e["usage"]["completion_tokens"] for e in with_choices] == list(range(13))
    p = with_choices[0]["usage"]["prompt_tokens"]
    assert all(e["usage"]["total_tokens"] == p + e["usage"]["completion_tokens"] for e in with_choices)
    assert ev[-2]["usage"]["completion_tokens"] == 12


@pytest.mark.integration
def test_effort_orders_reasoning_length(client):
    means = {}
    for effort in ("low", "medium", "high"):
        counts = [client.request("POST", "/v1/chat/completions", _chat(reasoning_effort=effort))
                  .json()["usage"]["completion_tokens_details"]["reasoning_tokens"] for _ in range(10)]
        means[effort] = statistics.mean(counts)
    assert means["low"] < means["medium"] < means["high"], means


@pytest.mark.integration
def test_max_tokens_small_stops_inside_reasoning(client):
    r = client.request("POST", "/v1/chat/completions", _chat(stream=True, max_tokens=5))
    tokens = _token_chunks(r.events())
    assert len(tokens) == 5
    assert all("reasoning" in e["choices"][0]["delta"] for e in tokens)
    assert tokens[-1]["choices"][0]["finish_reason"] == "length"
    body = client.request("POST", "/v1/chat/completions", _chat(max_completion_tokens=5)).json()
    assert body["choices"][0]["message"]["content"] is None
    assert body["choices"][0]["finish_reason"] == "length"


@pytest.mark.integration
def test_ignore_eos_gives_exactly_max_tokens(client):
    r = client.request("POST", "/v1/chat/completions", _chat(
        stream=True, max_tokens=700, ignore_eos=True, stream_options={"include_usage": True}))
    ev = r.events()
    assert len(_token_chunks(ev)) == 700 == ev[-2]["usage"]["completion_tokens"]
    assert 0 < ev[-2]["usage"]["completion_tokens_details"]["reasoning_tokens"] < 700


@pytest.mark.integration
def test_non_stream_shape(client):
    r = client.request("POST", "/v1/chat/completions", _chat(), {"X-Request-Id": "ns-1"})
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    b = r.json()
    assert (b["id"], b["object"], b["model"]) == ("chatcmpl-ns-1", "chat.completion", MODEL)
    (choice,) = b["choices"]
    msg = choice["message"]
    assert msg["role"] == "assistant" and msg["tool_calls"] == []
    assert msg["reasoning"] == msg["reasoning_content"] and msg["reasoning"]
    assert choice["finish_reason"] == "stop" and choice["logprobs"] is None
    u = b["usage"]
    assert len(msg["reasoning"].split()) == u["completion_tokens_details"]["reasoning_tokens"]
    assert len(msg["reasoning"].split()) + len(msg["content"].split()) == u["completion_tokens"]


@pytest.mark.integration
def test_metrics_parse_and_move(client):
    before = client.request("GET", "/metrics").body.decode()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total",
                 "vllm:prefix_cache_hits_total", "vllm:request_success_total"):
        assert f"# HELP {name} " in before and f"# TYPE {name} " in before
    r = client.request("POST", "/v1/chat/completions", _chat(max_tokens=40, ignore_eos=True))
    prompt = r.json()["usage"]["prompt_tokens"]
    after = client.request("GET", "/metrics").body.decode()
    for text in (before, after):
        for line in text.splitlines():
            assert line.startswith("#") or re.fullmatch(r"((vllm|llmload_sim):\w+|http_requests_total)\{[^}]*\} [0-9.e+-]+", line), line
    assert _metric(after, "vllm:generation_tokens_total") - _metric(before, "vllm:generation_tokens_total") == 40
    assert _metric(after, "vllm:prompt_tokens_total") - _metric(before, "vllm:prompt_tokens_total") == prompt
    key = ("vllm:request_success_total", 'finished_reason="length",')
    assert _metric(after, *key) - _metric(before, *key) == 1
    assert _metric(after, "vllm:num_requests_running") == 0
    assert 0 <= _metric(after, "vllm:kv_cache_usage_perc") <= 1
    chat_2xx = re.compile(r'^http_requests_total\{handler="/v1/chat/completions",method="POST",status="2xx"\} (\S+)$', re.M)
    received = [float(m.group(1)) if (m := chat_2xx.search(text)) else 0.0 for text in (before, after)]
    assert received[1] - received[0] == 1  # vLLM's own count of the requests it answered


@pytest.mark.integration
def test_simple_routes(client):
    assert client.request("GET", "/version").json() == {"version": "0.32.0-sim"}
    models = client.request("GET", "/v1/models").json()
    assert models["object"] == "list"
    (card,) = models["data"]
    assert (card["id"], card["root"], card["owned_by"], card["max_model_len"]) == (MODEL, MODEL, "vllm", 131072)
    h = client.request("GET", "/health")
    assert (h.status, h.body) == (200, b"")


@pytest.mark.integration
def test_tokenize(client):
    text = "Summarise the support thread below and draft a reply."
    messages = [{"role": "user", "content": text}]
    r = client.request("POST", "/tokenize", {"model": MODEL, "messages": messages})
    assert r.json()["count"] == prompt_tokens(messages) == len(r.json()["tokens"]) and r.json()["max_model_len"] == 131072
    assert r.json()["tokens"] == harmony_encoding().encode(harmony_text(messages), allowed_special="all")
    assert client.request("POST", "/tokenize", {"model": MODEL, "prompt": text}).json()["count"] == text_tokens(text)


@pytest.mark.integration
def test_errors(client):
    r = client.request("POST", "/v1/chat/completions", {"model": "nope", "messages": USER})
    assert r.status == 404
    assert r.json() == {"error": {"message": "The model `nope` does not exist.", "type": "NotFoundError",
                                  "param": None, "code": 404}}
    r = client.request("POST", "/v1/chat/completions", b"{not json")
    assert r.status == 400 and r.json()["error"]["code"] == 400
    r = client.request("POST", "/v1/chat/completions", _chat(reasoning_effort="extreme"))
    assert r.status == 400 and r.json()["error"]["type"] == "BadRequestError"
    assert client.request("GET", "/nowhere").status == 404
    assert client.request("GET", "/v1/chat/completions").status == 405
    assert client.request("GET", "/health").status == 200  # connection still usable


@pytest.mark.integration
def test_pipelined_requests_and_connection_close(client):
    two = (Client.encode("POST", "/v1/chat/completions", _chat(stream=True, max_tokens=3))
           + Client.encode("GET", "/version"))
    client.sock.sendall(two)
    first, second = client.read(), client.read()
    assert len(_token_chunks(first.events())) == 3 and first.complete
    assert second.json() == {"version": "0.32.0-sim"}
    last = client.request("GET", "/health", headers={"Connection": "close"})
    assert last.status == 200 and last.headers["connection"] == "close"
    with pytest.raises(EOFError):
        client._fill()


@pytest.mark.integration
def test_slow_reader_gets_every_token_in_order(sim, client):
    # ~5 MB of chunks overflows the socket buffers, so the server must pause and resume.
    pauses_before = _metric(Client(sim).request("GET", "/metrics").body.decode(), "llmload_sim:stream_pauses_total")
    client.send("POST", "/v1/chat/completions", _chat(stream=True, max_tokens=20000, ignore_eos=True))
    time.sleep(0.5)
    r = client.read()
    assert r.complete
    pauses = _metric(Client(sim).request("GET", "/metrics").body.decode(), "llmload_sim:stream_pauses_total")
    assert pauses > pauses_before  # backpressure fired: the test read late enough to fill the buffers
    tokens = _token_chunks(r.events())
    assert len(tokens) == 20000
    assert [t["choices"][0]["finish_reason"] for t in tokens[-2:]] == [None, "length"]
    texts = [next(iter(t["choices"][0]["delta"].values())) for t in tokens]
    n_reason = sum("reasoning" in t["choices"][0]["delta"] for t in tokens)
    from llmload.sim.tokens import WORDS

    def word(i):  # the target's i-th token of reasoning or of the answer
        return WORDS[i % len(WORDS)] + " "

    expected = [word(i) for i in range(n_reason)] + [word(i) for i in range(20000 - n_reason)]
    assert texts == expected


@pytest.mark.integration
def test_client_disconnect_stops_generation(sim, client):
    before = _metric(client.request("GET", "/metrics").body.decode(), "vllm:generation_tokens_total")
    c = Client(sim)
    c.send("POST", "/v1/chat/completions", _chat(stream=True, max_tokens=100000, ignore_eos=True))
    while b'"reasoning"' not in c.buf:
        c._fill()
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
    c.close()
    time.sleep(0.2)
    text = client.request("GET", "/metrics").body.decode()
    assert _metric(text, "vllm:num_requests_running") == 0
    assert _metric(text, "vllm:generation_tokens_total") - before < 100000
    assert _metric(text, "vllm:kv_cache_usage_perc") == 0


@pytest.mark.integration
def test_openai_sdk_parses_responses(sim):
    openai = pytest.importorskip("openai")
    c = openai.OpenAI(base_url=sim + "/v1", api_key="x", max_retries=0)
    stream = c.chat.completions.create(model=MODEL, messages=USER, max_tokens=50, stream=True,
                                       stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].usage.completion_tokens == 50
    assert chunks[-2].choices[0].finish_reason == "length"
    full = c.chat.completions.create(model=MODEL, messages=USER, max_tokens=2000)
    assert full.choices[0].finish_reason == "stop" and full.choices[0].message.content


@pytest.mark.integration
def test_fail_rate_one_gives_500():
    proc, base = start_sim(["--fail-rate", "1", "--speedup", "1000"])
    try:
        c = Client(base)
        for stream in (True, False):
            r = c.request("POST", "/v1/chat/completions", _chat(stream=stream))
            assert r.status == 500
            assert r.json()["error"]["type"] == "InternalServerError" and r.json()["error"]["code"] == 500
        c.close()
    finally:
        _stop_clean(proc)


@pytest.mark.integration
def test_disconnect_rate_one_closes_mid_stream():
    proc, base = start_sim(["--disconnect-rate", "1", "--speedup", "1000"])
    try:
        c = Client(base)
        r = c.request("POST", "/v1/chat/completions", _chat(stream=True, max_tokens=40, ignore_eos=True))
        assert r.status == 200 and not r.complete
        assert len(_token_chunks(r.events())) == 20
        c.close()
        time.sleep(0.05)
        c = Client(base)
        text = c.request("GET", "/metrics").body.decode()
        assert _metric(text, "vllm:num_requests_running") == 0
        c.close()
    finally:
        _stop_clean(proc)


@pytest.mark.integration
def test_fixed_timing_and_send_log(tmp_path):
    log = tmp_path / "sent.jsonl"
    proc, base = start_sim(["--fixed-ttft-ms", "50", "--fixed-itl-ms", "10", "--send-log", str(log)])
    ttfts, itls, recv = [], [], {}
    try:
        c = Client(base)
        for i in range(5):
            r = c.request("POST", "/v1/chat/completions",
                          _chat(stream=True, max_tokens=30, ignore_eos=True), {"X-Request-Id": f"t{i}"})
            times = _token_times(r)
            assert len(times) == 30
            ttfts.append(times[0] - r.sent_s)
            itls += [b - a for a, b in zip(times, times[1:])]
            recv[f"t{i}"] = times
        c.close()
    finally:
        _stop_clean(proc)  # SIGTERM flushes the send log
    # Medians within 5 ms: the pacing is the sim's, but a loaded 2-core machine (load average 8+) delays a wake-up by a
    # few ms now and then; the send-log check below is the exact one.
    assert statistics.median(ttfts) == pytest.approx(0.050, abs=0.005)
    assert statistics.median(itls) == pytest.approx(0.010, abs=0.005)
    lines = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    assert sorted(x["request_id"] for x in lines) == sorted(recv)
    for x in lines:
        sent, got = x["sent_s"], recv[x["request_id"]]
        assert len(sent) == 30
        delays = [g - s for s, g in zip(sent, got)]
        assert min(delays) > 0 and statistics.median(delays) < 0.002  # same CLOCK_MONOTONIC


# ---- command line -------------------------------------------------------------------------

BAD_FLAGS = [
    ["--gpu", "tpu"], ["--gpu", "l4", "--model", "gpt-oss-120b"], ["--model", "llama-3"],
    ["--host", "0.0.0.0"], ["--bogus"], ["--speedup", "0"], ["--fail-rate", "1.5"],
    ["--port", "notaport"],
]


@pytest.mark.pure
@pytest.mark.parametrize("flags", BAD_FLAGS)
def test_bad_flags_one_line_exit_2(in_process, flags):
    from llmload.sim.__main__ import main

    _assert_one_line_exit_2(in_process(main, *flags))


@pytest.mark.integration
def test_bad_flags_as_a_process_one_line_exit_2():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    _assert_one_line_exit_2(subprocess.run([sys.executable, "-m", "llmload.sim", *BAD_FLAGS[0]], capture_output=True,
                                           text=True, env=env, timeout=20))


def _assert_one_line_exit_2(p):
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in p.stderr


@pytest.mark.integration
def test_serve_sim_plays_a_profile_by_name_and_says_which():
    proc, base = start_sim(["--target-profile", "h200-gpt-oss-20b-bf16", "--speedup", "20"])
    try:
        c = Client(base)
        identity = c.request("GET", "/llmload/sim").json()
        models = c.request("GET", "/v1/models").json()
        c.close()
    finally:
        stop_sim(proc)
    assert (identity["gpu_profile"], identity["profile"], identity["profile_kind"]) == ("h200", "h200-gpt-oss-20b-bf16", "measured")
    assert models["data"][0]["id"] == "openai/gpt-oss-20b" and identity["speedup"] == 20.0


@pytest.mark.integration
def test_start_sim_reports_early_exit():
    with pytest.raises(ServerError, match="does not fit on l4"):
        start_sim(["--gpu", "l4", "--model", "openai/gpt-oss-120b"])


@pytest.mark.integration
def test_the_built_in_target_loads_no_numpy():
    code = "import sys, llmload.sim, llmload.sim.__main__; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.pure
def test_queue_time_ends_when_the_step_scheduler_takes_a_request_in():
    """vLLM's request_queue_time under the step model: the third request waits for a slot (max_num_seqs 2)."""
    eng, _ = _engine(_max_num_seqs(_instant_frontend(), 2))
    a, b, c = _run(eng, [100, 100, 100])
    queue = eng.latency.request_queue_time
    assert sum(queue.counts) == 3
    assert queue.sum == pytest.approx(max(a.times[-1], b.times[-1]), rel=0.05)  # only c waited: until a slot freed
