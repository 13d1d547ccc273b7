"""The leader of a server's process group: starts the server's command in its group, and stops the whole group
when told to (SIGTERM, SIGINT, SIGHUP) or when the suite that started it dies, even by kill -9.

    python keeper.py --parent PID [--grace-s 15] -- COMMAND...

PR_SET_PDEATHSIG reaches only a direct child, so the suite starts this keeper, never the server itself: the keeper
gets SIGTERM when its parent dies, then signals its group SIGINT, waits up to grace_s, SIGTERM, waits, and SIGKILLs
what is left (vLLM's engine-core processes, a `docker run` client, an `ssh` included). As the group's child
subreaper it collects every descendant, so "no process left" is known, not guessed. It exits with the command's
exit code (128 + N after signal N), also when the command exits on its own (the rest of the group stopped first).
Standard library only: it runs as a script, with no PYTHONPATH that would change the server's environment.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import time

__all__ = ["group_members", "main"]

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_WATCHED = {signal.SIGCHLD, *_STOP}
_KILL_WAIT_S = 10.0
# Dispositions the command gets back: Python ignores SIGPIPE and SIGXFSZ, and a suite started with `&` ignores SIGINT.
_DEFAULTED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ)


def _processes() -> list[tuple[int, bytes, int, int]]:
    """(pid, state, ppid, pgrp) of each process in /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2:
            found.append((int(entry), fields[0], int(fields[1]), int(fields[2])))
    return found


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of group ``pgid``."""
    return [pid for pid, state, _, pgrp in _processes() if pgrp == pgid and state != b"Z"]


def _children_of(parent: int) -> list[int]:
    return [pid for pid, _, ppid, _ in _processes() if ppid == parent]


def _say(text: str) -> None:
    print(f"[llmload keeper] {text}", file=sys.stderr, flush=True)


class _Keeper:
    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.pgid = os.getpgrp()
        self.child: int | None = None
        self.code: int | None = None  # the command's exit code, once reaped

    def reap(self) -> bool:
        """Collect every exited descendant; whether any is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.child:
                code = os.waitstatus_to_exitcode(status)
                self.code = 128 - code if code < 0 else code

    def wait(self, until_s: float, for_command_only: bool = False) -> bool:
        """Reap until no descendant is left (or the command exited: ``for_command_only``) or ``until_s``;
        whether that happened; a stop signal ends the wait early (False) unless already stopping."""
        while True:
            left = self.reap()
            if not left or (for_command_only and self.code is not None):
                return True
            timeout_s = until_s - time.monotonic()
            if timeout_s <= 0:
                return False
            info = signal.sigtimedwait(_WATCHED, min(timeout_s, 1.0))
            if for_command_only and info is not None and info.si_signo in _STOP:
                return False

    def stop_group(self) -> None:
        """SIGINT, SIGTERM (each with grace_s to go), then SIGKILL each process left."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            if not self.reap():
                return
            if signum == signal.SIGTERM:
                _say(f"the group did not stop within {self.grace_s:g} s of SIGINT: SIGTERM")
            os.killpg(self.pgid, signum)  # reaches the keeper too: blocked, and read as a stop it is already doing
            if self.wait(time.monotonic() + self.grace_s):
                return
        _say(f"the group did not stop within {self.grace_s:g} s of SIGTERM: SIGKILL")
        until_s = time.monotonic() + _KILL_WAIT_S
        while self.reap() and time.monotonic() < until_s:
            for pid in {*group_members(self.pgid), *_children_of(os.getpid())} - {os.getpid()}:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.wait(min(until_s, time.monotonic() + 0.2))


def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="keeper.py", description=__doc__.splitlines()[0])
    parser.add_argument("--parent", type=int, required=True, help="the pid whose death stops the server")
    parser.add_argument("--grace-s", type=float, default=15.0, help="seconds after SIGINT, then after SIGTERM")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    # Blocked before anything else: a stop (or the parent's death) from now on waits in sigtimedwait, never lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    if os.getpgrp() != os.getpid():
        os.setsid()  # started by hand, not by the suite: a group of its own, so killpg reaches only the server's
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != args.parent:
        return 128 + signal.SIGTERM  # the suite died before the keeper could watch it: start nothing
    keeper = _Keeper(args.grace_s)
    try:
        keeper.child = os.posix_spawnp(command[0], command, os.environ, setsigmask=(), setsigdef=_DEFAULTED)
    except OSError as e:
        _say(f"cannot start {command[0]}: {e.strerror or e}")
        return 127 if isinstance(e, FileNotFoundError) else 126
    keeper.wait(float("inf"), for_command_only=True)  # until the command exits on its own, or a stop
    keeper.stop_group()  # the whole group, or what the command left of it
    return keeper.code if keeper.code is not None else 128 + signal.SIGKILL


if __name__ == "__main__":
    sys.exit(main())
