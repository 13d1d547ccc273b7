"""A real Prometheus for the tests (Debian's binary, as `make monitor` runs it) and the board's PromQL.

The config is monitoring/prometheus.yml with the test's targets and a 1 s interval; the expressions are
read out of monitoring/llmload-vllm.json, so the tests query exactly what the board shows.
"""

import json
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import yaml

from llmload.system.listening import free_loopback_port as free_port

MONITORING = Path(__file__).resolve().parents[1] / "monitoring"
BOARD = MONITORING / "llmload-vllm.json"


def board_expressions() -> list[str]:
    """Every PromQL expression of the board's panels, in order."""
    board = json.loads(BOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]


def board_variables() -> dict[str, tuple[str, str]]:
    """The board's query variables: name -> (series selector, label) of their ``label_values(selector, label)``."""
    board = json.loads(BOARD.read_text())
    found = {}
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"]).groups()
            found[variable["name"]] = (selector, label)
    return found


def concrete(expr: str, run: str, rate_interval: str = "10s") -> str:
    """The board's expression as Grafana sends it with run=``run``, every effort and model, and a rate interval."""
    escaped = re.escape(run).replace("\\", "\\\\")  # a regex inside a PromQL string
    return (expr.replace("$run", escaped).replace("$effort", ".*").replace("$model", ".*")
            .replace("$__rate_interval", rate_interval))


@contextmanager
def prometheus(tmp_path: Path, suite: str, server: str, interval_s: float = 1.0) -> Iterator[str]:
    """Prometheus on a free port scraping ``suite`` and ``server`` (host:port each); yields its URL."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: `make test` installs it (apt-get install -y prometheus)"
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = config["global"]["evaluation_interval"] = f"{interval_s:g}s"
    targets = {"llmload": suite, "vllm": server}
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [targets[job["job_name"]]]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{free_port()}"
    process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address={url[7:]}"],
                               stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("wb"))
    try:
        deadline = time.monotonic() + 60
        while not _ready(url):
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()[-2000:]
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def api(url: str, path: str, **params: Any) -> list[dict[str, Any]]:
    """The result of one call of Prometheus's HTTP API (it answered success)."""
    with urllib.request.urlopen(f"{url}/api/v1/{path}?{urllib.parse.urlencode(params)}", timeout=30) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def finite_values(result: list[dict[str, Any]]) -> list[float]:
    """Every finite value of an instant or a range query's result."""
    values = [float(v) for series in result for _, v in series.get("values", [series.get("value", (0, "NaN"))])]
    return [v for v in values if v == v and abs(v) != float("inf")]


def check_board(prom: str, out: Path, start_unix_s: float) -> None:
    """Every expression of the board has data over the run in ``out`` (its run label); the client's request
    counters in Prometheus are summary.json's counts."""
    summary = json.loads((out / "summary.json").read_text())
    for name, (selector, label) in board_variables().items():  # what Grafana asks to fill the variable's choices
        with urllib.request.urlopen(f"{prom}/api/v1/label/{label}/values?" + urllib.parse.urlencode(
                {"match[]": concrete(selector, str(out)), "start": start_unix_s - 5}), timeout=30) as response:
            assert json.loads(response.read())["data"], name
    for expr in board_expressions():
        query = concrete(expr, str(out))
        result = api(prom, "query_range", query=query, start=start_unix_s - 5, end=time.time(), step=1)
        assert finite_values(result), query
    counts = {s["metric"]["outcome"]: float(s["value"][1]) for s in api(
        prom, "query", query=f'sum by (outcome) (max_over_time(llmload_requests_total{{run="{out}"}}[1h]))')}
    assert counts["ok"] == summary["requests_ok"] > 0, (counts, summary["requests_ok"], summary["requests_failed"], summary.get("errors"))
    assert sum(n for outcome, n in counts.items() if outcome != "ok") == summary["requests_failed"]


def wait_for_scrapes(url: str, job: str, after_s: float, timeout_s: float = 30.0) -> None:
    """Until Prometheus has scraped ``job`` successfully after the Unix time ``after_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for target in json.loads(urllib.request.urlopen(f"{url}/api/v1/targets", timeout=10).read())["data"]["activeTargets"]:
            scraped = target.get("lastScrape", "")
            if target["labels"]["job"] == job and target["health"] == "up" and scraped:
                if _unix_s(scraped) > after_s:
                    return
        time.sleep(0.3)
    raise AssertionError(f"Prometheus did not scrape {job} after {after_s}")


def _unix_s(rfc3339: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", rfc3339.replace("Z", "+00:00"))).timestamp()


class Scraper:
    """Scrapes a run's METRICS_PORT every ``interval_s`` as Prometheus would, keeping each answer's text."""

    def __init__(self, port: int, interval_s: float = 0.5, headers: dict[str, str] | None = None) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.headers = headers or {}
        self.texts: list[str] = []
        self.refusals: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)

    def __enter__(self) -> "Scraper":
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url, headers=self.headers), timeout=10) as response:
                    self.texts.append(response.read().decode())
            except urllib.error.HTTPError as e:
                self.refusals.append(e.code)
            except OSError:
                pass  # not listening yet, or already gone
