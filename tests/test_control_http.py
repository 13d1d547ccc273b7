"""control_http: every control call sends the key, goes straight to HOST whatever *_PROXY says, fails in one type."""

import socket

import pytest

from header_recorder import start_recorder
from llmload.client.body import ChatOptions, chat_body
from llmload.client.measure import make_client, measure_request
from llmload.system.control_http import get_json, healthy, request, server_root
from llmload.errors import ControlCallFailed, ServerError
from llmload.loadtest.preflight import probe_server, tokenize_count
from llmload.sim import start_sim, stop_sim
from llmload.sweep.sampler import MetricsSampler

KEY = "sk-control-test-0123"


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def recorder():
    rec, server = start_recorder()
    yield rec
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxies_everywhere(monkeypatch):
    """Every proxy variable points at a port nobody listens on; NO_PROXY exempts nothing."""
    proxy = f"http://127.0.0.1:{dead_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.integration
def test_every_control_call_sends_the_key_and_ignores_proxies(recorder, proxies_everywhere, tmp_path):
    info = probe_server(recorder.url, KEY)
    assert info.models == ("recorded-model",) and info.version is None
    assert tokenize_count(info, "recorded-model", [{"role": "user", "content": "x"}], KEY) == 1
    assert healthy(f"{recorder.url}/health", KEY)
    sampler = MetricsSampler(recorder.url, tmp_path / "m.jsonl", interval_s=10.0, api_key=KEY)
    sampler.start()
    sampler.stop()
    paths = [path for _, path, _ in recorder.received]
    assert paths == ["/v1/models", "/version", "/llmload/sim", "/tokenize", "/health", "/metrics"]  # /llmload/sim: is it the built-in target?
    assert recorder.authorizations() == {f"Bearer {KEY}"}


@pytest.mark.integration
def test_without_a_key_no_authorization_header(recorder):
    get_json(f"{recorder.url}/v1/models")
    assert recorder.authorizations() == {None}


@pytest.mark.integration
def test_failures_are_one_type_and_never_hold_the_key(recorder):
    with pytest.raises(ControlCallFailed) as http_error:
        request(f"{recorder.url}/nothing", KEY)
    assert http_error.value.status == 404 and KEY not in str(http_error.value)
    with pytest.raises(ControlCallFailed) as refused:
        request(f"http://127.0.0.1:{dead_port()}/health", KEY, timeout_s=2)
    assert refused.value.status is None and KEY not in str(refused.value)


@pytest.mark.integration
def test_a_server_that_needs_a_key_says_so_in_one_line():
    process, url = start_sim(["--fixed-ttft-ms", "1", "--fixed-itl-ms", "1"], api_key=KEY)
    try:
        with pytest.raises(ServerError, match="needs an API key: export API_KEY"):
            probe_server(url)
        with pytest.raises(ServerError, match="the API key was refused") as wrong:
            probe_server(url, "sk-wrong")
        assert "sk-wrong" not in str(wrong.value)
        assert probe_server(url, KEY).models == ("openai/gpt-oss-20b",)
        assert healthy(f"{url}/health")  # /health stays open, as vLLM's does
    finally:
        stop_sim(process)


@pytest.mark.integration
@pytest.mark.parametrize("client_name", ["raw", "openai"])
def test_both_clients_send_the_key_and_ignore_proxies(client_name, proxies_everywhere):
    process, url = start_sim(["--fixed-ttft-ms", "1", "--fixed-itl-ms", "1"], api_key=KEY)
    try:
        body = chat_body(ChatOptions(model="openai/gpt-oss-20b", max_tokens=5), [{"role": "user", "content": "hi"}])
        with_key = make_client(client_name, url, KEY, 30.0)
        without_key = make_client(client_name, url, "", 30.0)
        try:
            ok = measure_request(with_key, body, "p", lambda r: None)
            refused = measure_request(without_key, body, "p", lambda r: None)
        finally:
            with_key.close()
            without_key.close()
        assert ok.ok, ok.error_detail
        assert refused.error == "http_401"
    finally:
        stop_sim(process)


@pytest.mark.pure
@pytest.mark.parametrize("url,root", [
    ("127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("https://h.example/v1/", "https://h.example:443"),
    ("http://[::1]:8000/v1", "http://[::1]:8000"),
])
def test_server_root(url, root):
    assert server_root(url) == root
