"""Fixtures (the built-in target, started as its own process: it is asyncio, Locust is gevent) and the test tiers.

Every test carries exactly one tier, a module's ``pytestmark`` or its own mark (collection fails otherwise):
    pure         no process, no socket, no file of the working tree that a command writes (`make test-fast`);
                 a pure test that starts a process or opens a network socket fails at that call, and runs
                 in an empty folder (a relative prompts/ or results/ finds nothing)
    integration  servers and subprocesses: the built-in target, Locust, the CLI as a process
    vllm         the real vLLM (CPU build) from ~/.cache/llmload
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from llmload.sim import start_sim, stop_sim

REPO = Path(__file__).resolve().parents[1]
TIERS = ("pure", "integration", "vllm")
_EMPTY_FOLDER = Path(tempfile.mkdtemp(prefix="llmload-pure-"))
"""Where a pure test runs: a folder with nothing in it."""


def pytest_sessionfinish() -> None:
    shutil.rmtree(_EMPTY_FOLDER, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    wrong = []
    for item in items:
        tiers = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
        if len(tiers) != 1:
            wrong.append(f"{item.nodeid} ({' and '.join(tiers) or 'none'})")
    if wrong:
        raise pytest.UsageError(f"each test needs exactly one tier mark of {', '.join(TIERS)} (tests/conftest.py); "
                                f"{len(wrong)} have not: {'; '.join(wrong[:10])}{'; ...' if len(wrong) > 10 else ''}")


class NotPure(AssertionError):
    """A test of the pure tier started a process or opened a network socket."""


def _refuse(what: str) -> Callable[..., None]:
    def refuse(*args, **kwargs) -> None:
        raise NotPure(f"a pure test may not {what}: mark it integration, or keep it in the process")
    return refuse


def _kept_pure(item: pytest.Item) -> Iterator[None]:
    """Around a pure test's setup (its module and session fixtures' too), call and teardown: no process, no socket."""
    if item.get_closest_marker("pure") is None:
        yield
        return
    patch = pytest.MonkeyPatch()
    patch.setattr(subprocess.Popen, "_execute_child", _refuse("start a process"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            patch.setattr(os, name, _refuse("start a process"))
    for name in ("bind", "connect", "connect_ex"):
        patch.setattr(socket.socket, name, _refuse("open a network socket"))
    patch.chdir(_EMPTY_FOLDER)  # relative paths (prompts/, results/) lead to no file of the working tree
    try:
        yield
    finally:
        patch.undo()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _kept_pure(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _kept_pure(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _kept_pure(item)


@pytest.fixture
def in_process(capsys: pytest.CaptureFixture) -> Callable[..., subprocess.CompletedProcess]:
    """Call a command's ``main(argv)`` in this process; its exit code and output, as ``run_cli`` returns them."""
    def call(main: Callable[[list[str]], int], *args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code
        printed = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, printed.out, printed.err)
    return call


@pytest.fixture
def cli(in_process: Callable[..., subprocess.CompletedProcess]) -> Callable[..., subprocess.CompletedProcess]:
    """``python -m llmload ARGS`` in this process (llmload.cli.main): for the checks of bad input, which start nothing."""
    from llmload.cli import main

    return lambda *args: in_process(main, *args)


@pytest.fixture(scope="module")
def sim_fixed():
    """A target with fixed timing: TTFT 100 ms, ITL 20 ms."""
    process, url = start_sim(["--fixed-ttft-ms", "100", "--fixed-itl-ms", "20"])
    yield url
    stop_sim(process)


def run_cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """``python -m llmload ARGS`` from the repo root, as the Makefile runs it."""
    return subprocess.run([sys.executable, "-m", "llmload", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
