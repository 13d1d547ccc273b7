"""The rules between settings (llmload/loadtest/rules.py): every rule refused the same way through every entry point
that takes its settings: the command line, the web UI's form, a scenario's cell, a capacity step, crosscheck."""

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from conftest import REPO
from llmload.errors import ConfigError
from llmload.loadtest.rules import RULES, broken_rules
from llmload.loadtest.runconfig import LaunchConfig
from llmload.loadtest.webui_form import check_form
from llmload.options import CROSSCHECK_OPTIONS, OPTIONS, option_by_key
from llmload.settings import parse_settings

RUN_RULES = [rule for rule in RULES if not rule.launch]
_SEARCHED = {"USERS", "REQUESTS", "TRACE", "SLO", "EARLY_STOP"}
"""What a capacity step sets itself, needs or refuses: a rule on them never reaches a step's rules."""


def _words(example: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in example.items()]


def _launch_config(example: dict[str, str]) -> LaunchConfig:
    return LaunchConfig.of(parse_settings(_words(example), OPTIONS))


def _one_line_exit_2(done: subprocess.CompletedProcess, text: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-1500:])
    assert done.stderr == f"error: {text}\n" and done.stdout == "", done.stderr


@pytest.mark.pure
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_each_example_breaks_its_rule_and_no_other(rule, monkeypatch):
    monkeypatch.delenv("WEB_LOGIN", raising=False)
    monkeypatch.delenv("METRICS_LOGIN", raising=False)
    assert [r.name for r in broken_rules(_launch_config(rule.example))] == [rule.name]
    assert set(rule.example) >= {k for k in rule.keys if k in rule.example} and set(rule.example) & set(rule.keys)
    assert all(option_by_key(key) for key in rule.keys)


@pytest.mark.pure
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_the_command_line_refuses_every_rule(rule, cli, tmp_path, monkeypatch):
    monkeypatch.delenv("WEB_LOGIN", raising=False)
    monkeypatch.delenv("METRICS_LOGIN", raising=False)
    out = tmp_path / "run"
    _one_line_exit_2(cli("load", *_words(rule.example), f"OUT={out}"), rule.message(_launch_config(rule.example)))
    assert not out.exists()


def _form(example: dict[str, str]) -> dict[str, str]:
    """The web UI's form fields for settings: each option's dest (USERS is Locust's user_count)."""
    return {("user_count" if key == "USERS" else option_by_key(key).dest): value for key, value in example.items()}


@pytest.mark.pure
@pytest.mark.parametrize("rule", RUN_RULES, ids=lambda r: r.name)
def test_the_web_ui_form_refuses_every_rule_it_can_break(rule):
    parsed = parse_settings([], OPTIONS)  # Locust's parsed options: the table's defaults
    with pytest.raises(ConfigError) as refused:
        check_form(parsed, _form(rule.example))
    assert str(refused.value) == rule.message(_launch_config(rule.example))
    assert vars(parsed) == vars(parse_settings([], OPTIONS))  # the check changed nothing Locust holds


@pytest.mark.pure
def test_the_web_ui_form_takes_open_loop_users_as_the_launcher_sets_them():
    """With RATE the launcher runs one dispatching user per process: the form's user count of 2 on 2 workers is
    not USERS=2."""
    parsed = parse_settings(["RATE=2"], OPTIONS)
    check_form(parsed, {"user_count": "2"}, processes=2)
    with pytest.raises(ConfigError, match="USERS=16 with RATE"):
        check_form(parsed, {"user_count": "16"}, processes=2)
    with pytest.raises(ConfigError, match="^requests='x' in the form is not a valid value for it"):
        check_form(parse_settings(["REQUESTS=5"], OPTIONS), {"requests": "x"})


@pytest.mark.pure
@pytest.mark.parametrize("rule", RUN_RULES, ids=lambda r: r.name)
def test_a_scenario_refuses_every_rule_in_a_cell(rule, tmp_path):
    from llmload.errors import ScenarioError
    from llmload.sweep.scenarios import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"cells": [rule.example]}))
    with pytest.raises(ScenarioError) as refused:
        load_scenario(path)
    assert str(refused.value) == f"{path}: cells[0]: {rule.message(_launch_config(rule.example))}"


@pytest.mark.pure
@pytest.mark.parametrize("rule", [r for r in RUN_RULES if not set(r.example) & _SEARCHED], ids=lambda r: r.name)
def test_a_capacity_step_refuses_every_rule_it_can_break(rule, cli, tmp_path):
    out = tmp_path / "cap"
    done = cli("capacity", "SLO=ttft_p90<=2s", *_words(rule.example), f"OUT={out}")
    example = {**rule.example, "USERS": "1", "EARLY_STOP": "on", "SLO": "ttft_p90<=2s"}
    _one_line_exit_2(done, rule.message(_launch_config(example)))
    assert not out.exists()


CROSSCHECK_KEYS = {o.key for o in CROSSCHECK_OPTIONS}


@pytest.mark.pure
@pytest.mark.parametrize("rule", [r for r in RUN_RULES if set(r.example) <= CROSSCHECK_KEYS], ids=lambda r: r.name)
def test_crosscheck_refuses_every_rule_it_can_break_before_sending(rule, cli, tmp_path):
    out = tmp_path / "cc"
    done = cli("crosscheck", "HOST=http://127.0.0.1:9", "PROMPTS=random:64:8", *_words(rule.example), f"OUT={out}")
    _one_line_exit_2(done, rule.message(_launch_config(rule.example)))
    assert not out.exists()


@pytest.mark.pure
def test_a_trace_with_warm_ups_never_sends_a_row_twice():
    """Warm-ups are the trace's first rows; the measured schedule starts at the row after them."""
    from llmload.loadtest.arrivals import Replay

    replay = Replay((0.0, 1.0, 3.0, 6.0), speed=2.0)
    assert list(replay.offsets_s(0)) == [0.0, 0.5, 1.5, 3.0]
    assert list(replay.offsets_s(0, skip=2)) == [0.0, 1.5]  # rows 2 and 3, from row 2's time
    assert replay.rate_rps == pytest.approx(3 / 3.0)


def _get(url, form=None):
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as response:
        return response.read()


@pytest.mark.integration
def test_the_web_ui_refuses_a_form_that_breaks_a_rule_and_sends_nothing(sim_fixed, tmp_path):
    """POST /swarm with THINK_TIME and no TURNS (the 2026-12-06 finding: "Swarming started", 310 requests sent):
    the form's error comes back, no user starts, the target gets no request."""
    from llmload.system.listening import free_loopback_port
    from llmload.results.server_metrics import parse_prometheus, sample_from
    from llmload.system.control_http import request

    port = free_loopback_port()
    ui = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(REPO / "locustfile.py"), "--host", sim_fixed,
                           "--web-host", "127.0.0.1", "--web-port", str(port), "--max-tokens", "10"],
                          cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(base + "/")
                break
            except OSError:
                assert time.monotonic() < deadline and ui.poll() is None, "the web UI did not start"
                time.sleep(0.3)
        before = sample_from(parse_prometheus(request(sim_fixed + "/metrics").decode()), 0.0).e2e_count
        answer = json.loads(_get(base + "/swarm", {"user_count": 2, "spawn_rate": 2, "host": sim_fixed, "think_time": "2s"}))
        assert answer["success"] is False and answer["message"].startswith("THINK_TIME=2s is the wait between turns")
        answer = json.loads(_get(base + "/swarm", {"user_count": 16, "spawn_rate": 16, "host": sim_fixed, "rate": "2"}))
        assert answer["success"] is False and answer["message"].startswith("USERS=16 with RATE")
        time.sleep(2)
        assert json.loads(_get(base + "/stats/requests"))["user_count"] == 0
        after = sample_from(parse_prometheus(request(sim_fixed + "/metrics").decode()), 0.0).e2e_count
        assert after == before
        assert not (tmp_path / "results").exists()  # no run folder: nothing started
    finally:
        ui.terminate()
        ui.wait(30)
