"""TRACE: Mooncake JSONL and Azure CSV traces read, their prompts built exactly, and bad traces named by file and line."""

import subprocess
import sys

import pytest

from conftest import REPO
from llmload.errors import PromptSetError
from llmload.loadtest.arrivals import Replay
from llmload.promptsets.tokens import prompt_tokens, text_tokens
from llmload.promptsets.traces import BLOCK_TOKENS, read_trace, trace_prompts

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

SAMPLES = REPO / "traces"
MOONCAKE = """\
{"timestamp": 1000, "input_length": 700, "output_length": 20, "hash_ids": [1, 2]}
{"timestamp": 1500, "input_length": 1100, "output_length": 0, "hash_ids": [1, 2, 3]}

{"timestamp": 1500, "input_length": 300, "output_length": 5, "hash_ids": [1]}
{"timestamp": 900, "input_length": 40, "output_length": 7}
{"timestamp": 2000, "input_length": 1200, "output_length": 9, "hash_ids": [4]}
"""
AZURE = """\
TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.4903210,396,109
2023-11-16 18:15:46.1805900,10,3
"""


@pytest.fixture
def mooncake(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text(MOONCAKE)
    return path


def test_mooncake_rows_in_time_order_relative_to_the_first_request(mooncake):
    trace = read_trace(mooncake)
    assert trace.format == "mooncake"
    assert [(r.line, r.offset_s) for r in trace.rows] == [(5, 0.0), (1, 0.1), (2, 0.6), (4, 0.6), (6, 1.1)]
    assert trace.rows[1].hash_ids == (1, 2) and trace.rows[0].hash_ids == ()
    assert [r.line for r in read_trace(mooncake, limit=2).rows] == [1, 2]  # TRACE_LIMIT: the file's first rows


def test_azure_rows_and_their_timestamps(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text(AZURE)
    trace = read_trace(path)
    assert trace.format == "azure"
    assert [(r.line, r.input_tokens, r.output_tokens) for r in trace.rows] == [(4, 10, 3), (2, 374, 44), (3, 396, 109)]
    assert [r.offset_s for r in trace.rows] == pytest.approx([0.0, 0.5, 4.30973])


def test_each_prompt_is_exactly_its_input_length_and_shared_hash_ids_share_text(mooncake):
    trace = read_trace(mooncake)
    prompts = dict(zip((r.line for r in trace.rows), trace_prompts(trace, seed=3)))
    for row in trace.rows:
        prompt = prompts[row.line]
        (message,) = prompt.messages
        assert text_tokens(message["content"]) == row.input_tokens
        assert prompt.meta["prompt_tokens"] == prompt_tokens(prompt.messages)
        assert prompt.request == {"max_tokens": max(1, row.output_tokens)}  # at least 1, as servers ask
        assert prompt.id == f"trace-{row.line}"
    first, second, partial = (prompts[n].messages[0]["content"] for n in (1, 2, 4))
    assert second.startswith(first)  # [1, 2] then [1, 2, 3]: its first 700 tokens are the same text
    assert first.startswith(partial)  # block 1's first 300 tokens
    own = prompts[5].messages[0]["content"]
    assert not first.startswith(own[:40]) and text_tokens(own) == 40  # no hash ids: its own text
    beyond = prompts[6].messages[0]["content"]  # one block, 1,200 tokens: the rest is its own
    assert text_tokens(beyond) == 1200 and not beyond.startswith(first[:BLOCK_TOKENS])
    assert trace_prompts(trace, seed=3) == tuple(prompts[r.line] for r in trace.rows)  # the same seed, the same text
    assert trace_prompts(trace, seed=4)[1].messages != prompts[1].messages


def test_a_replay_is_the_traces_times_faster():
    assert list(Replay((0.0, 0.5, 2.0), speed=4).offsets_s(seed=9)) == [0.0, 0.125, 0.5]


def test_the_shipped_samples_replay_and_the_script_writes_them_again(tmp_path):
    for name, kind in (("sample.mooncake.jsonl", "mooncake"), ("sample.azure.csv", "azure")):
        trace = read_trace(SAMPLES / name)
        assert trace.format == kind and len(trace.rows) == 200
    shared = [r for r in read_trace(SAMPLES / "sample.mooncake.jsonl").rows if r.hash_ids and r.hash_ids[0] in (0, 1, 3, 4)]
    assert len(shared) > 50  # most start with one of the shared system blocks
    script = SAMPLES / "make_samples.py"
    sys.path.insert(0, str(SAMPLES))
    try:
        import make_samples
    finally:
        sys.path.remove(str(SAMPLES))
    again = make_samples.write_samples(tmp_path, 200, 4.0, 0, 8)
    assert [p.read_bytes() for p in again] == [(SAMPLES / p.name).read_bytes() for p in again], f"rerun {script}"


@pytest.mark.parametrize("text,message", [
    ('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": 5\n', ":2: not JSON"),
    ('{"timestamp": 0, "input_length": 5}\n', ":1: a Mooncake row needs timestamp, input_length and output_length; output_length is missing"),
    ('{"timestamp": 0, "input_length": -5, "output_length": 1}\n', ":1: input_length must be a whole number of 0 or more, not -5"),
    ('{"timestamp": "soon", "input_length": 5, "output_length": 1}\n', ":1: timestamp must be a number of milliseconds"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, "a"]}\n', ":1: hash_ids must be a list of whole numbers"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,12,x\n", ":2: ContextTokens and GeneratedTokens must be whole numbers"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,12,3\n", ":2: TIMESTAMP 'yesterday' is not a date and time"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,12\n", ":2: 2 values, the header names 3"),
    ("time,prompt,answer\n1,2,3\n", ": unknown trace format: neither Mooncake JSONL"),
    ("", ": unknown trace format"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n", ": holds no requests"),
])
def test_a_malformed_trace_is_one_line_naming_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.trace"
    path.write_text(text)
    with pytest.raises(PromptSetError) as caught:
        read_trace(path)
    assert str(caught.value).startswith(f"TRACE={path}{message}")


def test_a_missing_trace_is_named(tmp_path):
    with pytest.raises(PromptSetError, match=r"^TRACE=.*nowhere.jsonl: no such file$"):
        read_trace(tmp_path / "nowhere.jsonl")
    with pytest.raises(PromptSetError, match="is a folder"):
        read_trace(tmp_path)
