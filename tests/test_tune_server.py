"""llmload/tune/: a configuration's server started in a group of its own, waited for, recorded, and stopped with
nothing left running: after stop(), after a failure, after the suite is killed (-9, SIGTERM, Ctrl-C)."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO
from llmload.errors import ConfigError
from llmload.system.listening import free_loopback_port
from llmload.tune.effective import read_effective, split_top_level
from llmload.tune.keeper import group_members
from llmload.tune.server import Launch, ManagedServer, ServerFailed, fill_port
from llmload.vllm_cpu.launcher import server_env

SIM = (sys.executable, "-m", "llmload.sim", "--port", "{port}", "--fixed-ttft-ms", "20", "--fixed-itl-ms", "5")
SIM_ENV = {"PYTHONPATH": str(REPO)}


# -- {port} ---------------------------------------------------------------------------------------------------------

@pytest.mark.pure
def test_port_is_filled_once_where_it_is_given():
    launch = fill_port("base", "docker run -p {port}:8000 img --compilation-config '{\"level\": 3}'", 8123, {"A": "1"})
    assert launch == Launch("base", ("docker", "run", "-p", "8123:8000", "img", "--compilation-config", '{"level": 3}'),
                            {"A": "1"}, 8123)
    assert fill_port("x", ["vllm", "serve", "m", "--port={port}"], 9).argv == ("vllm", "serve", "m", "--port=9")


@pytest.mark.pure
def test_port_is_appended_when_the_command_has_no_field():
    assert fill_port("x", "vllm serve m", 8000).argv == ("vllm", "serve", "m", "--port", "8000")


@pytest.mark.pure
@pytest.mark.parametrize("command", ["vllm serve m --port {port} --other {port}", "python -m s --url http://h:{port}/{port}"])
def test_port_given_twice_is_refused_in_one_line(command):
    with pytest.raises(ConfigError) as refused:
        fill_port("x", command, 8000)
    assert "{port} 2 times" in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.pure
def test_an_empty_command_is_refused():
    with pytest.raises(ConfigError, match="empty"):
        fill_port("x", "  ", 8000)


# -- what the log says it ran with (lines in vLLM's formats: api_utils.py, core.py, cuda.py, kv_cache_utils.py) -----

VLLM_032 = [
    "(APIServer pid=30770) INFO 12-06 04:47:33 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0",
    "(APIServer pid=30770) INFO 12-06 04:47:33 [api_utils.py:286] non-default args: {'enable_prompt_tokens_details': "
    "True, 'host': '127.0.0.1', 'port': 18765, 'model': '/models/tiny-llama', 'dtype': 'bfloat16', 'max_model_len': "
    "10240, 'enforce_eager': True, 'served_model_name': ['tiny-llama'], 'kv_cache_memory_bytes': 268435456, "
    "'api_key': '***', 'async_scheduling': True}",
    "(APIServer pid=30770) INFO 12-06 04:47:41 [model.py:733] Resolved architecture: LlamaForCausalLM",
    "(APIServer pid=30770) INFO 12-06 04:47:41 [model.py:2152] Using max model len 10240",
    "(EngineCore pid=30932) INFO 12-06 04:47:48 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
    "model='/models/tiny-llama', speculative_config=None, dtype=torch.bfloat16, max_seq_len=10240, "
    "tensor_parallel_size=1, enforce_eager=True, structured_outputs_config=StructuredOutputsConfig(backend='auto', "
    "reasoning_parser=''), kv_cache_dtype=auto, served_model_name=tiny-llama, enable_prefix_caching=True, "
    "compilation_config={'mode': <CompilationMode.NONE: 0>, 'splitting_ops': []}",
    "(EngineCore_DP0 pid=271) INFO 04-16 11:16:30 [cuda.py:367] Using FLASH_ATTN attention backend out of potential "
    "backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN'].",
    "(APIServer pid=1) INFO 04-16 11:16:17 [scheduler.py:231] Chunked prefill is enabled with max_num_batched_tokens=8192.",
    "(EngineCore pid=30932) INFO 12-06 04:47:58 [kv_cache_utils.py:2327] GPU KV cache size: 112,347 tokens, "
    "Maximum concurrency for 98,304 tokens per request: 1.14x",
    "(EngineCore pid=30932) INFO 12-06 04:47:58 [utils.py:347] Using LBHNC KV cache layout.",
    "(Worker pid=30998) INFO 12-06 04:47:58 [utils.py:347] Using LBHNC KV cache layout.",
    "(APIServer pid=30770) INFO 12-06 04:47:58 [launcher.py:195] Route: /v1/models, Methods: GET",
]


@pytest.mark.pure
def test_vllm_log_gives_its_args_engine_backend_and_sizes():
    effective = read_effective(VLLM_032)
    assert effective["server"] == "vllm" and effective["version"] == "0.32.0"
    args = effective["non_default_args"]
    assert args["port"] == 18765 and args["served_model_name"] == ["tiny-llama"] and args["enforce_eager"] is True
    assert args["async_scheduling"] is True and args["api_key"] == "***"
    engine = effective["engine_config"]
    assert engine["dtype"] == "torch.bfloat16" and engine["max_seq_len"] == 10240 and engine["speculative_config"] is None
    assert engine["kv_cache_dtype"] == "auto" and engine["compilation_config"] == {"mode": "<CompilationMode.NONE: 0>"}
    assert engine["structured_outputs_config"] == "StructuredOutputsConfig(backend='auto', reasoning_parser='')"
    assert effective["attention_backend"] == "FLASH_ATTN"
    assert effective["attention_backends_possible"] == ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"]
    assert effective["max_num_batched_tokens"] == 8192
    assert (effective["kv_cache_tokens"], effective["max_concurrency"]) == (112347, 1.14)
    assert effective["max_concurrency_tokens_per_request"] == 98304
    assert (effective["max_model_len"], effective["architecture"]) == (10240, "LlamaForCausalLM")
    assert effective["lines"] == ["Using LBHNC KV cache layout."]  # once, and no route


@pytest.mark.pure
def test_older_vllm_lines_secrets_and_values_that_are_no_literal():
    effective = read_effective([
        "INFO 11-03 05:51:44 [api_server.py:1839] vLLM API server version 0.11.0",
        "(APIServer pid=5) INFO 03-02 11:00:22 [utils.py:253] non-default args: {'model_tag': 'unsloth/Q', 'lora_modules': "
        "[LoRAModulePath(name='a', path='b', base_model_name=None)], 'api_key': 'sk-real', 'max_lora_rank': 32}",
        "INFO 07-24 17:35:04 [cuda.py:253] Using Flash Attention backend on V1 engine.",
        "2026-04-19 11:01:42.835 | (APIServer pid=1) INFO 04-19 09:01:42 [vllm.py:834] Asynchronous scheduling is enabled.",
    ])
    assert effective["version"] == "0.11.0" and effective["attention_backend"] == "Flash Attention"
    args = effective["non_default_args"]
    assert args["lora_modules"] == "[LoRAModulePath(name='a', path='b', base_model_name=None)]"
    assert args["api_key"] == "***" and args["max_lora_rank"] == 32
    assert effective["async_scheduling"] is True


@pytest.mark.pure
@pytest.mark.parametrize("line,backend", [
    ("INFO 01-02 03:04:05 [cuda.py:446] Using AttentionBackendEnum.FLASHINFER backend.", "FLASHINFER"),
    ("INFO 01-02 03:04:05 [cpu.py:175] Using CPU_MLA backend.", "CPU_MLA"),
    ("[2026-03-21 03:31:56] INFO server_args.py:2233: Attention backend not specified. Use fa3 backend by default.", "fa3"),
])
def test_attention_backend_as_each_version_says_it(line, backend):
    assert read_effective([line])["attention_backend"] == backend


@pytest.mark.pure
def test_async_scheduling_turned_off_is_read_as_off():
    effective = read_effective(["WARNING 01-02 03:04:05 [vllm.py:1620] Async scheduling will be disabled because it is "
                                "not supported with the `ray` distributed executor backend. "])
    assert effective["async_scheduling"] is False


@pytest.mark.pure
def test_sglang_server_args():
    effective = read_effective(["[2026-05-15 08:39:19] server_args=ServerArgs(model_path='/m', tp_size=8, "
                                "mem_fraction_static=0.88, kv_cache_dtype='bf16', disable_radix_cache=True, page_size=256)"])
    assert effective["server"] == "sglang"
    assert effective["server_args"] == {"model_path": "/m", "tp_size": 8, "mem_fraction_static": 0.88,
                                        "kv_cache_dtype": "bf16", "disable_radix_cache": True, "page_size": 256}


@pytest.mark.pure
def test_a_log_with_nothing_to_read():
    assert read_effective(["READY http://127.0.0.1:8000", ""]) == {"schema_version": 1, "lines": []}


@pytest.mark.pure
def test_split_top_level_keeps_brackets_and_quotes_whole():
    assert split_top_level("a=1, b=(2, 3), c='x, y', d={'e': [4, 5]}, f=<E.G: 'h, i'>") == [
        "a=1", "b=(2, 3)", "c='x, y'", "d={'e': [4, 5]}", "f=<E.G: 'h, i'>"]


# -- the built-in target as the server ---------------------------------------------------------------------------

def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _descendants(root: int) -> set[int]:
    """Every live process under ``root``, read from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except (OSError, ValueError):
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if entry.isdigit() and fields[0] != b"Z":
            parents[int(entry)] = int(fields[1])
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


@pytest.mark.integration
def test_start_records_the_launch_and_stop_leaves_nothing(tmp_path):
    # The target behind a shell that also starts a process of its own, which ignores SIGINT (as a background job):
    # the group's SIGTERM ends it.
    command = ("sh", "-c", 'sleep 300 & exec "$@"', "sh", *SIM)
    launch = fill_port("sim", command, free_loopback_port(), {**SIM_ENV, "HF_TOKEN": "hf_planted"})
    said: list[str] = []
    with ManagedServer(launch, tmp_path, timeout_s=60, progress=said.append, grace_s=2) as server:
        ready = server.start()
        pgid = server.pgid
        members = set(group_members(pgid))
        assert len(members) == 3  # the keeper, the target, the sleep
        server.check_alive()
    assert ready.models == ("openai/gpt-oss-20b",) and ready.version is not None and 0 < ready.startup_s < 60
    assert _group_gone(pgid) and not any(map(_alive, members)) and _port_free(launch.port)
    shown = json.loads((tmp_path / "launch.json").read_text())
    assert shown["argv"] == [*command[:4], *SIM[:4], str(launch.port), *SIM[5:]]
    assert shown["env"] == {**SIM_ENV, "HF_TOKEN": "***"} and shown["port"] == launch.port and shown["started_at"]
    assert json.loads((tmp_path / "version.json").read_text()) == {"version": ready.version}
    startup = json.loads((tmp_path / "startup.json").read_text())
    assert startup["models"] == ["openai/gpt-oss-20b"] and startup["startup_s"] == round(ready.startup_s, 3)
    assert json.loads((tmp_path / "effective.json").read_text()) == ready.effective
    for name in ("metrics_before.txt", "metrics_after.txt"):
        assert "# TYPE" in (tmp_path / name).read_text()
    assert "READY http://127.0.0.1" in (tmp_path / "server.log").read_text()


@pytest.mark.integration
def test_a_command_that_exits_at_once_fails_to_start_with_its_log(tmp_path):
    launch = fill_port("bad", (*SIM, "--no-such-flag"), free_loopback_port(), SIM_ENV)
    server = ManagedServer(launch, tmp_path, timeout_s=60, progress=lambda _: None)
    with pytest.raises(ServerFailed) as failed:
        server.start()
    assert failed.value.phase == "start" and failed.value.exit_code == 2
    assert "--no-such-flag" in failed.value.log_tail and "--no-such-flag" in str(failed.value)
    assert _group_gone(server.pgid)
    assert not (tmp_path / "startup.json").exists() and (tmp_path / "launch.json").exists()


@pytest.mark.integration
def test_a_server_never_ready_fails_at_its_timeout_after_saying_how_it_goes(tmp_path):
    slow = (sys.executable, "-c", "import time; print('loading weights 3/9', flush=True); time.sleep(300)")
    said: list[str] = []
    server = ManagedServer(fill_port("slow", slow, free_loopback_port()), tmp_path, timeout_s=2.5, progress=said.append,
                           poll_s=0.1, progress_every_s=1.0, grace_s=2)
    with pytest.raises(ServerFailed) as failed:
        server.start()
    assert failed.value.phase == "start" and failed.value.exit_code is None
    assert "not ready within 2.5 s" in str(failed.value) and "loading weights 3/9" in failed.value.log_tail
    assert said and all("loading weights 3/9" in line and " s, not ready yet" in line for line in said)
    assert _group_gone(server.pgid)


KEY = "sk-planted-tune-5c1e"


@pytest.mark.integration
def test_a_server_that_needs_the_key_gets_it_and_no_file_holds_it(tmp_path):
    launch = fill_port("locked", SIM, free_loopback_port(), {**SIM_ENV, "VLLM_API_KEY": KEY})
    with ManagedServer(launch, tmp_path, timeout_s=60, api_key=KEY, progress=lambda _: None) as server:
        assert server.start().models == ("openai/gpt-oss-20b",)
    assert json.loads((tmp_path / "launch.json").read_text())["env"]["VLLM_API_KEY"] == "***"
    assert (tmp_path / "metrics_after.txt").exists()  # /metrics, too, was asked with the key
    assert [p.name for p in tmp_path.iterdir() if KEY.encode() in p.read_bytes()] == []


@pytest.mark.integration
def test_a_server_that_needs_a_key_not_given_fails_at_once(tmp_path):
    launch = fill_port("locked", SIM, free_loopback_port(), {**SIM_ENV, "VLLM_API_KEY": KEY})
    server = ManagedServer(launch, tmp_path, timeout_s=600, progress=lambda _: None)
    with pytest.raises(ServerFailed, match="needs an API key") as failed:
        server.start()
    assert failed.value.phase == "start" and _group_gone(server.pgid)


NO_HEALTH = textwrap.dedent("""
    import http.server, json, sys
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != "/v1/models":
                self.send_error(404)
                return
            body = json.dumps({"data": [{"id": "m1"}, {"id": "m2"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
""")


@pytest.mark.integration
def test_a_server_without_health_version_or_metrics(tmp_path):
    launch = fill_port("plain", (sys.executable, "-c", NO_HEALTH), free_loopback_port())
    with ManagedServer(launch, tmp_path, timeout_s=30, progress=lambda _: None, grace_s=2) as server:
        ready = server.start()
    assert ready.models == ("m1", "m2") and ready.version is None
    assert json.loads((tmp_path / "version.json").read_text()) is None
    assert not (tmp_path / "metrics_before.txt").exists() and not (tmp_path / "metrics_after.txt").exists()
    assert _group_gone(server.pgid) and _port_free(launch.port)


@pytest.mark.integration
@pytest.mark.parametrize("killed", ["server", "keeper"])
def test_a_server_killed_mid_run_is_told_by_check_alive(tmp_path, killed):
    launch = fill_port("sim", SIM, free_loopback_port(), SIM_ENV)
    with ManagedServer(launch, tmp_path, timeout_s=60, progress=lambda _: None) as server:
        server.start()
        pgid = server.pgid
        (target,) = set(group_members(pgid)) - {pgid}
        os.kill(target if killed == "server" else pgid, signal.SIGKILL)
        deadline_s = time.monotonic() + 10
        with pytest.raises(ServerFailed) as failed:
            while time.monotonic() < deadline_s:
                server.check_alive()
                time.sleep(0.05)
        assert failed.value.phase == "run" and failed.value.exit_code == (137 if killed == "server" else -9)
        assert not _alive(target) and group_members(pgid) == []
    assert _port_free(launch.port)


@pytest.mark.integration
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_the_server_dies_with_the_suite(tmp_path, signum):
    """The suite (a child Python here) killed -9: its keeper stops the group; SIGTERM or Ctrl-C: stop() runs."""
    suite = textwrap.dedent(f"""
        import signal, sys, time
        from pathlib import Path
        from llmload.tune.server import ManagedServer, fill_port

        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C, even where pytest's parent ignores it
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # as the suite's commands stop on SIGTERM
        launch = fill_port("sim", {list(SIM)!r}, {free_loopback_port()}, {SIM_ENV!r})
        with ManagedServer(launch, Path({str(tmp_path)!r}), timeout_s=60, progress=lambda _: None) as server:
            server.start()
            print(server.pgid, flush=True)
            time.sleep(300)
    """)
    child = subprocess.Popen([sys.executable, "-c", suite], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        pgid = int(child.stdout.readline())
        members = group_members(pgid)
        assert len(members) == 2
        child.send_signal(signum)
        assert child.wait(60) == {signal.SIGKILL: -9, signal.SIGTERM: 143, signal.SIGINT: -signal.SIGINT}[signum]
        deadline_s = time.monotonic() + 10
        while any(map(_alive, members)) and time.monotonic() < deadline_s:
            time.sleep(0.05)
        assert not any(map(_alive, members)) and group_members(pgid) == []
        # stop() ran (its last scrape) only where the suite had the chance
        assert (tmp_path / "metrics_after.txt").exists() == (signum != signal.SIGKILL)
    finally:
        child.kill()
        child.wait()


@pytest.mark.integration
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_while_the_server_is_spawned_waits_until_it_can_be_ended(tmp_path, signum):
    """A stop that comes while Popen spawns the keeper (its child runs, not yet held as the suite's): start() ends the
    group before the suite exits. The server ignores SIGINT, so only stop() (the keeper's SIGTERM after its grace)
    ends it while the suite waits; before, the suite exited at once and left it to the keeper (CI caught the window)."""
    suite = textwrap.dedent(f"""
        import signal, subprocess, sys, time
        from pathlib import Path
        from llmload.errors import Interrupted
        from llmload.system.processes import SignalForwarder
        import llmload.tune.server as server

        class LingeringPopen(subprocess.Popen):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                print(self.pid, flush=True)
                time.sleep(5)  # the window, widened: the signal comes now

        server.subprocess.Popen = LingeringPopen
        launch = server.fill_port("deaf", [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, "
                                  "signal.SIG_IGN); time.sleep(300)"], {free_loopback_port()}, {{}})
        try:
            with SignalForwarder("stopped"), server.ManagedServer(launch, Path({str(tmp_path)!r}), timeout_s=60,
                                                                  progress=lambda _: None, grace_s=1.0) as managed:
                managed.start()
        except Interrupted as e:
            sys.exit(e.exit_code)
    """)
    child = subprocess.Popen([sys.executable, "-c", suite], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        pgid = int(child.stdout.readline())
        deadline_s = time.monotonic() + 10
        while len(group_members(pgid)) < 2 and time.monotonic() < deadline_s:
            time.sleep(0.05)
        members = group_members(pgid)
        assert len(members) == 2
        child.send_signal(signum)
        assert child.wait(60) == 128 + signum
        assert not any(map(_alive, members)) and group_members(pgid) == []  # at the suite's exit, not after
    finally:
        child.kill()
        child.wait()


# -- the real vLLM (CPU build) as the server ----------------------------------------------------------------------

def _vllm_tiny_llama(*flags: str) -> tuple[str, ...]:
    """tiny-llama's command as llmload/vllm_cpu/launcher.py starts it, with ``flags`` added."""
    from llmload.vllm_cpu.launcher import serve_command

    return (*serve_command("tiny-llama", "{port}"), *flags)


@pytest.mark.vllm
def test_vllm_starts_says_what_it_ran_and_stops_with_its_engine(tmp_path):
    launch = fill_port("tiny-llama", _vllm_tiny_llama("--max-num-seqs", "8"), free_loopback_port(), server_env())
    with ManagedServer(launch, tmp_path, timeout_s=600, progress=lambda _: None) as server:
        ready = server.start()
        processes = _descendants(server.pgid) | {server.pgid}
        assert len(processes) >= 3  # the keeper, the API server, its engine core (and the engine's worker)
    assert ready.models == ("tiny-llama",) and ready.version and ready.version[0].isdigit()
    effective = json.loads((tmp_path / "effective.json").read_text())
    assert effective["server"] == "vllm" and effective["version"] == ready.version
    args = effective["non_default_args"]
    assert (args["max_num_seqs"], args["port"], args["max_model_len"]) == (8, launch.port, 10240)  # the launcher's
    assert effective["engine_config"]["max_seq_len"] == 10240 and effective["kv_cache_tokens"] > 0
    assert "vllm:" in (tmp_path / "metrics_before.txt").read_text()
    assert not any(map(_alive, processes)) and _group_gone(server.pgid) and _port_free(launch.port)


@pytest.mark.vllm
def test_vllm_refusing_a_flag_fails_to_start_with_its_words(tmp_path):
    launch = fill_port("tiny-llama", _vllm_tiny_llama("--max-num-seqs", "abc"), free_loopback_port(), server_env())
    server = ManagedServer(launch, tmp_path, timeout_s=600, progress=lambda _: None)
    with pytest.raises(ServerFailed) as failed:
        server.start()
    assert failed.value.phase == "start" and failed.value.exit_code not in (None, 0)
    assert "max-num-seqs" in failed.value.log_tail and "abc" in failed.value.log_tail
    assert _group_gone(server.pgid)
