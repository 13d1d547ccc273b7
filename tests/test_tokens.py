"""Prompt token counts against an independent render: openai-harmony, the library vLLM uses for gpt-oss."""

import sys

import pytest

from llmload.errors import TokenizerDataError
from llmload.promptsets.tokens import harmony_encoding, harmony_text, o200k_base_file, prompt_tokens, text_tokens

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

MESSAGES = [
    [{"role": "user", "content": "Hello there, summarise this."}],
    [{"role": "user", "content": "次の問い合わせを三行で要約してください。\n\nお客様: 商品が届きません。"}],
    [{"role": "user", "content": ""}],
    [{"role": "user", "content": "first"}, {"role": "assistant", "content": "reply"}, {"role": "user", "content": "  spaces\n\n\ttabs "}],
    # a system message (vLLM: developer instructions), an empty answer (left out), a second system message
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a"}, {"role": "assistant", "content": ""},
     {"role": "user", "content": "b"}, {"role": "system", "content": "\n leading space"}, {"role": "user", "content": "c"}],
]


def _as_vllm_renders(h, message):
    """vLLM's harmony_utils.parse_chat_input_to_harmony_message, for the messages the suite sends."""
    role, content = message["role"], message["content"]
    if role in ("system", "developer"):
        return [h.Message.from_role_and_content(h.Role.DEVELOPER, h.DeveloperContent.new().with_instructions(content))]
    if role == "assistant":
        return [h.Message.from_role_and_content(h.Role.ASSISTANT, content).with_channel("final")] if content else []
    return [h.Message.from_role_and_content(h.Role(role), content)]


@pytest.fixture(scope="module")
def harmony():
    with pytest.MonkeyPatch.context() as patch:  # restored after the module's tests
        patch.setenv("TIKTOKEN_ENCODINGS_BASE", str(o200k_base_file().parent))
        import openai_harmony as h

        yield h, h.load_harmony_encoding(h.HarmonyEncodingName.HARMONY_GPT_OSS)


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
@pytest.mark.parametrize("messages", MESSAGES)
def test_count_equals_openai_harmony_render(harmony, messages, effort):
    h, encoding = harmony
    system = h.SystemContent.new().with_reasoning_effort(getattr(h.ReasoningEffort, effort.upper())).with_conversation_start_date("2026-12-02")
    conversation = h.Conversation.from_messages(
        [h.Message.from_role_and_content(h.Role.SYSTEM, system)]
        + [rendered for m in messages for rendered in _as_vllm_renders(h, m)]
    )
    expected = encoding.render_conversation_for_completion(conversation, h.Role.ASSISTANT)
    assert prompt_tokens(messages, effort, "2026-12-02") == len(expected)
    assert harmony_encoding().encode(harmony_text(messages, effort, "2026-12-02"), allowed_special="all") == list(expected)


def test_effort_and_date_do_not_change_counts():
    counts = {prompt_tokens(MESSAGES[1], effort, date) for effort in ("low", "medium", "high", "none") for date in ("2025-01-01", "2026-12-31")}
    assert len(counts) == 1


def test_plain_text_counts():
    assert text_tokens("Hello world") == 2
    assert text_tokens("") == 0


def test_missing_tokenizer_data_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # not installed
    monkeypatch.setenv("LLMLOAD_CACHE", str(tmp_path))  # nothing decompressed yet
    with pytest.raises(TokenizerDataError, match=r"^o200k_base data not found") as caught:
        o200k_base_file()
    assert "nothing is downloaded" in str(caught.value)


def test_the_encoding_is_tiktokens_own_o200k_harmony(monkeypatch):
    import tiktoken_ext.openai_public as public

    from llmload.promptsets import o200k_harmony

    # tiktoken's registered constructor, handed the local ranks where it would fetch them (test only).
    ranks = harmony_encoding()._mergeable_ranks
    monkeypatch.setattr(public, "load_tiktoken_bpe", lambda *_args, **_kwargs: ranks)
    expected = public.o200k_harmony()
    assert o200k_harmony.PATTERN == expected["pat_str"]
    assert o200k_harmony.SPECIAL_TOKENS == expected["special_tokens"]
    assert harmony_encoding().name == expected["name"] and harmony_encoding().n_vocab == 201088
