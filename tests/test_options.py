"""The option table: one definition reaching the CLI, Locust, the Makefile's KEY=VALUE and the README."""

import argparse
from pathlib import Path

import pytest

import llmload
from llmload.errors import ConfigError
from llmload.options import OPTIONS, PROMPT_OPTIONS, add_suite_options, parse_run_args, parse_duration_s, settings_to_argv

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_run_option_is_in_the_readme_table():
    assert [o.key for o in OPTIONS if f"| `{o.key}` |" not in README] == []


def test_key_value_words_become_flags_and_flags_pass_through():
    assert settings_to_argv(["GPU=a100", "--effort", "high", "EXTRA_BODY={\"a\": 1}"]) == [
        "--gpu=a100", "--effort", "high", '--extra-body={"a": 1}']
    assert settings_to_argv(["COUNT=5"], PROMPT_OPTIONS) == ["--count=5"]
    with pytest.raises(ConfigError, match="unknown setting COUNT; known settings: HOST, GPU"):
        settings_to_argv(["COUNT=5"])


def test_typed_defaults_so_the_web_ui_can_cast():
    options = parse_run_args([])
    for o in OPTIONS:
        assert type(getattr(options, o.dest)) is type(o.default), o.key


def test_locust_owned_options_are_left_to_locust():
    parser = argparse.ArgumentParser()
    add_suite_options(parser)
    flags = {a for action in parser._actions for a in action.option_strings}
    assert "--host" not in flags and "--users" not in flags and "--gpu" in flags and "--effort" in flags


@pytest.mark.parametrize("text,seconds", [("120", 120.0), ("120s", 120.0), ("2m", 120.0), ("1h30m", 5400.0), ("1.5s", 1.5)])
def test_durations(text, seconds):
    assert parse_duration_s(text) == seconds


def test_speedup_must_be_positive():
    with pytest.raises(ConfigError, match="SPEEDUP=0 is out of range: it must be a finite number more than 0"):
        parse_run_args(["SPEEDUP=0"])


def test_small_public_surface():
    assert sorted(llmload.__all__) == ["ChatOptions", "RequestRecord", "Summary", "chat_body", "read_records", "summarize"]
    assert all(hasattr(llmload, name) for name in llmload.__all__)
