"""Process limits that many concurrent streams need."""

from __future__ import annotations

import resource

__all__ = ["raise_fd_limit"]


def raise_fd_limit() -> None:
    """Lift the open-file soft limit to the hard one: 1,000 streams need more than the usual 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass  # keep the soft limit; only very high concurrency is affected, and fails as "connect"
