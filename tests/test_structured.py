"""Structured output (RESPONSE_FORMAT): the format as each API sends it, each answer judged after its request, the
valid share and its interval, and the built-in target answering JSON so a run's share is checked end to end."""

import json

import orjson
import pytest

from conftest import run_cli
from factories import make_record
from llmload.client.body import ChatOptions, chat_body, responses_body
from llmload.errors import ConfigError
from llmload.results.intervals import proportion_ci
from llmload.results.records import read_records
from llmload.results.structured import judge_answer, parse_response_format
from llmload.results.summary import summarize
from llmload.sim import start_sim, stop_sim

USER = [{"role": "user", "content": "Where is it warm?"}]
CITY = {"type": "object", "properties": {"answer": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["answer"], "additionalProperties": False}


def _schema_file(tmp_path, schema=CITY, name="city.json"):
    path = tmp_path / name
    path.write_text(json.dumps(schema))
    return path


@pytest.mark.pure
def test_json_object_is_sent_as_each_api_asks():
    options = ChatOptions(model="m", response_format=parse_response_format("json_object"))
    assert chat_body(options, USER)["response_format"] == {"type": "json_object"}
    body = responses_body(options, USER)
    assert body["text"] == {"format": {"type": "json_object"}} and "response_format" not in body


@pytest.mark.pure
def test_a_schema_is_sent_named_and_strict_by_each_api(tmp_path):
    fmt = parse_response_format(f"json_schema:{_schema_file(tmp_path, name='city list.json')}")
    options = ChatOptions(model="m", response_format=fmt)
    assert chat_body(options, USER)["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "city_list", "schema": CITY, "strict": True}}
    assert responses_body(options, USER)["text"] == {
        "format": {"type": "json_schema", "name": "city_list", "schema": CITY, "strict": True}}


@pytest.mark.pure
def test_without_response_format_neither_field_is_sent():
    assert parse_response_format("") is None
    options = ChatOptions(model="m")
    assert "response_format" not in chat_body(options, USER) and "text" not in responses_body(options, USER)


@pytest.mark.pure
def test_an_answer_is_judged_as_json_then_against_the_schema(tmp_path):
    fmt = parse_response_format(f"json_schema:{_schema_file(tmp_path)}")
    assert judge_answer(fmt, '{"answer": "Lisbon", "days": 3}') == {"answer_json": True, "answer_valid": True,
                                                                     "answer_invalid": None}
    wrong_type = judge_answer(fmt, '{"answer": "Lisbon", "days": "three"}')
    assert wrong_type["answer_json"] and not wrong_type["answer_valid"]
    assert wrong_type["answer_invalid"] == "at days: 'three' is not of type 'integer'"
    missing = judge_answer(fmt, '{"days": 3}')
    assert missing["answer_invalid"] == "at the top level: 'answer' is a required property"
    cut = judge_answer(fmt, '{"answer": "Lis')  # what max_tokens leaves of an answer
    assert cut["answer_json"] is False and cut["answer_valid"] is False and cut["answer_invalid"].startswith("not JSON")
    assert judge_answer(fmt, "")["answer_invalid"] == "no answer text"


@pytest.mark.pure
def test_json_object_asks_for_an_object():
    fmt = parse_response_format("json_object")
    assert judge_answer(fmt, ' {"a": [1, 2]} ')["answer_valid"] is True
    listed = judge_answer(fmt, "[1, 2]")
    assert listed == {"answer_json": True, "answer_valid": False, "answer_invalid": "a JSON list, not an object"}


@pytest.mark.pure
@pytest.mark.parametrize("text,word", [
    ("json", "is not json_object or json_schema:PATH"),
    ("json_schema", "is not json_object or json_schema:PATH"),
    ("json_schema:", "is not json_object or json_schema:PATH"),
    ("yaml:x.yaml", "is not json_object or json_schema:PATH"),
])
def test_an_unknown_format_is_refused_naming_the_setting(text, word):
    with pytest.raises(ConfigError, match=f"RESPONSE_FORMAT={text!r} {word}"):
        parse_response_format(text)


@pytest.mark.pure
@pytest.mark.parametrize("content,word", [
    ('{"type": "objekt"}', "is not a JSON Schema: at type, 'objekt' is not valid"),
    ('{"properties": {"a": {"minLength": -1}}}', "is not a JSON Schema: at properties/a/minLength"),
    ('[{"type": "object"}]', "a JSON Schema must be a JSON object here, not list"),
    ("{not json", "not JSON"),
])
def test_a_file_that_is_not_a_json_schema_is_refused(tmp_path, content, word):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as refused:
        parse_response_format(f"json_schema:{path}")
    assert str(refused.value).startswith(f"RESPONSE_FORMAT=json_schema:{path}") and word in str(refused.value)


@pytest.mark.pure
def test_wilsons_interval_of_a_share():
    assert proportion_ci(0, 0) is None
    low, high = proportion_ci(90, 100)
    assert (round(low, 4), round(high, 4)) == (0.8256, 0.9448)  # Wilson's score interval, z = 1.96
    assert proportion_ci(10, 10)[1] == 1.0 and 0.69 < proportion_ci(10, 10)[0] < 0.73  # never beyond [0, 1]
    assert proportion_ci(0, 10)[0] == 0.0


@pytest.mark.pure
def test_the_summary_gives_the_valid_share_of_judged_answers():
    judged = [make_record(answer_json=True, answer_valid=True)] * 8 + [make_record(answer_json=True, answer_valid=False)]
    others = [make_record(answer_json=False, answer_valid=False), make_record(error="timeout")]
    summary = summarize(judged + others)
    assert summary.answer_valid_ratio == 0.8 and summary.answer_json_ratio == 0.9
    assert summary.answer_valid_ratio_ci95 == proportion_ci(8, 10)
    plain = summarize([make_record()])
    assert plain.answer_valid_ratio is None and plain.answer_valid_ratio_ci95 is None


@pytest.fixture(scope="module")
def sim():
    process, url = start_sim(["--speedup", "1000", "--seed", "5"])
    yield url
    assert stop_sim(process) == 0


@pytest.mark.integration
@pytest.mark.parametrize("client", ["raw", "openai"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_built_in_target_answers_json_and_the_run_judges_every_answer(sim, tmp_path, api, client):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim}", f"OUT={out}", f"API={api}", f"CLIENT={client}", "USERS=3", "REQUESTS=12",
                   "SPEEDUP=1000", f"RESPONSE_FORMAT=json_schema:{_schema_file(tmp_path)}")
    assert done.returncode == 0, done.stderr[-3000:]
    records = list(read_records(out / "samples.jsonl"))
    assert len(records) == 12
    for record in records:
        assert record.ok and record.answered
        assert (record.answer_json, record.answer_valid, record.answer_invalid) == (True, True, None)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answer_valid_ratio"] == 1.0 and summary["answer_json_ratio"] == 1.0
    assert summary["answer_valid_ratio_ci95"] == pytest.approx(proportion_ci(12, 12))
    assert summary["config"]["response_format"].startswith("json_schema:") and summary["config"]["api"] == api
    assert "Answers valid (RESPONSE_FORMAT):" in done.stdout


@pytest.mark.integration
def test_answers_against_a_schema_they_miss_are_judged_invalid_with_the_reason(sim, tmp_path):
    """The target's object holds a string under the schema's first property: a schema wanting a number there fails."""
    number = {"type": "object", "properties": {"answer": {"type": "number"}}, "required": ["answer"]}
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim}", f"OUT={out}", "USERS=2", "REQUESTS=6", "SPEEDUP=1000",
                   f"RESPONSE_FORMAT=json_schema:{_schema_file(tmp_path, number)}")
    assert done.returncode == 0, done.stderr[-3000:]
    for record in read_records(out / "samples.jsonl"):
        assert record.ok and record.answer_json is True and record.answer_valid is False
        assert record.answer_invalid.startswith("at answer: ") and "is not of type 'number'" in record.answer_invalid
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answer_valid_ratio"] == 0.0 and summary["answer_json_ratio"] == 1.0


@pytest.mark.integration
def test_an_answer_cut_by_max_tokens_is_judged_not_left_out(sim, tmp_path):
    """A successful request that max_tokens cut (in its reasoning, or inside the object) has no valid answer."""
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim}", f"OUT={out}", "REQUESTS=4", "SPEEDUP=1000", "MAX_TOKENS=3",
                   "API=responses", "RESPONSE_FORMAT=json_object")
    assert done.returncode == 0, done.stderr[-3000:]
    for record in read_records(out / "samples.jsonl"):
        assert record.ok and record.finish_reason == "length"
        assert record.answer_json is False and record.answer_valid is False
        assert record.answer_invalid == "no answer text" or record.answer_invalid.startswith("not JSON")
    assert json.loads((out / "summary.json").read_text())["answer_valid_ratio"] == 0.0


@pytest.mark.integration
def test_without_response_format_nothing_is_judged(sim, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim}", f"OUT={out}", "REQUESTS=3", "SPEEDUP=1000")
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(r.answer_valid is None and r.answer_json is None for r in read_records(out / "samples.jsonl"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answer_valid_ratio"] is None and "Answers valid" not in done.stdout
    assert orjson.loads((out / "config.json").read_bytes())["response_format"] == ""


SWEEP = """
name: apis
server: {engine: llmload-sim, gpu: h100}
defaults: {REQUESTS: 6, USERS: 2, MODEL: gpt-oss-20b, RESPONSE_FORMAT: json_object}
grid:
  API: [chat, responses]
"""


@pytest.mark.integration
def test_a_sweep_varying_api_carries_it_to_cells_csv_the_figures_and_the_report(tmp_path):
    import csv
    import subprocess
    import sys

    from conftest import REPO
    from plots.points import fmt, x_axis
    from plots.results import load_results
    from plots.tables import cells_table

    scenario, out = tmp_path / "apis.yaml", tmp_path / "sweep"
    scenario.write_text(SWEEP)
    done = run_cli("sweep", f"SCENARIO={scenario}", f"OUT={out}", "SPEEDUP=100", timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(out / "cells.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["API"], r["RESPONSE_FORMAT"], r["answer_valid_ratio"]) for r in rows] == [
        ("chat", "json_object", "1.0"), ("responses", "json_object", "1.0")]
    assert all(float(r["answer_valid_ratio_ci95_lo"]) > 0.5 for r in rows)
    cells = load_results(out).cells
    assert x_axis(cells) == "api" and [fmt("api", c.api) for c in cells] == ["API=chat", "API=responses"]
    table = cells_table(cells)
    api, valid = table.headers.index("API"), table.headers.index("valid answers (RESPONSE_FORMAT)")
    assert [(row[api], row[valid]) for row in table.rows] == [("chat", "100%"), ("responses", "100%")]
    plotted = subprocess.run([sys.executable, "-m", "plots", "figures", str(out)], cwd=REPO, capture_output=True,
                             text=True, timeout=300)
    assert plotted.returncode == 0, plotted.stderr[-2000:]
    report = (out / "report.html").read_text()
    assert "API (chat or responses)" in (out / "figures" / "ttft_vs_users.svg").read_text()  # the x axis
    assert "Answers valid for RESPONSE_FORMAT" in report and (out / "figures" / "valid_answer_share.svg").exists()
    assert "<th>API</th>" in report and "valid answers (RESPONSE_FORMAT)" in report


@pytest.mark.integration
def test_the_built_in_targets_json_is_the_same_streamed_whole_and_in_the_done_events(sim):
    """Non-streamed chat, and the Responses API's output_text.done and completed response, hold the same object the
    deltas built, keyed by the schema's first property."""
    import urllib.request

    def post(path, body):
        request = urllib.request.Request(sim + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read().decode()

    schema = {"type": "object", "properties": {"summary": {"type": "string"}}}
    whole = json.loads(post("/v1/chat/completions", {"messages": USER, "max_tokens": 4000, "response_format": {
        "type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}))
    assert list(json.loads(whole["choices"][0]["message"]["content"])) == ["summary"]
    events = [json.loads(line[6:]) for line in post("/v1/responses", {
        "input": USER, "stream": True, "max_output_tokens": 4000, "text": {"format": {"type": "json_object"}}}).splitlines()
        if line.startswith("data: ")]
    streamed = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    (done,) = [e["text"] for e in events if e["type"] == "response.output_text.done"]
    assert done == streamed and list(json.loads(streamed)) == ["answer"]
    message = [item for item in events[-1]["response"]["output"] if item["type"] == "message"]
    assert message[0]["content"][0]["text"] == streamed


@pytest.mark.integration
def test_with_tool_rounds_only_the_final_answer_is_judged(sim, tmp_path):
    """A round that ends in a function call has no answer yet: it is not judged; the round that answers is."""
    from conftest import REPO

    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim}", f"OUT={out}", f"TOOLS={REPO / 'tools' / 'example.json'}", "TOOL_ROUNDS=2",
                   "REQUESTS=4", "SPEEDUP=1000", "RESPONSE_FORMAT=json_object", "API=responses")
    assert done.returncode == 0, done.stderr[-3000:]
    records = list(read_records(out / "samples.jsonl"))
    calls = [r for r in records if r.finish_reason == "tool_calls"]
    answers = [r for r in records if r.finish_reason == "stop"]
    assert calls and answers and len(calls) + len(answers) == len(records)
    assert all(r.answer_valid is None for r in calls) and all(r.answer_valid is True for r in answers)
    assert json.loads((out / "summary.json").read_text())["answer_valid_ratio"] == 1.0
