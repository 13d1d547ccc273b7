"""ShareGPT and random workloads, as vLLM's bench builds them."""

import json

import pytest

from llmload.promptsets.workloads import random_prompts, sharegpt_prompts
from llmload.errors import PromptSetError
from llmload.promptsets import catalog
from llmload.promptsets.catalog import load_prompt_set
from llmload.promptsets.tokens import text_tokens

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

LONG = "word " * 1100


def conversation(*turns):
    return {"id": "x", "conversations": [{"from": "human" if i % 2 == 0 else "gpt", "value": t} for i, t in enumerate(turns)]}


def test_sharegpt_filters_like_vllm(tmp_path):
    path = tmp_path / "sharegpt.json"
    keep = conversation("Explain how a heat pump works in winter.", "A heat pump moves heat from outside air into the house.")
    path.write_text(json.dumps([
        keep,
        conversation("Only one turn here, no answer"),
        conversation("Hi", "A reply that is long enough to count."),  # prompt under 4 tokens
        conversation("What is the capital of France, please?", "Paris"),  # output under 4 tokens
        conversation(LONG, "Fine, that is a long question indeed."),  # prompt over 1,024 tokens
        conversation("Write a story about a lighthouse keeper.", "Once " * 2100),  # pair over 2,048 tokens
    ]))
    lines = sharegpt_prompts(path, count=10)
    assert [line["messages"][0]["content"] for line in lines] == [keep["conversations"][0]["value"]]
    assert lines[0]["request"] == {"max_tokens": text_tokens(keep["conversations"][1]["value"])}


def test_sharegpt_count_and_seed(tmp_path):
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([conversation(f"Question number {i} about databases?", f"Answer number {i} about indexes.") for i in range(20)]))
    a, b = sharegpt_prompts(path, 5, seed=1), sharegpt_prompts(path, 5, seed=2)
    assert len(a) == 5 and [x["id"] for x in a] != [x["id"] for x in b]
    assert len(load_prompt_set(f"sharegpt:{path}:7")) == 7


@pytest.mark.parametrize("content,message", [
    ("{not json", "not JSON"),
    ('{"a": 1}', "expected a JSON list"),
    ('[{"conversations": "nope"}]', "entry 0 has no \"conversations\" list"),
])
def test_malformed_sharegpt_is_one_line_and_exit_2(cli, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PromptSetError, match=message):
        sharegpt_prompts(path)
    done = cli("load", f"PROMPTS=sharegpt:{path}", "DURATION=1s", f"OUT={tmp_path / 'run'}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("input_len", [1, 128, 2000])
def test_random_prompts_have_exactly_in_tokens(input_len):
    lines = random_prompts(input_len, 7, count=5, seed=3)
    assert len(lines) == 5  # the checks below hold for every line: there must be the five asked for
    assert all(text_tokens(line["messages"][0]["content"]) == input_len for line in lines)
    assert all(line["request"] == {"max_tokens": 7, "ignore_eos": True} for line in lines)
    assert lines == random_prompts(input_len, 7, count=5, seed=3)


def test_prompts_spec_errors(tmp_path, monkeypatch):
    with pytest.raises(PromptSetError, match="random:IN:OUT"):
        load_prompt_set("random:12")
    monkeypatch.setattr(catalog, "GENERATED_DIR", tmp_path)  # a checkout where `make prompts` has not run
    with pytest.raises(PromptSetError, match="run `make prompts` first"):
        load_prompt_set("8k")
