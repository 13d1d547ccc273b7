"""Ports the suite listens on (WEB_PORT, METRICS_PORT, MONITOR_PORT), checked free before anything starts."""

from __future__ import annotations

import errno
import socket

from llmload.errors import ConfigError

__all__ = ["check_port_free", "free_loopback_port"]


def check_port_free(key: str, host: str, port: int, who: str) -> None:
    """ConfigError unless ``host:port`` can be listened on (as gevent's and Prometheus's servers do: SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise ConfigError(f"{key}={port}: {host}:{port} is taken ({who}); stop it or give another {key}") from None
            raise ConfigError(f"{key}={port}: {host}:{port} cannot be listened on ({e.strerror or e}); "
                              f"give another address or {key}") from None


def free_loopback_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now: for a listener only this machine's processes reach."""
    with socket.socket(socket.AF_INET) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
