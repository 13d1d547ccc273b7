"""Start and stop a simulator subprocess (used by tests and by rehearsal runs)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from llmload.errors import ServerError
from llmload.system.processes import die_with_parent

READY_PREFIX = "READY "
IDENTITY_PATH = "/llmload/sim"
"""Where the built-in target says what it is (GPU profile, SPEEDUP); real servers answer 404, so a run tells them apart."""
# Directory that contains the llmload package, so the child imports this same copy.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def start_sim(args: list[str], timeout_s: float = 20.0, api_key: str = "", port: int = 0) -> tuple[subprocess.Popen, str]:
    """Launch `python -m llmload.sim ARGS --port PORT` (0: a free one); return (process, base URL) once READY.

    With ``api_key`` the simulator requires it (passed in its environment, not on its command line).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    for name in ("API_KEY", "VLLM_API_KEY"):
        env.pop(name, None)  # a key exported for a real server must not lock the built-in target
    if api_key:
        env["VLLM_API_KEY"] = api_key
    # stderr goes to a file so a chatty child can never block on a full pipe. Its own session keeps a
    # terminal's Ctrl-C away from it: it serves the streams of an interrupted run to their end, then stop_sim.
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "llmload.sim", *args, "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=env,
                            start_new_session=True, preexec_fn=die_with_parent)
    proc._sim_stderr = err  # type: ignore[attr-defined]  # kept for stop_sim/diagnostics
    deadline = time.monotonic() + timeout_s
    line = b""
    fd = proc.stdout.fileno()
    while not line.endswith(b"\n"):
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            _kill(proc)
            raise ServerError(f"simulator not READY within {timeout_s:g} s: {_release(proc)}")
        ready, _, _ = select.select([fd], [], [], left_s)
        if ready:
            data = os.read(fd, 1)  # byte-wise so nothing after the line is consumed
            if not data:
                rc = proc.wait()
                raise ServerError(f"simulator exited with code {rc} before READY: {_release(proc)}")
            line += data
    text = line.decode().strip()
    if not text.startswith(READY_PREFIX):
        _kill(proc)
        raise ServerError(f"unexpected first line from simulator: {text!r}: {_release(proc)}")
    return proc, text[len(READY_PREFIX):]


def stop_sim(proc: subprocess.Popen, timeout_s: float = 10.0) -> int:
    """SIGTERM the simulator (it flushes its send log), wait, return its exit code.

    Afterwards proc.sim_stderr holds everything the simulator wrote to stderr.
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
    _release(proc)
    return proc.returncode


def _kill(proc: subprocess.Popen) -> None:
    """Last resort for a hung child."""
    proc.kill()
    proc.wait()


def _release(proc: subprocess.Popen) -> str:
    """Close the child's pipes/files; return its stderr for error messages."""
    if proc.stdout is not None:
        proc.stdout.close()
    err = getattr(proc, "_sim_stderr", None)
    if err is None or err.closed:
        return "(no stderr)"
    err.seek(0)
    text = err.read().decode(errors="replace").strip()
    err.close()
    proc.sim_stderr = text  # type: ignore[attr-defined]  # lets callers check for warnings
    return text or "(empty stderr)"
