"""The option table: one definition reaching the CLI, Locust, the Makefile's KEY=VALUE and the README."""

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

import llmload
from llmload.errors import ConfigError
from llmload.loadtest.runconfig import LAUNCH_OPTIONS, RECORDED_OPTIONS, LaunchConfig, RunConfig, parse_run_args
from llmload.options import OPTIONS, PROMPT_OPTIONS, config_name
from llmload.settings import add_suite_options, parse_duration_s, parse_settings, settings_to_argv

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
    options = parse_settings([], OPTIONS)
    for o in OPTIONS:
        assert type(getattr(options, o.dest)) is type(o.default), o.key
    config = parse_run_args([])
    for o in (*RECORDED_OPTIONS, *LAUNCH_OPTIONS):
        assert type(getattr(config, o.dest)) is type(o.default), o.key


def test_the_run_config_has_a_typed_field_per_option_of_the_table():
    assert [f.name for f in fields(RunConfig)] == [o.dest for o in RECORDED_OPTIONS]
    assert [f.name for f in fields(LaunchConfig)] == [o.dest for o in (*RECORDED_OPTIONS, *LAUNCH_OPTIONS)]
    assert {o.dest for o in OPTIONS} - {f.name for f in fields(LaunchConfig)} == {"api_key", "web_login", "metrics_login"}  # secrets
    for f in fields(LaunchConfig):
        o = next(o for o in OPTIONS if o.dest == f.name)
        assert f.type == ("str | int | None" if o.dest == "run_time" else type(o.default).__name__), o.key


def test_config_json_records_the_options_locust_gets_under_their_config_names():
    record = parse_run_args(["DURATION=2m", 'EXTRA_BODY={"top_p": 0.5}']).record()
    assert list(record) == [config_name(o) for o in RECORDED_OPTIONS] + ["duration_s"]
    assert (record["users"], record["run_time"], record["duration_s"], record["extra_body"]) == (1, "2m", 120.0, {"top_p": 0.5})


def test_a_tests_config_from_locusts_options_checks_ranges_and_keeps_a_missing_duration():
    locust = parse_settings([], OPTIONS)
    locust.host, locust.num_users, locust.run_time = None, None, None  # a worker's Locust leaves its own options unset
    config = RunConfig.of(locust)
    assert (config.host, config.num_users, config.run_time, config.duration_s) == ("", 1, None, None)
    locust.request_timeout = 0.0  # typed into the web UI's form: never met the parser
    with pytest.raises(ConfigError, match="REQUEST_TIMEOUT=0 is out of range"):
        RunConfig.of(locust)


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
