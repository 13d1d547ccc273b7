"""`python -m llmload ui`: no state change from another origin, the key only to the start host, WEB_LOGIN."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from conftest import REPO
from header_recorder import start_recorder

KEY = "sk-planted-webui-5f3a9c"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, what: str, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class WebUI:
    """`python -m llmload ui` in its own process group, and a browser-like HTTP session to it."""

    def __init__(self, tmp_path, settings: list[str], env: dict[str, str]) -> None:
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "ui.log"
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llmload", "ui", f"WEB_PORT={self.port}", f"OUT={tmp_path / 'run'}", *settings],
            cwd=REPO, env={**os.environ, **env}, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.http = requests.Session()
        self.http.trust_env = False
        wait_until(self._answers, "the web UI")

    def _answers(self) -> bool:
        assert self.process.poll() is None, self.output()
        try:
            self.http.get(self.origin + "/", timeout=2, allow_redirects=False)
            return True
        except requests.ConnectionError:
            return False

    def state(self) -> str:
        return self.http.get(self.origin + "/stats/requests", timeout=10).json()["state"]

    def post(self, path: str, data: dict | None = None, **headers: str) -> requests.Response:
        return self.http.post(self.origin + path, data=data or {}, headers=headers, timeout=10, allow_redirects=False)

    def swarm(self, host: str, **form: str) -> requests.Response:
        return self.post("/swarm", {"user_count": "1", "spawn_rate": "1", "host": host, **form}, Origin=self.origin)

    def stop_test(self) -> None:
        assert self.post("/stop", Origin=self.origin).status_code == 200
        wait_until(lambda: self.state() == "stopped", "the test to stop")

    def output(self) -> str:
        return self.log_path.read_text()

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


@pytest.fixture
def recorders():
    started = [start_recorder() for _ in range(2)]
    yield [recorder for recorder, _ in started]
    for _, server in started:
        server.shutdown()
        server.server_close()


@pytest.mark.integration
def test_cross_origin_posts_are_refused_and_the_key_stays_with_the_start_host(tmp_path, recorders):
    home, elsewhere = recorders
    ui = WebUI(tmp_path, [f"HOST={home.url}"], {"API_KEY": KEY})
    try:
        assert ui.state() == "ready"
        # A page on another site posts the form: refused, nothing starts, no request reaches any host.
        home.received.clear()
        for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                        {"Referer": "http://evil.example/page.html"}):
            refused = ui.post("/swarm", {"user_count": "1", "spawn_rate": "1", "host": elsewhere.url}, **headers)
            assert refused.status_code == 403 and "may not change the test" in refused.text
        assert ui.post("/stop", Origin="http://evil.example").status_code == 403
        cors = ui.http.get(ui.origin + "/stats/requests", headers={"Origin": "http://evil.example"}, timeout=10)
        assert cors.status_code == 200 and not any(h.lower().startswith("access-control-") for h in cors.headers)
        rebound = ui.http.get(ui.origin + "/", headers={"Host": f"evil.example:{ui.port}"}, timeout=10)
        assert rebound.status_code == 403
        time.sleep(2.5)  # outlive Locust's 2 s cache of /stats/requests
        assert ui.state() == "ready" and home.received == [] and elsewhere.received == []

        # The UI's own page changes the host: the run goes there, but without the environment's key.
        assert ui.swarm(elsewhere.url).json()["success"] is True
        wait_until(lambda: any(p == "/v1/chat/completions" for _, p, _ in elsewhere.received), "requests to the new host")
        ui.stop_test()
        assert elsewhere.authorizations() == {None}

        # A key typed in the form goes to the host it was typed for.
        elsewhere.received.clear()
        assert ui.swarm(elsewhere.url, api_key="sk-typed-in-form").json()["success"] is True
        wait_until(lambda: any(p == "/v1/chat/completions" for _, p, _ in elsewhere.received), "requests with the typed key")
        ui.stop_test()
        assert elsewhere.authorizations() == {"Bearer sk-typed-in-form"}

        # Back to the start host: the environment's key goes with every call.
        assert ui.swarm(home.url).json()["success"] is True
        wait_until(lambda: any(p == "/v1/chat/completions" for _, p, _ in home.received), "requests to the start host")
        ui.stop_test()
        assert home.authorizations() == {f"Bearer {KEY}"}
        assert KEY not in ui.http.get(ui.origin + "/", timeout=10).text
    finally:
        ui.close()
    assert "HOST changed from" in ui.output()
    files = [p for p in (tmp_path / "run").parent.rglob("*") if p.is_file() and p.name != "ui.log"]
    assert any(p.name == "samples.jsonl" for p in files)
    assert [p for p in files if KEY.encode() in p.read_bytes()] == []


@pytest.mark.integration
def test_web_login_guards_the_ui(tmp_path, recorders):
    home, _ = recorders
    ui = WebUI(tmp_path, [f"HOST={home.url}"], {"WEB_LOGIN": "operator:pw-3141"})
    try:
        page = ui.http.get(ui.origin + "/", timeout=10, allow_redirects=False)
        assert page.status_code == 302 and "/login" in page.headers["Location"]
        home.received.clear()
        assert ui.swarm(home.url).status_code == 302  # to the login page; nothing starts
        time.sleep(1.0)
        assert home.received == []
        assert ui.post("/login_submit", {"username": "operator", "password": "wrong"}, Origin=ui.origin).headers["Location"].endswith("/login")
        assert ui.http.get(ui.origin + "/", timeout=10, allow_redirects=False).status_code == 302
        assert ui.post("/login_submit", {"username": "operator", "password": "pw-3141"}, Origin=ui.origin).status_code == 302
        assert ui.http.get(ui.origin + "/", timeout=10, allow_redirects=False).status_code == 200
    finally:
        ui.close()


@pytest.mark.pure
@pytest.mark.parametrize("settings,env,message", [
    (["WEB_HOST=0.0.0.0"], {}, "WEB_HOST=0.0.0.0 lets other machines drive the web UI; set WEB_LOGIN"),
    ([], {"WEB_LOGIN": "no-colon"}, "WEB_LOGIN must be user:password"),
    (["WEB_PORT=70000"], {}, "WEB_PORT=70000"),
    ([f"API_KEY={KEY}"], {}, "API_KEY on a command line is visible"),
    ([f"WEB_LOGIN=a:{KEY}"], {}, "WEB_LOGIN on a command line is visible"),
])
def test_unsafe_ui_settings_are_one_line(cli, tmp_path, monkeypatch, settings, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    done = cli("ui", *settings, f"OUT={tmp_path / 'run'}")
    assert done.returncode == 2 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr and KEY not in done.stderr
