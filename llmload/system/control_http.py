"""Control calls to a server (probe, /metrics, /tokenize, health waits): one small HTTP helper.

Proxy policy: every call to a server goes straight to HOST. HTTP_PROXY, HTTPS_PROXY, ALL_PROXY
and NO_PROXY are ignored by control calls and by both streaming clients, because a load test
measures the server, not a proxy between it and us. The API key, when given, is sent with every
call as ``Authorization: Bearer``; it never appears in an error message.
"""

from __future__ import annotations

import socket
import ssl
import time
import urllib.error
import urllib.request
from functools import lru_cache
from typing import Any, Callable
from urllib.parse import urlsplit

import orjson

from llmload.errors import ControlCallFailed

__all__ = ["tls_context", "split_base_url", "server_root", "request", "get_json", "healthy", "wait_healthy"]

# No ProxyHandler: urllib's default opener would read the *_PROXY environment variables.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """One CA-bundle load per process: each load costs ~33 ms of CPU, during which, under gevent,
    every stream in flight stalls (a reconnect mid-run would show it as latency)."""
    return ssl.create_default_context()


def split_base_url(base_url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of a server root; a trailing ``/v1`` is dropped."""
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {base_url!r}")
    prefix = parts.path.rstrip("/")
    if prefix.endswith("/v1"):
        prefix = prefix[:-3]
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port, prefix


def server_root(base_url: str) -> str:
    """``scheme://host:port[/prefix]`` of a server, however HOST was written."""
    scheme, host, port, prefix = split_base_url(base_url)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}{prefix}"


def request(url: str, api_key: str = "", timeout_s: float = 10.0, json_body: Any = None) -> bytes:
    """GET ``url`` (POST when ``json_body`` is given), directly; the body, or ControlCallFailed."""
    headers = {"User-Agent": "llmload"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    data = None
    if json_body is not None:
        data = orjson.dumps(json_body)
        headers["Content-Type"] = "application/json"
    try:
        with _DIRECT.open(urllib.request.Request(url, data=data, headers=headers), timeout=timeout_s) as response:
            return response.read()
    except urllib.error.HTTPError as e:
        e.close()
        raise ControlCallFailed(url, f"{e.code} {e.reason}", e.code) from None
    except urllib.error.URLError as e:
        raise ControlCallFailed(url, str(e.reason)) from None
    except (socket.timeout, TimeoutError):
        raise ControlCallFailed(url, f"no answer within {timeout_s:g} s") from None
    except OSError as e:
        raise ControlCallFailed(url, e.strerror or str(e)) from None


def get_json(url: str, api_key: str = "", timeout_s: float = 10.0, json_body: Any = None) -> Any:
    """``request``'s answer parsed as JSON (orjson.JSONDecodeError, a ValueError, when it is not)."""
    return orjson.loads(request(url, api_key, timeout_s, json_body))


def healthy(url: str, api_key: str = "", timeout_s: float = 2.0) -> bool:
    """Whether GET ``url`` (e.g. a server's /health) answers 2xx."""
    try:
        request(url, api_key, timeout_s)
        return True
    except ControlCallFailed:
        return False


def wait_healthy(url: str, deadline_s: float, still_starting: Callable[[], bool] = lambda: True, api_key: str = "",
                 poll_s: float = 0.5) -> bool:
    """Poll ``url`` until healthy (True), or until ``time.monotonic()`` passes ``deadline_s`` or
    ``still_starting()`` turns false (False)."""
    while not healthy(url, api_key):
        if not still_starting() or time.monotonic() > deadline_s:
            return False
        time.sleep(poll_s)
    return True
