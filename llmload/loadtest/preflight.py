"""Checks before any load: the server answers, serves the model asked for, and what it is.

What engine it is comes from /v1/models' ``owned_by`` (vLLM: vllm; SGLang: sglang, its protocol.py ModelCard;
trtllm-serve: tensorrt_llm, its openai_protocol.py ModelCard); its version from /version (vLLM, trtllm-serve) or, for
SGLang, which has no /version, from /server_info's ``version`` (/get_server_info before 0.5).
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field
from typing import Any

import orjson

from llmload.system.control_http import get_json, request, server_root, split_base_url, tls_context
from llmload.errors import ConfigError, ControlCallFailed, LoadTestError, ServerError
from llmload.promptsets.tokens import prompt_tokens
from llmload.results.provenance import bare_model_name
from llmload.sim.launcher import IDENTITY_PATH

__all__ = ["ServerInfo", "ENGINE_BY_OWNER", "probe_server", "server_version", "check_api", "check_prefix_fits", "check_target_plays", "reset_prefix_cache",
           "simulator_identity",
           "resolve_model", "continuous_usage", "served_by", "tokenize_count"]


@dataclass(frozen=True)
class ServerInfo:
    """What the target told us about itself."""

    base_url: str
    models: tuple[str, ...]
    version: str | None
    """vLLM's ``/version``; None when the server has none (not vLLM)."""
    simulator: dict[str, Any] | None = None
    """The built-in target's own description (GPU profile, time scale, validation); None for any other server."""
    max_model_len: dict[str, int] = field(default_factory=dict)
    """Each model's max context in tokens, where /v1/models tells (vLLM's ``max_model_len``)."""
    engine: str | None = None
    """The engine /v1/models names (ENGINE_BY_OWNER: vllm, sglang, trtllm); None for another server."""


ENGINE_BY_OWNER = {"vllm": "vllm", "sglang": "sglang", "tensorrt_llm": "trtllm"}
"""/v1/models' ``owned_by`` by engine: what each engine writes in its model cards."""
_VERSION_PATHS = ("/version", "/server_info", "/get_server_info")
"""Where a server says its version: vLLM's and trtllm-serve's /version, SGLang's /server_info (0.5) or /get_server_info."""


def server_version(root: str, api_key: str = "", timeout_s: float = 10.0, engine: str | None = None) -> tuple[str | None, Any]:
    """(version, the answer it came from) by /version, or SGLang's /server_info and /get_server_info when ``engine``
    is sglang; (None, None) when the server says none."""
    for path in _VERSION_PATHS if engine == "sglang" else _VERSION_PATHS[:1]:
        try:
            answer = get_json(f"{root}{path}", api_key, timeout_s)
        except (ControlCallFailed, ValueError):  # any failure just means "not there"
            continue
        if isinstance(answer, dict) and answer.get("version") is not None:
            return str(answer["version"]), answer if path == "/version" else {"version": answer["version"], "from": path}
    return None, None


_TLS_HANDSHAKE_S = 3.0


def _check_tls(base_url: str, setting: str) -> None:
    """An https URL on a plain-HTTP port: say so at once, not "does not answer" once the probe times out."""
    scheme, host, port, _ = split_base_url(base_url)
    if scheme != "https":
        return
    try:
        with socket.create_connection((host, port), timeout=_TLS_HANDSHAKE_S) as sock:
            tls_context().wrap_socket(sock, server_hostname=host).close()
    except ssl.SSLCertVerificationError:
        return  # it speaks TLS; the probe reports the certificate in its own words
    except ssl.SSLError as e:
        raise ServerError(f"{setting}={base_url}: port {port} does not speak TLS ({e.reason or e}); use http://") from None
    except socket.timeout:
        raise ServerError(f"{setting}={base_url}: no TLS handshake within {_TLS_HANDSHAKE_S:g} s; "
                          "if it is a plain-HTTP server, use http://") from None
    except OSError:
        return  # refused or unreachable: the probe says so


def probe_server(base_url: str, api_key: str = "", timeout_s: float = 10.0, setting: str = "HOST") -> ServerInfo:
    """Ask ``/v1/models`` and ``/version``; ServerError names the setting (``setting``=base_url), what is wrong and the fix."""
    try:
        root = server_root(base_url)
    except ValueError:
        raise ServerError(f"{setting}={base_url} is not an http(s) URL; give e.g. http://127.0.0.1:8000") from None
    _check_tls(root, setting)
    try:
        listing = get_json(f"{root}/v1/models", api_key, timeout_s)
    except ControlCallFailed as e:
        if e.status in (401, 403):
            hint = ("the API key was refused" if api_key
                    else "it needs an API key: export API_KEY or OPENAI_API_KEY, or give API_KEY_FILE=path")
            raise ServerError(f"{setting}={base_url} answered {e.reason} to GET /v1/models: {hint}") from None
        if e.status is not None:
            raise ServerError(f"{setting}={base_url} answered {e.reason} to GET /v1/models") from None
        raise ServerError(f"{setting}={base_url} does not answer ({e.reason}); start the server or fix {setting}") from None
    except orjson.JSONDecodeError:
        raise ServerError(f"{setting}={base_url} is not an OpenAI-compatible server: /v1/models is not JSON") from None
    try:
        models = tuple(str(m["id"]) for m in listing["data"])
    except (KeyError, TypeError):
        raise ServerError(f"{setting}={base_url}: /v1/models has no data[].id list") from None
    max_model_len = {str(m["id"]): m["max_model_len"] for m in listing["data"]
                     if isinstance(m.get("max_model_len"), int) and not isinstance(m["max_model_len"], bool)}
    owners = {m.get("owned_by") for m in listing["data"] if isinstance(m, dict)}
    engine = ENGINE_BY_OWNER.get(owners.pop()) if len(owners) == 1 else None
    version = server_version(root, api_key, timeout_s, engine)[0]
    try:
        simulator = simulator_identity(root, api_key, timeout_s)
    except ControlCallFailed:
        simulator = None
    return ServerInfo(root, models, version, simulator, max_model_len, engine)


def check_api(info: ServerInfo, api: str, api_key: str = "", timeout_s: float = 10.0) -> None:
    """ServerError when ``api`` is responses and the server has no ``/v1/responses``.

    The probe posts an empty body, which a server with the route refuses (400 or 422: ``input`` is missing) before
    any generation; a server without it answers 404 (405 where only another method has the path)."""
    if api != "responses":
        return
    try:
        request(f"{info.base_url}/v1/responses", api_key, timeout_s, {})
    except ControlCallFailed as e:
        if e.status in (404, 405):
            raise ServerError(f"API=responses: {info.base_url} has no /v1/responses (POST answered {e.reason}); use "
                              "API=chat, or a server that serves the Responses API (as vLLM does)") from None
        if e.status is None:
            raise ServerError(f"API=responses: {info.base_url} does not answer POST /v1/responses ({e.reason})") from None


def simulator_identity(base_url: str, api_key: str = "", timeout_s: float = 10.0) -> dict[str, Any] | None:
    """The built-in target's own description (GET /llmload/sim: its GPU profile and time scale); None from a server
    that answers without one. ControlCallFailed when nothing answers; ValueError when ``base_url`` is not a URL."""
    try:
        answer = get_json(f"{server_root(base_url)}{IDENTITY_PATH}", api_key, timeout_s)
    except ControlCallFailed as e:
        if e.status is None:
            raise
        return None  # any answer but the description means a server other than the built-in target
    except orjson.JSONDecodeError:
        return None
    return answer if isinstance(answer, dict) else None


def resolve_model(requested: str, info: ServerInfo) -> str:
    """The model id to send: ``requested`` if served (a bare name matches ``org/name``), or the only one."""
    if not requested:
        if len(info.models) == 1:
            return info.models[0]
        raise ServerError(f"{info.base_url} serves {len(info.models)} models ({', '.join(info.models) or 'none'}); choose one with MODEL=")
    if requested in info.models:
        return requested
    by_name = [m for m in info.models if bare_model_name(m) == requested]
    if len(by_name) == 1:
        return by_name[0]
    raise ServerError(f"MODEL={requested} is not served by {info.base_url}; it serves: {', '.join(info.models) or 'nothing'}")


def check_prefix_fits(prefix_tokens: int, info: ServerInfo, model: str) -> None:
    """ConfigError when PREFIX_TOKENS alone, with the server's own frame around it, leaves no room in the model's
    context (where the server tells it)."""
    limit = info.max_model_len.get(model)
    if not prefix_tokens or limit is None:
        return
    needed = prompt_tokens([{"role": "system", "content": ""}, {"role": "user", "content": ""}]) + prefix_tokens
    if needed >= limit:
        raise ConfigError(f"PREFIX_TOKENS={prefix_tokens} does not fit {model}'s context on {info.base_url}: with the "
                          f"server's frame a prompt would be {needed} tokens or more, and the model takes {limit}; give "
                          f"PREFIX_TOKENS={max(0, limit - (needed - prefix_tokens) - 1)} or less")


def continuous_usage(choice: str, info: ServerInfo) -> bool:
    """CONTINUOUS_USAGE resolved: ``auto`` asks for usage on every chunk from vLLM and SGLang (0.5 serves
    ``continuous_usage_stats``), not from trtllm-serve (its gpt-oss path reads no stream_options), and from a server
    of no known engine only when it answers /version, as vLLM does."""
    if choice != "auto":
        return choice == "on"
    return info.engine in ("vllm", "sglang") if info.engine is not None else info.version is not None


def served_by(info: ServerInfo, model: str) -> dict[str, Any]:
    """What answered the requests, as the server itself reported it (never what a scenario declares).

    ``rehearsal`` is true for the built-in target, whose timings are simulated (on its own time scale), and its
    profile's ``validation`` says how far its predictions were checked against measurements.
    """
    if info.simulator is not None:
        sim = info.simulator
        return {"name": str(sim.get("served_by", "llmload.sim")), "rehearsal": True, "version": sim.get("version"),
                "model": model, "gpu_profile": sim.get("gpu_profile"), "speedup": float(sim.get("speedup") or 1.0),
                "profile": sim.get("profile"), "profile_kind": sim.get("profile_kind"),
                "validation": sim.get("validation"), "host": info.base_url, "engine": sim.get("dialect", "vllm")}
    return {"name": "server", "rehearsal": False, "version": info.version, "model": model, "host": info.base_url,
            "engine": info.engine}


def tokenize_count(info: ServerInfo, model: str, messages: list[dict[str, str]], api_key: str = "", timeout_s: float = 30.0) -> int:
    """The prompt length the server's ``/tokenize`` reports for a chat (its chat template applied)."""
    try:
        answer = get_json(f"{info.base_url}/tokenize", api_key, timeout_s, {"model": model, "messages": messages})
        return int(answer["count"])
    except ControlCallFailed as e:
        if e.status is None:
            raise ServerError(f"VERIFY={info.base_url}: /tokenize failed ({e.reason})") from None
        raise ServerError(f"VERIFY={info.base_url}: /tokenize answered {e.reason}; VERIFY needs a vLLM server") from None
    except (KeyError, TypeError, ValueError) as e:
        raise ServerError(f"VERIFY={info.base_url}: /tokenize answered without a count ({e})") from None


RESET_PATH = "/reset_prefix_cache"


FLUSH_PATH = "/flush_cache"
"""SGLang's reset of its radix (prefix) cache: 200, or 400 while requests run (sglang http_server.py flush_cache)."""


def reset_prefix_cache(base_url: str, api_key: str = "", timeout_s: float = 30.0) -> str:
    """CACHE_RESET=on: ask the server to empty its prefix cache (vLLM's POST /reset_prefix_cache, which it serves with
    VLLM_SERVER_DEV_MODE=1; where that is not offered, SGLang's POST /flush_cache); what came of it, in words (the
    result block and summary.json say it). trtllm-serve offers neither."""
    try:
        request(f"{base_url}{RESET_PATH}", api_key, timeout_s, {})
    except ControlCallFailed as e:
        if e.status in (404, 405):
            try:
                request(f"{base_url}{FLUSH_PATH}", api_key, timeout_s, {})
                return f"done before the run (POST {FLUSH_PATH}, SGLang's)"
            except ControlCallFailed as flush:
                if flush.status not in (404, 405):
                    return f"failed: POST {FLUSH_PATH} (SGLang's): {flush.reason}; the run went on with the cache as it was"
            return (f"not offered: POST {RESET_PATH} answered {e.reason} (vLLM serves it with VLLM_SERVER_DEV_MODE=1), "
                    f"and POST {FLUSH_PATH} (SGLang's) neither; the run went on with the cache as it was")
        return f"failed: POST {RESET_PATH}: {e.reason}; the run went on with the cache as it was"
    return f"done before the run (POST {RESET_PATH})"


def check_target_plays(gpu: str, served_by: dict[str, Any]) -> None:
    """The built-in target plays the GPU it was started with: a form cannot change it mid-run (its time scale is
    resolved from the target: llmload/timescale.py)."""
    if not served_by.get("rehearsal"):
        return
    playing = served_by.get("gpu_profile")
    if playing and gpu.strip().lower() != playing:
        raise LoadTestError(f"GPU={gpu}: the built-in target plays {playing} and cannot change while it runs; "
                            f"set GPU={playing}, or stop and start again with GPU={gpu}")
