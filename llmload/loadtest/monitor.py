"""`make monitor`: a real Prometheus server (Debian's package) scraping the suite and the target (monitoring/)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from llmload.errors import ConfigError
from llmload.system.listening import check_port_free
from llmload.options import MONITOR_OPTIONS
from llmload.system.processes import SignalForwarder, stoppable_child
from llmload.settings import parse_settings

__all__ = ["serve_prometheus"]


def serve_prometheus(settings: Sequence[str]) -> int:
    """Prometheus (Debian's package) on 127.0.0.1:MONITOR_PORT with monitoring/prometheus.yml, its data in results/."""
    options = parse_settings(settings, MONITOR_OPTIONS)
    binary = shutil.which("prometheus")
    if binary is None:
        raise ConfigError("prometheus is missing: `make monitor` installs it as root (apt-get install -y prometheus); "
                          "else run `sudo apt-get install -y prometheus`, or put a prometheus binary on PATH")
    check_port_free("MONITOR_PORT", "127.0.0.1", options.monitor_port,
                     "another Prometheus? Debian's package starts one as a service: sudo systemctl disable --now prometheus")
    config = Path(__file__).resolve().parents[1] / "monitoring" / "prometheus.yml"
    data = Path("results") / "prometheus"
    data.mkdir(parents=True, exist_ok=True)
    argv = [binary, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{options.monitor_port}",
            f"--storage.tsdb.path={data}"]
    print(f"Prometheus on http://127.0.0.1:{options.monitor_port} ({config}; data in {data}/); Ctrl-C stops it", flush=True)
    with SignalForwarder("stopped before Prometheus started") as signals:
        prometheus = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=stoppable_child)
        code = signals.wait(prometheus)
    return 128 + signals.first if signals.first else code
