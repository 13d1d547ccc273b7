"""Conversations: the history each turn sends, the follow-up set, ShareGPT's own turns, TURNS and THINK_TIME."""

import json
import random
import statistics

import pytest

from llmload.errors import ConfigError
from llmload.loadtest.turns import TurnPlan, parse_think_time, parse_turns
from llmload.promptsets.catalog import Prompt, load_prompt_set
from llmload.promptsets.conversation import Conversation
from llmload.promptsets.followups import FOLLOWUP_TOKENS, FollowUp, followup_set, later_turns
from llmload.promptsets.prefixes import with_shared_prefixes
from llmload.timescale import TimeScale
from llmload.promptsets.tokens import prompt_tokens, text_tokens

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

MESSAGES = [{"role": "user", "content": "Summarise the thread."}]
PROMPT = Prompt("p", MESSAGES, request={"max_tokens": 50})


def test_each_turn_sends_the_history_with_the_answers_as_received_and_the_next_user_message():
    followups = [FollowUp("And the refund?", {}), FollowUp("Thanks. Anything else?", {"max_tokens": 9})]
    conversation = Conversation.start("c1", PROMPT, followups)
    assert (conversation.turn, conversation.turns, conversation.messages, conversation.request()) == (1, 3, MESSAGES, {"max_tokens": 50})
    conversation.answered("It was refunded.")
    assert conversation.messages == [*MESSAGES, {"role": "assistant", "content": "It was refunded."},
                                     {"role": "user", "content": "And the refund?"}]
    assert conversation.turn == 2 and conversation.request() == {"max_tokens": 50} and not conversation.done
    conversation.answered("")  # an answer with no visible text (all reasoning) is sent back as it came: empty
    assert conversation.messages[-2:] == [{"role": "assistant", "content": ""}, {"role": "user", "content": "Thanks. Anything else?"}]
    assert conversation.request() == {"max_tokens": 9}  # a later turn's own max_tokens (ShareGPT's)
    conversation.answered("No.")
    assert conversation.done and conversation.sent == 3
    assert PROMPT.messages == MESSAGES  # the prompt set is never changed


def test_an_empty_answer_is_left_out_of_the_count_as_vllm_leaves_it_out():
    with_empty = [*MESSAGES, {"role": "assistant", "content": ""}, {"role": "user", "content": "next"}]
    assert prompt_tokens(with_empty) == prompt_tokens([*MESSAGES, {"role": "user", "content": "next"}])


def test_a_failed_turn_ends_the_conversation():
    conversation = Conversation.start("c2", PROMPT, [FollowUp("more", {})])
    conversation.failed()
    assert conversation.done and conversation.messages == MESSAGES


def test_nonce_leads_the_first_message_costs_five_tokens_and_stays_in_the_history():
    conversation = Conversation.start("c", PROMPT, [FollowUp("more", {})], nonce="123456789012")
    assert conversation.messages[0]["content"] == "123456789012\nSummarise the thread."
    assert MESSAGES[0]["content"] == "Summarise the thread."  # the prompt set is not changed
    assert prompt_tokens(conversation.messages) - prompt_tokens(MESSAGES) == 5
    conversation.answered("ok")
    assert conversation.messages[0]["content"].startswith("123456789012\n")


def test_with_a_shared_prefix_the_nonce_goes_after_it_so_the_prefix_stays_shared():
    (prefixed,) = with_shared_prefixes((PROMPT,), 32, 1, seed=0)
    conversation = Conversation.start("c", prefixed, nonce="123456789012")
    assert conversation.messages[0] == prefixed.messages[0]
    assert conversation.messages[1]["content"] == "123456789012\nSummarise the thread."


def test_the_follow_up_set_is_a_few_hundred_exactly_counted_tokens_per_task_and_language():
    made = followup_set(0)
    assert set(made) == {f"{task}.{lang}" for task in ("support_reply", "product_description", "incident_triage")
                         for lang in ("en", "ja")}
    for name, followups in made.items():
        assert all(f.tokens == text_tokens(f.text) for f in followups)
        assert all(0.85 * min(FOLLOWUP_TOKENS) <= f.tokens <= 1.15 * max(FOLLOWUP_TOKENS) for f in followups), name
        japanese = sum(any("\u3040" <= c <= "\u30ff" for c in f.text) for f in followups)
        assert japanese == (len(followups) if name.endswith(".ja") else 0), name
    assert followup_set(0) is made and followup_set(1) != made


@pytest.mark.parametrize("template,expected", [
    ("support_reply.ja", "support_reply.ja"),  # a generated set's name
    ("incident_triage", "incident_triage.en"), ("support_reply_ja", "support_reply.ja"),  # the built-in set's
])
def test_a_prompt_gets_follow_ups_of_its_own_task_and_language(template, expected):
    made = followup_set(0)
    prompt = Prompt("p", MESSAGES, meta={"template": template})
    followups = later_turns(prompt, 4, made, random.Random(0))
    assert len(followups) == 3 and all(f in made[expected] for f in followups)  # turns 2 to 4


def test_a_prompt_of_no_known_task_gets_english_follow_ups():
    made = followup_set(0)
    english = [f for name, followups in made.items() if name.endswith(".en") for f in followups]
    (random_prompt,) = load_prompt_set("random:16:4:1")
    turns = later_turns(random_prompt, 6, made, random.Random(0))
    assert len(turns) == 5 and all(f in english for f in turns)


def test_sharegpt_sends_its_own_human_turns_in_order_with_their_answers_lengths(tmp_path):
    turns = ["How do heat pumps work?", "They move heat.", "Do they work in frost?", "Yes, down to -20 C mostly.",
             "And what do they cost to run per year?", "About as much as gas, often less.", "A last question without answer"]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([{"conversations": [{"from": "human" if i % 2 == 0 else "gpt", "value": t}
                                                   for i, t in enumerate(turns)]}]))
    (prompt,) = load_prompt_set(f"sharegpt:{path}")
    later = later_turns(prompt, 10, {}, random.Random(0))
    assert [f.text for f in later] == [turns[2], turns[4]]  # an unanswered last question is not a turn
    assert [f.request for f in later] == [{"max_tokens": text_tokens(turns[3])}, {"max_tokens": text_tokens(turns[5])}]
    assert len(later_turns(prompt, 2, {}, random.Random(0))) == 1


@pytest.mark.parametrize("text,turns", [("1", (1, 1)), ("4", (4, 4)), ("2-6", (2, 6)), (" 3 - 3 ", (3, 3))])
def test_turns(text, turns):
    assert parse_turns(text) == turns


@pytest.mark.parametrize("text", ["0", "3-2", "x", "", "2-", "-1"])
def test_turns_below_one_or_malformed_are_refused_naming_the_setting(text):
    with pytest.raises(ConfigError, match="^TURNS="):
        parse_turns(text)


@pytest.mark.parametrize("text,parsed", [("0", (0.0, False)), ("5s", (5.0, False)), ("1m30s", (90.0, False)),
                                         ("exp:2s", (2.0, True)), ("exp:500", (500.0, True))])
def test_think_time(text, parsed):
    assert parse_think_time(text) == parsed


@pytest.mark.parametrize("text", ["abc", "exp:", "exp:x", "5 s", "-1s"])
def test_think_time_that_is_not_a_duration_is_refused_naming_the_setting(text):
    with pytest.raises(ConfigError, match="^THINK_TIME="):
        parse_think_time(text)


def test_turns_are_drawn_per_conversation_and_think_times_put_on_the_targets_clock():
    plan = TurnPlan.of("2-4", "exp:10s", TimeScale(10.0))
    rng = random.Random(0)
    drawn = [plan.turns(rng) for _ in range(3000)]
    assert set(drawn) == {2, 3, 4} and plan.conversations
    waits = [plan.think_time_s(rng) for _ in range(20000)]
    assert statistics.mean(waits) == pytest.approx(1.0, rel=0.05) and statistics.pstdev(waits) == pytest.approx(1.0, rel=0.05)
    fixed = TurnPlan.of("3", "2s")
    assert [fixed.turns(rng), fixed.think_time_s(rng)] == [3, 2.0] and not TurnPlan.of("1", "0").conversations
