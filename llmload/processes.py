"""Child processes and limits: what many streams and long sweeps need from the OS."""

from __future__ import annotations

import resource
import signal

__all__ = ["raise_fd_limit", "die_with_parent"]


def raise_fd_limit() -> None:
    """Lift the open-file soft limit to the hard one: 1,000 streams need more than the usual 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass  # keep the soft limit; only very high concurrency is affected, and fails as "connect"


def die_with_parent() -> None:
    """For ``preexec_fn``: the child gets SIGTERM when its parent dies, so a killed run leaves nothing running."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
