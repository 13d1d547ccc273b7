"""Results of real runs read by today's suite: a vLLM on an H200 that sent every answer in one event (tests/fixtures/h200/)."""

import gzip
import shutil
from pathlib import Path

import orjson
import pytest

from llmload.cli import main
from llmload.results.storage import SUMMARY_FILE, recompute_summary

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

H200 = Path(__file__).parent / "fixtures" / "h200"


def _copy(run: str, tmp_path: Path) -> Path:
    """A run folder as the suite wrote it: the fixture's files, samples.jsonl unpacked."""
    folder = tmp_path / run
    shutil.copytree(H200 / run, folder)
    packed = folder / "samples.jsonl.gz"
    (folder / "samples.jsonl").write_bytes(gzip.decompress(packed.read_bytes()))
    packed.unlink()
    return folder


@pytest.mark.parametrize("run", ["suite-c16-run2", "suite-u256"])
def test_report_names_bursts_and_says_tpot_and_itl_are_not_measurable(run, tmp_path, capsys):
    folder = _copy(run, tmp_path)
    before = (folder / SUMMARY_FILE).read_bytes()
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "schema version 1, older than this suite's: computed again from samples.jsonl" in out
    assert "Mean TPOT (ms):                         not measurable (every answer came in one event)" in out
    assert "Mean ITL (ms):                          not measurable (every answer came in one event)" in out
    assert "0.00" not in out.split("Time per Output Token")[1].split("End-to-end Latency")[0]
    assert "cause: bursts" in out and "Cause found: bursts: the server sent its tokens in bursts (256.0 tokens per event" in out
    assert "Mean decode time (ms):                  not measurable (every answer came in one event)" in out
    assert ("warning: every answer came in one event (256.0 tokens per event): TPOT, ITL and decode time are not "
            "measurable") in out
    assert (folder / SUMMARY_FILE).read_bytes() == before  # the run's own summary is left as it is


def test_the_summary_keeps_no_tpot_and_says_why(tmp_path):
    summary = recompute_summary(_copy("suite-c16-run2", tmp_path))
    assert summary.tpot_ms.count == 0 and summary.tpot_ms.mean is None and summary.itl_ms.mean is None
    assert summary.decode_ms.count == 0
    assert summary.delivery.every_answer_in_one_event and summary.delivery.tokens_per_event == 256.0
    assert len(summary.warnings) == 1 and "not measurable" in summary.warnings[0]
    data = orjson.loads(orjson.dumps(summary.to_dict()))
    assert data["tpot_ms"]["mean"] is None and data["warnings"] == summary.warnings
    assert data["delivery"] == {"requests": 200, "tokens_per_event": 256.0, "one_event_requests": 200}


def test_an_e2e_gap_is_flagged_with_its_cause_and_queueing_is_named(tmp_path):
    # 256 users: the client's E2E exceeds the server's by 955 ms; the client's own lag was p99 1.1 ms.
    account = recompute_summary(_copy("suite-u256", tmp_path)).server_vs_client
    assert account.client_mean_e2e_ms - account.server_mean_e2e_ms == pytest.approx(955.4, abs=0.1)
    assert any(r.startswith("the client's mean E2E exceeds the server's by 955.4 ms") and r.endswith(
        "cause: outside the server's clock") for r in account.reasons)
    assert account.client_lag_p99_ms == pytest.approx(1.14, abs=0.01)
    causes = " ".join(account.causes)
    assert "outside the server's clock: the client's lag p99 1.1 ms, 256.0 tokens per event" in causes
    assert "queueing on the server: requests waited 651.6 ms in its queue, 57% of its own mean TTFT" in causes


def test_at_16_users_the_e2e_gap_stays_within_the_front_ends_allowance(tmp_path):
    # 47-61 ms above the server's 1.2 s: within 50 ms + 5% of it; queueing took 6% of the server's TTFT: not named.
    account = recompute_summary(_copy("suite-c16-run2", tmp_path)).server_vs_client
    assert 0 < account.client_mean_e2e_ms - account.server_mean_e2e_ms < account.e2e_allowance_ms
    assert not any("E2E" in reason for reason in account.reasons)
    assert [cause.split(":")[0] for cause in account.causes] == ["bursts"]
