"""The web UI obeys only its own page: no state change from another origin, no CORS, WEB_LOGIN.

Locust's UI answers CORS with any caller's Origin and takes a cross-site ``POST /swarm``, so any
page open in the user's browser could start or retarget a test. The guard wraps the WSGI app (so it
sees Locust's final headers): it refuses a state-changing request whose Origin (or Referer) is not
the UI's own, drops every CORS header, and on 127.0.0.1 refuses a foreign Host (DNS rebinding).
"""

from __future__ import annotations

import hmac
import logging
import secrets
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from llmload.credentials import loopback_hosts, web_login

__all__ = ["install_webui_guard"]

logger = logging.getLogger("llmload")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOGIN_SUBMIT_PATH = "/login_submit"


def install_webui_guard(web_ui: Any, web_host: str, web_port: int) -> None:
    """Guard Locust's web UI listening on ``web_host:web_port``; with --web-login, check $WEB_LOGIN."""
    web_ui.app.wsgi_app = _OriginGuard(web_ui.app.wsgi_app, loopback_hosts(web_host, web_port))
    if web_ui.web_login:
        login = web_login()
        if login is None:
            logger.error("error: --web-login needs WEB_LOGIN=user:password in the environment; nobody can log in")
            return
        _install_login(web_ui, *login)


def _caller_origin(environ: dict[str, Any]) -> str | None:
    """The Origin header, else the scheme and host of the Referer; None when the caller sent neither."""
    origin = environ.get("HTTP_ORIGIN")
    if origin is not None:
        return origin.lower()
    referer = urlsplit(environ.get("HTTP_REFERER", ""))
    return f"{referer.scheme}://{referer.netloc}".lower() if referer.netloc else None


class _OriginGuard:
    """WSGI middleware around Locust's Flask app."""

    def __init__(self, app: Callable[..., Iterable[bytes]], loopback_hosts: set[str] | None) -> None:
        self.app = app
        self.loopback_hosts = loopback_hosts
        """Host header values accepted when the UI listens on 127.0.0.1; None: any (WEB_LOGIN guards it)."""

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        host = environ.get("HTTP_HOST", "").lower()
        if self.loopback_hosts is not None and host not in self.loopback_hosts:
            return _refuse(start_response, f"Host {host!r} is not this web UI's address")
        own_origin = f"{environ['wsgi.url_scheme']}://{host}"
        caller = _caller_origin(environ)
        if environ["REQUEST_METHOD"] not in SAFE_METHODS and caller is not None and caller != own_origin:
            return _refuse(start_response, f"a page from {caller} may not change the test; use the web UI at {own_origin}")

        def start_without_cors(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(name, value) for name, value in headers if not name.lower().startswith("access-control-")]
            return start_response(status, kept, exc_info)

        return self.app(environ, start_without_cors)


def _refuse(start_response: Callable[..., Any], reason: str) -> list[bytes]:
    logger.warning("web UI refused a request: %s", reason)
    body = f"refused: {reason}\n".encode()
    start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
    return [body]


def _install_login(web_ui: Any, user: str, password: str) -> None:
    """Locust's login page (--web-login) checking the one user:password of WEB_LOGIN."""
    from flask import redirect, request, session, url_for
    from flask_login import UserMixin, login_user

    class Operator(UserMixin):
        def __init__(self, name: str) -> None:
            self.id = name

    web_ui.app.config["SECRET_KEY"] = secrets.token_hex(32)  # signs the session cookie; new every start
    web_ui.login_manager.user_loader(lambda name: Operator(name) if name == user else None)
    web_ui.auth_args = {"username_password_callback": LOGIN_SUBMIT_PATH}

    @web_ui.app.route(LOGIN_SUBMIT_PATH, methods=["POST"])
    def login_submit() -> Any:
        # compare_digest on both, always: the time taken says nothing about which was wrong
        user_ok = hmac.compare_digest(request.form.get("username", "").encode(), user.encode())
        password_ok = hmac.compare_digest(request.form.get("password", "").encode(), password.encode())
        if user_ok and password_ok:
            login_user(Operator(user))
            return redirect(url_for("locust.index"))
        session["auth_error"] = "wrong user or password"
        return redirect(url_for("locust.login"))
