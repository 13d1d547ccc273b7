"""Ports the suite listens on (WEB_PORT, METRICS_PORT, MONITOR_PORT), checked free before anything starts."""

from __future__ import annotations

import errno
import socket

from llmload.errors import ConfigError

__all__ = ["check_port_free"]


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
