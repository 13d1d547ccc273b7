"""Every bad input the 2026-12-03 findings saw crash or run badly: one line naming the setting and the
fix, exit code 2, no load sent and no OUT folder left behind. Checked in this process (llmload.cli.main, with
nothing started: the pure tier refuses a process or socket), and a few as a process, the contract end to end."""

import socket
import subprocess

import orjson
import pytest

from conftest import REPO, run_cli
from llmload.system.listening import free_loopback_port as free_port


_HELD: list[socket.socket] = []


def taken_port() -> int:
    """A port another process listens on (this one, for the session)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    _HELD.append(s)
    return s.getsockname()[1]


def _file(tmp_path, name, text="x"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _run_folder_with(tmp_path, summary_text):
    run = tmp_path / "done"
    run.mkdir()
    (run / "summary.json").write_text(summary_text)
    return run


def _summary_with(**changed) -> str:
    """A summary.json as the suite writes it (of no requests), with ``changed`` fields."""
    from llmload.results.summary import summarize

    return orjson.dumps({**summarize([]).to_dict(), **changed}).decode()


SCENARIO = f"SCENARIO={REPO / 'scenarios' / 'h100-grid.yaml'}"
TRACE_LINE = '{"timestamp": 0, "input_length": 8, "output_length": 4}\n'
EXAMPLE_TOOLS = REPO / "tools" / "example.json"
SCHEMA_TYPO = '{"type": "objekt", "properties": {"answer": {"type": "string"}}}'
UNUSED_HOST = "HOST=http://127.0.0.1:9"  # never reached: the settings are refused before any request

# name: (argv from tmp_path and OUT, a word the one line must hold); OUT is tmp_path/"run" unless the case says
CASES = {
    "OUT is a file": (lambda t, out: ["load", f"OUT={_file(t, 'a-file')}"], "OUT="),
    "OUT under a file": (lambda t, out: ["load", f"OUT={_file(t, 'a-file')}/run"], "OUT="),
    "OUT not writable": (lambda t, out: ["load", "OUT=/proc/llmload-test/run"], "OUT="),
    "REQUEST_TIMEOUT=0": (lambda t, out: ["load", "REQUEST_TIMEOUT=0", f"OUT={out}"], "REQUEST_TIMEOUT=0"),
    "REQUEST_TIMEOUT=-1": (lambda t, out: ["load", "REQUEST_TIMEOUT=-1", f"OUT={out}"], "REQUEST_TIMEOUT=-1"),
    "STOP_TIMEOUT=-1": (lambda t, out: ["load", "STOP_TIMEOUT=-1", f"OUT={out}"], "STOP_TIMEOUT=-1"),
    "SPEEDUP=inf": (lambda t, out: ["load", "SPEEDUP=inf", f"OUT={out}"], "SPEEDUP=inf"),
    "SPEEDUP=inf with HOST": (lambda t, out: ["load", "SPEEDUP=inf", UNUSED_HOST, f"OUT={out}"], "SPEEDUP=inf"),
    "SPEEDUP=nan": (lambda t, out: ["load", "SPEEDUP=nan", f"OUT={out}"], "SPEEDUP=nan"),
    "USERS=-3": (lambda t, out: ["load", "USERS=-3", f"OUT={out}"], "USERS=-3"),
    "MAX_FAIL_RATIO=1.5": (lambda t, out: ["load", "MAX_FAIL_RATIO=1.5", f"OUT={out}"], "MAX_FAIL_RATIO=1.5"),
    "FAILURE_BACKOFF above its max": (lambda t, out: ["load", "FAILURE_BACKOFF=9", f"OUT={out}"], "FAILURE_BACKOFF_MAX"),
    "EXTRA_BODY sets stream": (lambda t, out: ["load", 'EXTRA_BODY={"stream": false}', f"OUT={out}"], "'stream'"),
    "EXTRA_BODY sets stream_options": (lambda t, out: ["load", 'EXTRA_BODY={"stream_options": {}}', f"OUT={out}"], "CONTINUOUS_USAGE"),
    "EXTRA_BODY sets messages": (lambda t, out: ["load", 'EXTRA_BODY={"messages": []}', f"OUT={out}"], "PROMPTS"),
    "EXTRA_BODY sets model": (lambda t, out: ["load", 'EXTRA_BODY={"model": "x"}', f"OUT={out}"], "MODEL"),
    "EXTRA_BODY sets max_tokens": (lambda t, out: ["load", 'EXTRA_BODY={"max_tokens": 9}', f"OUT={out}"], "MAX_TOKENS"),
    "PROMPTS is a folder": (lambda t, out: ["load", f"PROMPTS={t}", f"OUT={out}"], "is a folder"),
    "sweep SPEEDUP=0": (lambda t, out: ["sweep", SCENARIO, "SPEEDUP=0", f"OUT={out}"], "SPEEDUP=0"),
    "sweep SPEEDUP=inf": (lambda t, out: ["sweep", SCENARIO, "SPEEDUP=inf", f"OUT={out}"], "SPEEDUP=inf"),
    "sweep METRICS_INTERVAL=0": (lambda t, out: ["sweep", SCENARIO, "METRICS_INTERVAL=0", f"OUT={out}"], "METRICS_INTERVAL=0"),
    "sweep METRICS_INTERVAL=-1": (lambda t, out: ["sweep", SCENARIO, "METRICS_INTERVAL=-1", f"OUT={out}"], "METRICS_INTERVAL=-1"),
    "report on a corrupt summary": (lambda t, out: ["report", str(_run_folder_with(t, "{not json"))], "not valid JSON"),
    "report on a summary of something else": (lambda t, out: ["report", str(_run_folder_with(t, "[1, 2]"))], "not a run summary"),
    "report on a file": (lambda t, out: ["report", str(_file(t, "summary.json"))], "is a file"),
    "report on a newer suite's summary": (lambda t, out: ["report", str(_run_folder_with(t, '{"schema_version": 99}'))], "schema_version 99 is newer than this llmload reads"),
    "report on a summary with a number as text": (lambda t, out: ["report", str(_run_folder_with(t, _summary_with(requests_ok="12")))], "requests_ok: '12' is not an int"),
    "COUNT=0": (lambda t, out: ["prompts", "COUNT=0", f"OUT={out}"], "COUNT=0"),
    "METRICS_PORT out of range": (lambda t, out: ["load", "METRICS_PORT=70000", f"OUT={out}"], "METRICS_PORT=70000"),
    "METRICS_HOST off loopback without METRICS_LOGIN": (lambda t, out: ["load", "METRICS_PORT=9400", "METRICS_HOST=0.0.0.0",
                                                                          f"OUT={out}"], "METRICS_LOGIN"),
    "capacity METRICS_HOST off loopback": (lambda t, out: ["capacity", "SLO=ttft_p90<=2s", "METRICS_PORT=9400",
                                                           "METRICS_HOST=10.0.0.5", f"OUT={out}"], "METRICS_LOGIN"),
    "PRICE=abc": (lambda t, out: ["load", "PRICE=abc", f"OUT={out}"], "PRICE='abc' is not a positive number"),
    "PRICE=0": (lambda t, out: ["load", "PRICE=0", f"OUT={out}"], "PRICE='0' is not a positive number"),
    "PRICE=-2 with HOST": (lambda t, out: ["load", "PRICE=-2", "HOST=http://127.0.0.1:1", f"OUT={out}"], "PRICE="),  # refused before any call
    "GPUS=0": (lambda t, out: ["load", "GPUS=0", f"OUT={out}"], "GPUS=0"),
    "PROFILE missing": (lambda t, out: ["load", f"PROFILE={t}/nope.json", f"OUT={out}"], "cannot be read"),
    "PROFILE no such name": (lambda t, out: ["load", "PROFILE=b200-gpt-oss-20b", f"OUT={out}"], "no such shipped profile"),
    "PROFILE without a field": (lambda t, out: ["load", f"PROFILE={_profile_without(t, 'token_s')}", "GPU=h100", f"OUT={out}"],
                                "step.token_s is missing"),
    "PROFILE of another model": (lambda t, out: ["load", "PROFILE=h200-gpt-oss-20b-bf16", "MODEL=gpt-oss-120b", f"OUT={out}"],
                                 "plays gpt-oss-20b"),
    "serve-sim PROFILE without a field": (lambda t, out: ["serve-sim", f"PROFILE={_profile_without(t, 'overhead_s')}"],
                                          "step.overhead_s is missing"),
    "calibrate without PROFILE": (lambda t, out: ["calibrate", f"RESULTS={REPO}/measurements/h200-2026-12-04/suite-u256"],
                                  "PROFILE is missing"),
    "calibrate without RESULTS": (lambda t, out: ["calibrate", "PROFILE=h200-gpt-oss-20b-bf16"], "RESULTS is missing"),
    "calibrate on a folder that is no results": (lambda t, out: ["calibrate", f"RESULTS={t}", "PROFILE=h200-gpt-oss-20b-bf16"],
                                                 "not a results folder"),
    "TURNS=0": (lambda t, out: ["load", "TURNS=0", f"OUT={out}"], "TURNS=0"),
    "TURNS a falling range": (lambda t, out: ["load", "TURNS=5-2", f"OUT={out}"], "TURNS=5-2"),
    "THINK_TIME not a duration": (lambda t, out: ["load", "TURNS=3", "THINK_TIME=soon", f"OUT={out}"], "THINK_TIME='soon'"),
    "THINK_TIME without TURNS": (lambda t, out: ["load", "THINK_TIME=5s", f"OUT={out}"], "give TURNS above 1"),
    "PREFIX_GROUPS without PREFIX_TOKENS": (lambda t, out: ["load", "PREFIX_GROUPS=4", f"OUT={out}"], "needs PREFIX_TOKENS"),
    "TRACE missing": (lambda t, out: ["load", f"TRACE={t / 'no-trace.jsonl'}", f"OUT={out}"], "no-trace.jsonl: no such file"),
    "TRACE with a malformed line": (lambda t, out: ["load", f"TRACE={_file(t, 'bad.jsonl', TRACE_LINE + '{oops}')}", f"OUT={out}"],
                                    "bad.jsonl:2: not JSON"),
    "TRACE of an unknown format": (lambda t, out: ["load", f"TRACE={_file(t, 'bad.csv', 'a,b,c')}", f"OUT={out}"],
                                   "unknown trace format"),
    "TRACE with RATE": (lambda t, out: ["load", f"TRACE={_file(t, 't.jsonl', TRACE_LINE)}", "RATE=5", f"OUT={out}"],
                        "RATE with TRACE"),
    "TRACE with USERS": (lambda t, out: ["load", f"TRACE={_file(t, 't.jsonl', TRACE_LINE)}", "USERS=8", f"OUT={out}"],
                         "USERS with TRACE"),
    "TRACE_SPEED without TRACE": (lambda t, out: ["load", "TRACE_SPEED=2", f"OUT={out}"], "TRACE_SPEED applies with TRACE"),
    "TOOLS missing": (lambda t, out: ["load", f"TOOLS={t / 'no-tools.json'}", f"OUT={out}"], "no-tools.json cannot be read"),
    "TOOLS not JSON": (lambda t, out: ["load", f"TOOLS={_file(t, 'tools.json', '[{oops')}", f"OUT={out}"], "tools.json: not JSON"),
    "TOOLS not a list": (lambda t, out: ["load", f"TOOLS={_file(t, 'tools.json', '{}')}", f"OUT={out}"],
                         "tools.json: not a non-empty JSON list"),
    "TOOLS an empty list": (lambda t, out: ["load", f"TOOLS={_file(t, 'tools.json', '[]')}", f"OUT={out}"],
                            "not a non-empty JSON list"),
    "TOOLS not function tools": (lambda t, out: ["load", f"TOOLS={_tools(t, {'type': 'web_search'})}",
                                                 f"OUT={out}"], 'tool 1 is not an object with "type": "function"'),
    "TOOLS in the Responses form": (lambda t, out: ["load", f"TOOLS={_tools(t, {'type': 'function', 'name': 'f'})}",
                                                    f"OUT={out}"], 'tool 1 has no "function" object'),
    "TOOLS without a name": (lambda t, out: ["load", f"TOOLS={_tools(t, {'type': 'function', 'function': {}})}", f"OUT={out}"],
                             "tool 1 has no name"),
    "TOOLS with parameters not a schema object": (
        lambda t, out: ["load", f"TOOLS={_tools(t, {'type': 'function', 'function': {'name': 'f', 'parameters': []}})}",
                        f"OUT={out}"], "(f) has parameters that are not a JSON Schema object"),
    "TOOLS naming a function twice": (lambda t, out: ["load", f"TOOLS={_tools(t, *[{'type': 'function', 'function': {'name': 'f'}}] * 2)}",
                                                      f"OUT={out}"], "tool 2 repeats the name 'f'"),
    "TOOL_ROUNDS without TOOLS": (lambda t, out: ["load", "TOOL_ROUNDS=3", f"OUT={out}"], "TOOL_ROUNDS applies with TOOLS"),
    "TOOL_CHOICE without TOOLS": (lambda t, out: ["load", "TOOL_CHOICE=required", f"OUT={out}"], "TOOL_CHOICE applies with TOOLS"),
    "TOOL_ROUNDS=0": (lambda t, out: ["load", f"TOOLS={EXAMPLE_TOOLS}", "TOOL_ROUNDS=0", f"OUT={out}"], "TOOL_ROUNDS=0"),
    "TOOL_RESULT_TOKENS below the result's frame": (
        lambda t, out: ["load", f"TOOLS={EXAMPLE_TOOLS}", "TOOL_ROUNDS=2", "TOOL_RESULT_TOKENS=5", f"OUT={out}"],
        "TOOL_RESULT_TOKENS=5 cannot be met"),
    "TOOL_ROUNDS with TRACE": (lambda t, out: ["load", f"TRACE={_file(t, 't.jsonl', TRACE_LINE)}", f"TOOLS={EXAMPLE_TOOLS}",
                                               "TOOL_ROUNDS=2", f"OUT={out}"], "TOOL_ROUNDS with TRACE"),
    "EXTRA_BODY sets tools": (lambda t, out: ["load", 'EXTRA_BODY={"tools": []}', f"OUT={out}"], "TOOLS="),
    "RESPONSE_FORMAT unknown": (lambda t, out: ["load", "RESPONSE_FORMAT=json", UNUSED_HOST, f"OUT={out}"],
                                "RESPONSE_FORMAT='json' is not json_object or json_schema:PATH"),
    "RESPONSE_FORMAT schema not a JSON Schema": (
        lambda t, out: ["load", f"RESPONSE_FORMAT=json_schema:{_file(t, 's.json', SCHEMA_TYPO)}", UNUSED_HOST, f"OUT={out}"],
        "is not a JSON Schema: at type"),
    "RESPONSE_FORMAT schema missing": (lambda t, out: ["load", f"RESPONSE_FORMAT=json_schema:{t / 'none.json'}",
                                                       f"OUT={out}"], "none.json: no such file"),
    "RESPONSE_FORMAT schema not JSON": (lambda t, out: ["load", f"RESPONSE_FORMAT=json_schema:{_file(t, 's.json', '{oops')}",
                                                        f"OUT={out}"], "not JSON"),
}
# Ports the suite would listen on, found taken: the check binds a socket.
PORT_CASES = {
    "METRICS_PORT taken": (lambda t, out: ["load", f"METRICS_PORT={taken_port()}", f"OUT={out}"], "is taken"),
    "METRICS_PORT is WEB_PORT": (lambda t, out: ["ui", *(f"{k}={p}" for p in [free_port()] for k in ("WEB_PORT", "METRICS_PORT")),
                                                 f"OUT={out}"], "is WEB_PORT too"),
    "sweep METRICS_PORT taken": (lambda t, out: ["sweep", SCENARIO, f"METRICS_PORT={taken_port()}", f"OUT={out}"], "METRICS_PORT="),
    "monitor MONITOR_PORT taken": (lambda t, out: ["monitor", f"MONITOR_PORT={taken_port()}"], "MONITOR_PORT="),
}
# Refused only once a server failed to answer: these need a socket.
NO_ANSWER_CASES = {
    "sweep HOST that does not answer": (lambda t, out: ["sweep", SCENARIO, f"HOST=http://127.0.0.1:{free_port()}", f"OUT={out}"], "HOST="),
    "VERIFY does not answer": (lambda t, out: ["prompts", "SIZES=2k", "COUNT=5", f"VERIFY=http://127.0.0.1:{free_port()}", f"OUT={out}"], "VERIFY="),
}
# The whole contract end to end, as a process: one line on stderr, exit code 2, no traceback, no OUT folder.
AS_A_PROCESS = {**{name: CASES[name] for name in ("USERS=-3", "OUT not writable", "report on a newer suite's summary")},
                **NO_ANSWER_CASES}


def _tools(tmp_path, *tools):
    return _file(tmp_path, "tools.json", orjson.dumps(list(tools)).decode())


def _profile_without(tmp_path, step_field):
    data = orjson.loads((REPO / "llmload" / "data" / "profiles" / "h100-gpt-oss-20b.json").read_bytes())
    del data["step"][step_field]
    return _file(tmp_path, "profile.json", orjson.dumps(data).decode())


def _assert_refused(done, word: str, out) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and word in done.stderr, done.stderr
    assert "Traceback" not in done.stdout + done.stderr and done.stdout == ""
    assert not out.exists() and not (REPO / "prompts" / "run").exists()


@pytest.mark.pure
@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2_and_no_out_folder(cli, tmp_path, case):
    argv, word = CASES[case]
    out = tmp_path / "run"
    _assert_refused(cli(*argv(tmp_path, out)), word, out)


@pytest.mark.integration
@pytest.mark.parametrize("case", PORT_CASES)
def test_a_taken_port_is_one_line_exit_2_and_no_out_folder(cli, tmp_path, case):
    argv, word = PORT_CASES[case]
    out = tmp_path / "run"
    _assert_refused(cli(*argv(tmp_path, out)), word, out)


@pytest.mark.integration
@pytest.mark.parametrize("case", AS_A_PROCESS)
def test_bad_input_as_a_process_is_one_line_exit_2_and_no_out_folder(tmp_path, case):
    argv, word = AS_A_PROCESS[case]
    out = tmp_path / "run"
    _assert_refused(run_cli(*argv(tmp_path, out)), word, out)


@pytest.mark.integration
def test_https_to_a_plain_http_port_says_so_at_once(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed.replace('http://', 'https://')}", f"OUT={out}", timeout_s=8)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "does not speak TLS" in done.stderr and "use http://" in done.stderr, done.stderr
    assert not out.exists()


@pytest.mark.integration
def test_a_prefix_above_the_models_max_context_is_refused_before_any_request(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "PREFIX_TOKENS=131072", "REQUESTS=1", f"OUT={out}", timeout_s=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: PREFIX_TOKENS=131072 does not fit") and "takes 131072" in done.stderr
    assert not out.exists()


@pytest.mark.integration
def test_a_second_web_ui_on_a_taken_port(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = tmp_path / "run"
        done = run_cli("ui", f"WEB_PORT={port}", f"OUT={out}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: WEB_PORT={port}: 127.0.0.1:{port} is taken") and done.stdout == ""
    assert not out.exists()


@pytest.mark.integration
@pytest.mark.parametrize("target,variable", [("figures", "RESULTS is missing"), ("compare", "A and B are needed")])
def test_make_figures_and_compare_name_the_missing_variable(target, variable):
    done = subprocess.run(["make", "--no-print-directory", target, "A=", "B=", "RESULTS="], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and variable in done.stderr and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.pure
def test_a_run_refused_inside_locust_leaves_no_folder_but_never_removes_results(tmp_path):
    from llmload.cli import _made_dirs, _remove_if_empty

    refused = tmp_path / "new" / "run"
    made = _made_dirs(refused)
    (refused / "locust.html").write_text("<html>no test ran</html>")
    _remove_if_empty(made, refused)
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "other" / "run"
    made = _made_dirs(kept)
    (kept / "samples.jsonl").write_text("{}\n")
    (kept / "locust.html").write_text("<html>a run</html>")
    _remove_if_empty(made, kept)
    assert (kept / "samples.jsonl").exists() and (kept / "locust.html").exists()
