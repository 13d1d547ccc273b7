"""Fixtures: the built-in target, started as its own process (it is asyncio; Locust is gevent)."""

import subprocess
import sys
from pathlib import Path

import pytest

from llmload.sim import start_sim, stop_sim

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sim_fixed():
    """A target with fixed timing: TTFT 100 ms, ITL 20 ms."""
    process, url = start_sim(["--fixed-ttft-ms", "100", "--fixed-itl-ms", "20"])
    yield url
    stop_sim(process)


def run_cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """``python -m llmload ARGS`` from the repo root, as the Makefile runs it."""
    return subprocess.run([sys.executable, "-m", "llmload", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
