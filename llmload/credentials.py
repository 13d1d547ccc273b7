"""The secrets a run uses, never read from a command line (ps shows command lines): the API key and WEB_LOGIN."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from llmload.control_http import server_root
from llmload.errors import ConfigError

__all__ = ["read_api_key", "api_key_for", "web_login"]

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
    text = os.environ.get("WEB_LOGIN", "")
    if not text:
        return None
    user, sep, password = text.partition(":")
    if not (sep and user and password):
        raise ConfigError("WEB_LOGIN must be user:password, both non-empty")
    return user, password
