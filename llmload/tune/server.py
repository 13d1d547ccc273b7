"""One server configuration's life for `make tune`: start it, wait until it serves, record what it ran, stop it.

    launch = fill_port("base", "vllm serve openai/gpt-oss-120b --port {port}", free_loopback_port())
    with ManagedServer(launch, Path("results/tune/base"), timeout_s=1200) as server:
        ready = server.start()      # ServerFailed(phase="start") with the log's tail
        ...                         # load it; server.check_alive() between runs
    # stopped here, also after an exception; after kill -9 of the suite its keeper stops it

The command must stay in the foreground while it serves (`docker run --rm`, not `docker run -d`; `ssh` without
`-f`): its exit is read as the server's, and what it left running outside its process group is out of reach.
Files in ``folder``: launch.json (secrets as ***), server.log, version.json, startup.json, effective.json,
metrics_before.txt and metrics_after.txt (when the server has Prometheus metrics: vLLM's and SGLang's /metrics,
trtllm-serve's /prometheus/metrics).

Ready is /health answering 200 (or 404: it has none) and /v1/models listing a model: SGLang's /health says 503 until
its warm-up request is served, though its /v1/models answers before; trtllm-serve's and vLLM's say 200 once they serve.
The engine is what /v1/models' owned_by names; its version /version's, or SGLang's /server_info's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from llmload.errors import ConfigError, ControlCallFailed, ServerFailed
from llmload.loadtest.preflight import ENGINE_BY_OWNER, server_version
from llmload.results.engine_metrics import METRICS_PATHS
from llmload.results.server_metrics import parse_prometheus
from llmload.system.control_http import get_json, request
from llmload.system.listening import check_port_free
from llmload.system.processes import stop_signals_deferred

from . import keeper
from .effective import SECRET_KEYS, read_effective

__all__ = ["Launch", "Ready", "ServerFailed", "ManagedServer", "fill_port"]

SCHEMA_VERSION = 1
PORT_FIELD = "{port}"
_KEEPER = Path(keeper.__file__).resolve()
_TAIL_LINES = 40
_PROBE_TIMEOUT_S = 5.0
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|LOGIN|CREDENTIAL", re.IGNORECASE)
_SECRET_FLAGS = frozenset("--" + key.replace("_", "-") for key in SECRET_KEYS) | {"--token"}


@dataclass(frozen=True)
class Launch:
    """One configuration's launch, exactly as run."""

    name: str
    argv: tuple[str, ...]
    """The command, its {port} filled (or --port appended): fill_port makes it."""
    env: dict[str, str]
    """Variables added to the suite's environment for it."""
    port: int
    """Where it serves, on 127.0.0.1."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Ready:
    """What a started server said about itself."""

    startup_s: float
    """From launch to its first listing of models."""
    models: tuple[str, ...]
    version: str | None
    """GET /version's (vLLM's); None when the server has no such route."""
    effective: dict[str, Any]
    """What its log says it ran with (effective.read_effective)."""
    engine: str | None = None
    """What /v1/models' owned_by names: vllm, sglang, trtllm (preflight.ENGINE_BY_OWNER); None for another server."""


def fill_port(name: str, command: str | Sequence[str], port: int, env: dict[str, str] | None = None) -> Launch:
    """The Launch of ``command`` (a shell-quoted string, or its words) with its one ``{port}`` replaced by ``port``,
    or ``--port PORT`` appended when it has none (a `docker run -p {port}:8000 ...` needs the field)."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ConfigError(f"{name}: the server command is empty; give one, e.g. 'vllm serve MODEL --port {PORT_FIELD}'")
    count = sum(word.count(PORT_FIELD) for word in argv)
    if count > 1:
        raise ConfigError(f"{name}: the server command gives {PORT_FIELD} {count} times ({shlex.join(argv)}); "
                          f"give it once, where the server's port goes, or not at all (--port N is appended)")
    argv = [word.replace(PORT_FIELD, str(port)) for word in argv] if count else [*argv, "--port", str(port)]
    return Launch(name, tuple(argv), dict(env or {}), port)


def _shown(launch: Launch, api_key: str) -> dict[str, Any]:
    """launch.json's content: secrets (a key in a flag's value, a *KEY*/*TOKEN* variable, the API key) as ***."""
    argv, hide_next = [], False
    for word in launch.argv:
        flag, equals, _ = word.partition("=")
        if hide_next:
            word, hide_next = "***", False
        elif flag in _SECRET_FLAGS:
            word, hide_next = (f"{flag}=***", False) if equals else (word, True)
        argv.append(word.replace(api_key, "***") if api_key else word)
    env = {k: "***" if _SECRET_NAME.search(k) or (api_key and api_key in v) else v for k, v in launch.env.items()}
    return {"schema_version": SCHEMA_VERSION, "name": launch.name, "argv": argv, "env": env, "port": launch.port,
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, default=str) + "\n")


class ManagedServer:
    """A configuration's server in a process group of its own, led by a keeper (keeper.py) that stops the group
    when the suite dies; stop() (or leaving the ``with``) stops it and waits until its port is free.

    Call start() on the thread that lives as long as the server (the main one): the kernel tells the keeper of
    its parent's death per thread (PR_SET_PDEATHSIG).
    """

    def __init__(self, launch: Launch, folder: Path, timeout_s: float = 1200.0, api_key: str = "",
                 progress: Callable[[str], None] = print, poll_s: float = 0.5, grace_s: float = 15.0,
                 port_wait_s: float = 30.0, progress_every_s: float = 10.0) -> None:
        self.launch = launch
        self.folder = Path(folder)
        self.timeout_s = timeout_s
        self.api_key = api_key
        self.progress = progress
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.port_wait_s = port_wait_s
        self.progress_every_s = progress_every_s
        self.log = self.folder / "server.log"
        self._process: subprocess.Popen | None = None
        self._ended = False  # its group is gone
        self._engine: str | None = None  # what its /v1/models' owned_by names
        self._stopped = False  # stop() ran

    @property
    def pgid(self) -> int | None:
        """The server's process group (its keeper's pid); None before start()."""
        return None if self._process is None else self._process.pid

    def __enter__(self) -> "ManagedServer":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            self.stop()
        except ServerFailed:
            if exc_type is None:
                raise  # else the exception that ended the block is the one to tell

    def start(self) -> Ready:
        """Launch, then wait until /health answers 200 (or 404: it has none) and /v1/models lists a model."""
        if self._process is not None:
            raise RuntimeError(f"{self.launch.name}: start() was called already")
        check_port_free("port", "127.0.0.1", self.launch.port, f"something listens there before {self.launch.name} starts")
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_json(self.folder / "launch.json", _shown(self.launch, self.api_key))
        command = [sys.executable, "-I", str(_KEEPER), "--parent", str(os.getpid()), "--grace-s", f"{self.grace_s:g}",
                   "--", *self.launch.argv]
        started_s = time.monotonic()
        # A stop signal waits while the keeper is spawned, until self._process can be ended: a Ctrl-C inside Popen
        # left the keeper and its server to outlive the suite until the keeper saw it go.
        with stop_signals_deferred(), self.log.open("wb") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                             env={**os.environ, **self.launch.env}, start_new_session=True)
        try:
            models = self._wait_ready(started_s)
            startup_s = time.monotonic() - started_s
            return self._record_ready(startup_s, models)
        except BaseException:
            self._end_group()
            raise

    def check_alive(self) -> None:
        """ServerFailed(phase="run") when the server's group leader (its keeper) has exited."""
        if self._process is None or self._stopped:
            return
        code = self._process.poll()
        if code is not None:
            self._end_group()
            raise self._failed("run", f"the server exited with code {code} while in use", code)

    def stop(self) -> None:
        """GET /metrics (metrics_after.txt), stop the group (SIGINT, SIGTERM, SIGKILL), wait until the port is free."""
        if self._process is None or self._stopped:
            return
        self._stopped = True
        if self._process.poll() is None:
            self._save_metrics("metrics_after.txt")
        self._end_group()
        self._wait_port_free()

    # -- the steps ------------------------------------------------------------------------------------------------

    def _wait_ready(self, started_s: float) -> tuple[str, ...]:
        assert self._process is not None
        next_progress_s = started_s + self.progress_every_s
        while True:
            code = self._process.poll()
            if code is not None:
                raise self._failed("start", f"the server exited with code {code} before it was ready", code)
            models = self._models()
            if models:
                return models
            now_s = time.monotonic()
            if now_s - started_s >= self.timeout_s:
                raise self._failed("start", f"the server was not ready within {self.timeout_s:g} s "
                                            "(give more with SERVE_TIMEOUT, in seconds)")
            if now_s >= next_progress_s:
                self.progress(f"{self.launch.name}: {now_s - started_s:.0f} s, not ready yet; "
                              f"its log: {_last_line(self.log)[:200]}")
                next_progress_s += self.progress_every_s
            time.sleep(self.poll_s)

    def _models(self) -> tuple[str, ...]:
        """The models it lists once healthy; () while it is not."""
        root = self.launch.base_url
        try:
            request(f"{root}/health", self.api_key, _PROBE_TIMEOUT_S)
        except ControlCallFailed as e:
            if e.status != 404:  # 404: no /health route; /v1/models alone tells
                return ()
        try:
            listing = get_json(f"{root}/v1/models", self.api_key, _PROBE_TIMEOUT_S)
            models = tuple(str(model["id"]) for model in listing["data"])
            owners = {model.get("owned_by") for model in listing["data"]}
            self._engine = ENGINE_BY_OWNER.get(owners.pop()) if len(owners) == 1 else None
            return models
        except ControlCallFailed as e:
            if e.status in (401, 403):
                hint = "the API key was refused" if self.api_key else "it needs an API key: give API_KEY"
                raise self._failed("start", f"the server answered {e.reason} to GET /v1/models: {hint}") from None
            return ()
        except (ValueError, KeyError, TypeError):
            return ()

    def _record_ready(self, startup_s: float, models: tuple[str, ...]) -> Ready:
        version, answer = server_version(self.launch.base_url, self.api_key, _PROBE_TIMEOUT_S, self._engine)
        _write_json(self.folder / "version.json", answer)
        _write_json(self.folder / "startup.json", {"schema_version": SCHEMA_VERSION, "name": self.launch.name,
                                                   "startup_s": round(startup_s, 3), "models": list(models),
                                                   "engine": self._engine,
                                                   "pgid": self.pgid})  # the group its keeper ends
        self._save_metrics("metrics_before.txt")
        with self.log.open(errors="replace") as log:
            effective = read_effective(log)
        _write_json(self.folder / "effective.json", effective)
        return Ready(startup_s, models, version, effective, self._engine)

    def _save_metrics(self, name: str) -> None:
        """GET /metrics (else trtllm-serve's /prometheus/metrics: its /metrics is JSON) into ``name``; nothing when the
        server has Prometheus text at neither."""
        for path in METRICS_PATHS:
            try:
                text = request(f"{self.launch.base_url}{path}", self.api_key, 10.0).decode(errors="replace")
            except ControlCallFailed:
                continue
            if parse_prometheus(text):
                (self.folder / name).write_text(text)
                return

    def _end_group(self) -> None:
        """Stop the group through its keeper (it signals SIGINT, SIGTERM, SIGKILL); SIGKILL it ourselves when the
        keeper outlives its own steps or is gone with processes left behind (killed with -9)."""
        process = self._process
        if process is None or self._ended:
            return
        self._ended = True
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(2 * self.grace_s + 15.0)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        deadline_s = time.monotonic() + 10.0
        while keeper.group_members(process.pid) and time.monotonic() < deadline_s:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            time.sleep(0.1)

    def _wait_port_free(self) -> None:
        deadline_s = time.monotonic() + self.port_wait_s
        while True:
            try:
                check_port_free("port", "127.0.0.1", self.launch.port, "")
                return
            except ConfigError:
                if time.monotonic() >= deadline_s:
                    raise self._failed("stop", f"port {self.launch.port} is still taken {self.port_wait_s:g} s after "
                                               "the server stopped; the next configuration cannot take it") from None
                time.sleep(0.2)

    def _failed(self, phase: str, what: str, exit_code: int | None = None) -> ServerFailed:
        tail = _tail(self.log)
        last = _last_error(tail)
        return ServerFailed(f"{self.launch.name}: {what}; its log says: {last} (full log: {self.log})", phase, tail,
                            exit_code)


def _tail(log: Path, lines: int = _TAIL_LINES, max_bytes: int = 65536) -> str:
    """The last ``lines`` lines of ``log`` (read from its last ``max_bytes``)."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - max_bytes))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def _last_line(log: Path) -> str:
    lines = [line.strip() for line in _tail(log, 10, 8192).splitlines() if line.strip()]
    return lines[-1] if lines else "(nothing yet)"


def _last_error(tail: str) -> str:
    """The tail's line most likely to say what went wrong: the last naming an error, else the last line."""
    lines = [line.strip() for line in tail.splitlines() if line.strip() and not line.startswith("[llmload keeper]")]
    errors = [line for line in lines if re.search(r"error|Error|ERROR", line)]
    return (errors or lines or ["(no output)"])[-1][:300]
