"""Shared prefixes (PREFIX_TOKENS, PREFIX_GROUPS) and the one-token words they are made of: exact counts."""

import random

import pytest

from llmload.promptsets.catalog import Prompt, load_prompt_set
from llmload.promptsets.prefixes import PREFIX_GROUP, shared_prefixes, with_shared_prefixes
from llmload.promptsets.tokens import harmony_encoding, harmony_text, message_tokens, prompt_tokens, text_tokens
from llmload.promptsets.wordtokens import word_tokens, word_text

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


@pytest.mark.parametrize("count", [1, 2, 17, 512, 3000])
def test_a_text_of_n_words_is_n_tokens_and_so_is_every_leading_run_and_every_join(count):
    rng = random.Random(count)
    text = word_text(rng, count)
    assert text_tokens(text) == count
    words = harmony_encoding().encode_ordinary(text)
    cut = harmony_encoding().decode(words[: count // 2])
    assert text_tokens(cut) == count // 2
    assert text_tokens(text + word_text(rng, 5) + text) == 2 * count + 5


def test_the_words_are_one_token_each_and_many():
    words = word_tokens()
    assert len(words) > 20_000 and all(w.startswith(" ") and w[1:].isalpha() for w in words)
    assert all(text_tokens(w) == 1 for w in random.Random(0).sample(words, 2000))


def test_prefixes_are_exactly_n_tokens_distinct_and_depend_on_the_seed():
    prefixes = shared_prefixes(1000, 3, seed=7)
    assert [text_tokens(p) for p in prefixes] == [1000] * 3
    assert len(set(prefixes)) == 3 and len({p.split()[0] for p in prefixes}) == 3  # they differ from the first word
    assert shared_prefixes(1000, 3, seed=7) == prefixes and shared_prefixes(1000, 3, seed=8) != prefixes


def test_prompts_get_prefixes_round_robin_and_their_counts_grow_exactly():
    prompts = tuple(Prompt(f"p{i}", [{"role": "user", "content": f"question {i}?"}], meta={"prompt_tokens": prompt_tokens(
        [{"role": "user", "content": f"question {i}?"}])}) for i in range(5))
    prefixed = with_shared_prefixes(prompts, 64, 2, seed=0)
    assert [p.meta[PREFIX_GROUP] for p in prefixed] == [0, 1, 0, 1, 0]
    assert prefixed[0].messages[0] == prefixed[2].messages[0] != prefixed[1].messages[0]
    for p in prefixed:
        system, *rest = p.messages
        assert system["role"] == "system" and text_tokens(system["content"]) == 64 and rest == prompts[int(p.id[1:])].messages
        assert p.meta["prompt_tokens"] == prompt_tokens(p.messages)  # the exact count, as vLLM renders it
        assert len(harmony_encoding().encode(harmony_text(p.messages), allowed_special="all")) == p.meta["prompt_tokens"]
    assert prefixed[0].meta["prompt_tokens"] - prompts[0].meta["prompt_tokens"] == message_tokens(prefixed[0].messages[0])


def test_every_prompts_source_takes_a_prefix_the_builtin_set_with_its_own_system_message_too():
    builtin = load_prompt_set("builtin")
    prefixed = with_shared_prefixes(builtin, 10, 1, seed=0)
    assert len(prefixed) == len(builtin) == 12 and builtin[0].messages[0]["role"] == "system"
    assert all(p.messages[0]["role"] == "system" and text_tokens(p.messages[0]["content"]) == 10 for p in prefixed)
    assert all(p.messages[1:] == b.messages for p, b in zip(prefixed, builtin))  # its own system message follows
    assert "prompt_tokens" not in prefixed[0].meta  # a count the set never had is not made up
    randoms = with_shared_prefixes(load_prompt_set("random:20:5:3"), 10, 1, seed=0)
    assert len(randoms) == 3
    assert [p.meta["prompt_tokens"] for p in randoms] == [prompt_tokens(p.messages) for p in randoms]
