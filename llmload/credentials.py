"""The secrets a run uses, never read from a command line (ps shows command lines): the API key, WEB_LOGIN and
METRICS_LOGIN, and the rule that METRICS_PORT serves other machines only behind METRICS_LOGIN."""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path

from llmload.system.control_http import server_root
from llmload.errors import ConfigError

__all__ = ["read_api_key", "api_key_for", "web_login", "metrics_login", "check_metrics_host", "is_loopback", "loopback_hosts"]

logger = logging.getLogger("llmload")


def read_api_key(key_file: str = "") -> str:
    """The API key: API_KEY_FILE's first line, else $API_KEY, else $OPENAI_API_KEY; empty when none."""
    if not key_file:
        return os.environ.get("API_KEY") or os.environ.get("OPENAI_API_KEY", "")
    try:
        lines = Path(key_file).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"API_KEY_FILE={key_file} cannot be read ({getattr(e, 'strerror', None) or e}); give a file holding the key") from None
    key = lines[0].strip() if lines else ""
    if not key:
        raise ConfigError(f"API_KEY_FILE={key_file} is empty; its first line must be the key")
    return key


def api_key_for(host: str, start_host: str, typed: str = "") -> str:
    """The key a test sends to ``host``: one ``typed`` into the web UI's form, else the environment's, but only
    to the host it was given with (``start_host``): a key never follows a change of host."""
    if typed:
        return typed
    key = read_api_key()
    if key and not _same_server(host, start_host):
        logger.warning("HOST changed from %s to %s: the API key is not sent there; type one in the form's API key field",
                       start_host, host)
        return ""
    return key


def _same_server(a: str, b: str) -> bool:
    try:
        return server_root(a) == server_root(b)
    except ValueError:
        return False


def web_login() -> tuple[str, str] | None:
    """(user, password) from $WEB_LOGIN (``user:password``), or None when it is not set."""
    return _login("WEB_LOGIN")


def metrics_login() -> tuple[str, str] | None:
    """(user, password) from $METRICS_LOGIN (``user:password``), or None when it is not set."""
    return _login("METRICS_LOGIN")


def _login(key: str) -> tuple[str, str] | None:
    text = os.environ.get(key, "")
    if not text:
        return None
    user, sep, password = text.partition(":")
    if not (sep and user and password):
        raise ConfigError(f"{key} must be user:password, both non-empty")
    return user, password


def check_metrics_host(metrics_host: str, metrics_port: int) -> None:
    """ConfigError when METRICS_PORT would serve other machines (METRICS_HOST not loopback) without METRICS_LOGIN."""
    if metrics_port and metrics_login() is None and not is_loopback(metrics_host):
        raise ConfigError(f"METRICS_HOST={metrics_host} lets other machines read the run's metrics; set "
                          "METRICS_LOGIN=user:password too (Prometheus's basic_auth), or leave METRICS_HOST=127.0.0.1")


def loopback_hosts(host: str, port: int) -> set[str] | None:
    """The Host header values a server listening on loopback ``host:port`` accepts (lower case: compare the header
    lowered); None off loopback, where a login guards it instead. A foreign Host on loopback is DNS rebinding."""
    if not is_loopback(host):
        return None
    return {f"{host.lower()}:{port}", f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1); a name other than localhost may resolve anywhere."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
