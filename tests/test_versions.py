"""Result files' versions: each version's fields are pinned here, older versions read, a newer one named in one line.

A change to the fields of RequestRecord (samples.jsonl) or of anything summary.json holds fails the pin test below
until the file's version is bumped (RECORD_SCHEMA_VERSION in llmload/results/records.py, SUMMARY_SCHEMA_VERSION in
llmload/results/summary.py, each with a line of history in its module's docstring) and the new field list is pinned
here under the new version, e.g. ``3: {**SUMMARY_FIELDS[2], "Distribution": SUMMARY_FIELDS[2]["Distribution"] + " p95"}``.
"""

import dataclasses
import typing

import orjson
import pytest

from factories import make_record
from llmload.errors import ResultsError
from llmload.results.metrics import METRICS
from llmload.results.predicted import predict_played
from llmload.results.records import RECORD_SCHEMA_VERSION, RequestRecord, read_records
from llmload.results.storage import SAMPLES_FILE, SUMMARY_FILE, read_summary, rebuild_summary
from llmload.results.summary import SUMMARY_SCHEMA_VERSION, Summary, summarize

pytestmark = pytest.mark.pure

RECORD_FIELDS = {  # each samples.jsonl version's fields
    2: "request_id prompt_id start_unix_s start_monotonic_s e2e_s ttft_s ttfvt_s tpot_s itl_s prompt_tokens "
       "completion_tokens reasoning_tokens token_source reasoning_source finish_reason answered error error_detail "
       "warmup effort scheduled_monotonic_s slot_wait_s arrival_stamps schema_version",
    3: "request_id prompt_id start_unix_s start_monotonic_s e2e_s ttft_s ttfvt_s tpot_s itl_s prompt_tokens "
       "completion_tokens reasoning_tokens cached_tokens token_source reasoning_source finish_reason answered error "
       "error_detail warmup effort conversation_id turn scheduled_monotonic_s slot_wait_s arrival_stamps schema_version",
}
RECORD_FIELDS[4] = RECORD_FIELDS[3].replace("conversation_id turn", "conversation_id turn task_id round")
RECORD_FIELDS[5] = RECORD_FIELDS[4].replace("answered error", "answered answer_json answer_valid answer_invalid error")
RECORD_FIELDS[6] = RECORD_FIELDS[5].replace("cached_tokens", "cached_tokens declared_cached_tokens prompt_reused")
SUMMARY_FIELDS = {  # each summary.json version's records and their own fields (a subclass: those it adds)
    1: {  # the last version-1 files (earlier ones lack some: see summary.py's history)
        "Summary": "interrupted_by partial missing by_effort slo_met arrivals stopped_early config generator "
                   "server_vs_client schema_version",
        "Measures": "requests_ok requests_failed requests_interrupted duration_s rps rps_ci95 output_throughput_tok_s "
                    "output_throughput_tok_s_ci95 total_throughput_tok_s total_throughput_tok_s_ci95 answered_ratio "
                    "lost_to_max_tokens reasoning_ratio response_time_ms ttft_ms ttfvt_ms tpot_ms itl_ms prompt_tokens "
                    "output_tokens reasoning_tokens errors finish_reasons token_sources goodput_rps goodput_rps_ci95 slo",
        "Distribution": "count mean median median_ci95 p90 p90_ci95 p99 p99_ci95 min max",
        "TokenStats": "count total mean median min max",
        "SloResult": "slo limit_ms value_ms value_ms_ci95 passed certain",
        "ArrivalStats": "requests_scheduled scheduled_rate_rps send_rate_rps send_interval_cv dispatch_lag_ms "
                        "late_requests late_after_ms slot_wait_ms",
        "GeneratorCheck": "generator_limited processes cause advice",
        "ProcessCheck": "name cpu_cores events_per_read max_events_per_read shared_stamps arrival_to_read_lag_ms "
                        "event_loop_lag_ms limits cpu_bound wall_s cpu_s cpu_per_event_us machine_cores "
                        "machine_busy_cores others_cores loop_lag_bursty streams",
        "LagMs": "count p50 p99 max",
        "ServerVsClient": "server_requests client_requests server_prompt_tokens client_prompt_tokens "
                          "server_generation_tokens client_generation_tokens server_mean_ttft_ms client_mean_ttft_ms "
                          "server_mean_itl_ms client_mean_itl_ms server_mean_e2e_ms client_mean_e2e_ms "
                          "server_mean_queue_ms ttft_allowance_ms suspect reasons",
    },
}
SUMMARY_FIELDS[2] = {
    **SUMMARY_FIELDS[1],
    "Summary": SUMMARY_FIELDS[1]["Summary"] + " delivery warnings",
    "TokenDelivery": "requests one_event_requests tokens_per_event",
    "ServerVsClient": SUMMARY_FIELDS[1]["ServerVsClient"] + " causes client_lag_p99_ms e2e_allowance_ms tokens_per_event "
                                                           "tokens_per_burst",
}
SUMMARY_FIELDS[3] = {
    **SUMMARY_FIELDS[2],
    "Summary": SUMMARY_FIELDS[2]["Summary"] + " predicted cost",
    "Predicted": "label gpu profile profile_kind speedup duration_s rps rps_ci95 output_throughput_tok_s "
                 "output_throughput_tok_s_ci95 total_throughput_tok_s total_throughput_tok_s_ci95 goodput_rps "
                 "goodput_rps_ci95 response_time_ms ttft_ms ttfvt_ms tpot_ms itl_ms",
    "Times": "mean median median_ci95 p90 p90_ci95 p99 p99_ci95",
    "Cost": "usd_per_gpu_hour price_source gpus usd_per_server_hour basis usd_per_million_output_tokens "
            "usd_per_million_output_tokens_ci95 usd_per_million_total_tokens usd_per_million_total_tokens_ci95 "
            "usd_per_thousand_requests usd_per_thousand_requests_ci95 usd_per_million_goodput_tokens "
            "usd_per_million_goodput_tokens_ci95",
}
SUMMARY_FIELDS[4] = {**SUMMARY_FIELDS[3], "Measures": SUMMARY_FIELDS[3]["Measures"] + " decode_ms",
                      "Predicted": SUMMARY_FIELDS[3]["Predicted"] + " decode_ms"}
SUMMARY_FIELDS[5] = {**SUMMARY_FIELDS[4], "Summary": SUMMARY_FIELDS[4]["Summary"] + " by_turn server_prefix_cache_hit_rate"}
SUMMARY_FIELDS[6] = {**SUMMARY_FIELDS[5], "Summary": SUMMARY_FIELDS[5]["Summary"] + " tasks",
                      "TaskStats": "tasks outcomes rounds rounds_by_count time_to_answer_ms prompt_tokens output_tokens "
                                   "reasoning_tokens"}
SUMMARY_FIELDS[7] = {**SUMMARY_FIELDS[6], "Measures": SUMMARY_FIELDS[6]["Measures"] + " answer_json_ratio "
                                                                                      "answer_valid_ratio answer_valid_ratio_ci95"}
SUMMARY_FIELDS[8] = {**SUMMARY_FIELDS[7],
                      "Measures": SUMMARY_FIELDS[7]["Measures"] + " goodput_output_tok_s goodput_output_tok_s_ci95",
                      "Predicted": SUMMARY_FIELDS[7]["Predicted"].replace("speedup", "scaled_by validated validation "
                                                                          "model_error goodput_output_tok_s "
                                                                          "goodput_output_tok_s_ci95"),
                      "SloResult": SUMMARY_FIELDS[7]["SloResult"] + " requests_unmeasurable",
                      "Summary": SUMMARY_FIELDS[7]["Summary"] + " cache server_failures",
                      "ServerFailures": "requests failed_by_server by_category messages",
                      "ServerMessage": "category message count",
                      "CacheAccount": "intent reset declared_hit_rate server_hit_rate client_hit_rate prompts_reused "
                                      "suspect reason"}
SUMMARY_FIELDS[9] = {**SUMMARY_FIELDS[8], "ServerVsClient": SUMMARY_FIELDS[8]["ServerVsClient"] + " engine not_exposed notes"}
BUMP = "bump {constant} ({module}, with a line of history there) and pin the new fields in tests/test_versions.py"


def _own_fields(cls: type, out: dict[str, set[str]]) -> dict[str, set[str]]:
    """Every record reachable from ``cls``, with the fields it declares itself (a dataclass base is its own entry)."""
    if cls.__name__ in out:
        return out
    inherited = {f.name for base in cls.__mro__[1:] if dataclasses.is_dataclass(base) for f in dataclasses.fields(base)}
    out[cls.__name__] = {f.name for f in dataclasses.fields(cls)} - inherited
    hints = typing.get_type_hints(cls)
    pending = [hints[f.name] for f in dataclasses.fields(cls)] + [b for b in cls.__mro__[1:] if dataclasses.is_dataclass(b)]
    while pending:
        hint = pending.pop()
        if dataclasses.is_dataclass(hint):
            _own_fields(hint, out)
        pending += typing.get_args(hint)
    return out


def test_record_fields_change_only_with_a_new_samples_version():
    pinned = RECORD_FIELDS.get(RECORD_SCHEMA_VERSION)
    assert pinned is not None, f"no fields pinned for samples.jsonl version {RECORD_SCHEMA_VERSION}"
    assert {f.name for f in dataclasses.fields(RequestRecord)} == set(pinned.split()), \
        BUMP.format(constant="RECORD_SCHEMA_VERSION", module="llmload/results/records.py")


def test_summary_fields_change_only_with_a_new_summary_version():
    pinned = SUMMARY_FIELDS.get(SUMMARY_SCHEMA_VERSION)
    assert pinned is not None, f"no fields pinned for summary.json version {SUMMARY_SCHEMA_VERSION}"
    assert _own_fields(Summary, {}) == {name: set(fields.split()) for name, fields in pinned.items()}, \
        BUMP.format(constant="SUMMARY_SCHEMA_VERSION", module="llmload/results/summary.py")


def _first_record_line() -> dict:
    """A samples.jsonl line as the first suite wrote it (version 1, before warmup, effort, RATE and arrival stamps)."""
    line = orjson.loads(make_record(completion_tokens=5, itl_s=[0.01] * 4).to_json_line())
    for later in ("warmup", "effort", "scheduled_monotonic_s", "slot_wait_s", "arrival_stamps"):
        del line[later]
    return {**line, "schema_version": 1}


def test_an_older_samples_file_reads_with_what_it_lacks_at_its_default(tmp_path):
    path = tmp_path / SAMPLES_FILE
    path.write_bytes(orjson.dumps(_first_record_line()) + b"\n" + make_record().to_json_line())
    old, new = read_records(path)
    assert (old.schema_version, new.schema_version) == (1, RECORD_SCHEMA_VERSION)
    assert (old.warmup, old.effort, old.scheduled_monotonic_s, old.slot_wait_s, old.arrival_stamps) == (False, None, None, None, "user")
    assert rebuild_summary(tmp_path).requests_ok == 2


def test_a_newer_samples_line_is_named_in_one_line(tmp_path):
    path = tmp_path / SAMPLES_FILE
    newer = {**orjson.loads(make_record().to_json_line()), "schema_version": RECORD_SCHEMA_VERSION + 1, "a_later_field": 1}
    path.write_bytes(make_record().to_json_line() + orjson.dumps(newer) + b"\n")
    expected = (f"{path}: schema_version {RECORD_SCHEMA_VERSION + 1} is newer than this llmload reads "
                f"(up to {RECORD_SCHEMA_VERSION}): read it with a newer llmload")
    with pytest.raises(ResultsError) as caught:
        list(read_records(path))
    assert str(caught.value) == expected
    with pytest.raises(ResultsError) as caught:  # `llmload report` on a killed run of a newer suite
        rebuild_summary(tmp_path)
    assert str(caught.value) == expected


@pytest.mark.parametrize("version", [None, 0, "2", True])
def test_a_samples_line_without_a_version_it_knows_is_refused(tmp_path, version):
    path = tmp_path / SAMPLES_FILE
    line = {**orjson.loads(make_record().to_json_line()), "schema_version": version}
    path.write_bytes(orjson.dumps(line) + b"\n")
    with pytest.raises(ResultsError, match=rf"schema_version {version!r} is not one this llmload reads \(1 to {RECORD_SCHEMA_VERSION}\)"):
        list(read_records(path))


def test_the_first_summaries_still_read(tmp_path):
    """A version-1 summary.json as the first suite wrote it: no SLO list, no intervals, no later blocks."""
    first = ("requests_ok requests_failed requests_interrupted duration_s rps output_throughput_tok_s total_throughput_tok_s "
             "answered_ratio lost_to_max_tokens reasoning_ratio response_time_ms ttft_ms ttfvt_ms tpot_ms itl_ms prompt_tokens "
             "output_tokens reasoning_tokens errors finish_reasons token_sources config").split()
    now = summarize([make_record(completion_tokens=5, itl_s=[0.01] * 4)]).to_dict()
    old = {**{k: now[k] for k in first}, "schema_version": 1}
    for name in ("response_time_ms", "ttft_ms", "ttfvt_ms", "tpot_ms", "itl_ms"):
        old[name] = {k: v for k, v in old[name].items() if not k.endswith("_ci95")}
    (tmp_path / SUMMARY_FILE).write_bytes(orjson.dumps(old))
    summary = read_summary(tmp_path)
    assert (summary.schema_version, summary.requests_ok, summary.slo, summary.rps_ci95) == (1, 1, [], None)
    assert summary.ttft_ms.median == now["ttft_ms"]["median"]


def test_a_summary_older_than_a_metric_reads_it_as_measured_on_no_request(tmp_path):
    """A summary.json written before the metric table's last row: it reads, that metric counted on no request."""
    newest = METRICS[-1].summary
    now = summarize([make_record(completion_tokens=5, itl_s=[0.01] * 4, effort="low"),
                     make_record(completion_tokens=5, itl_s=[0.01] * 4, effort="high")]).to_dict()
    assert now[newest]["count"] and set(now["by_effort"]) == {"low", "high"}
    played = predict_played(summarize([make_record(completion_tokens=5, itl_s=[0.01] * 4)]),
                            {"rehearsal": True, "gpu_profile": "h200", "speedup": 4})
    now["predicted"] = dataclasses.asdict(played)
    old = {k: v for k, v in now.items() if k != newest}
    old["by_effort"] = {e: {k: v for k, v in part.items() if k != newest} for e, part in now["by_effort"].items()}
    old["predicted"] = {k: v for k, v in now["predicted"].items() if k != newest}
    (tmp_path / SUMMARY_FILE).write_bytes(orjson.dumps({**old, "schema_version": SUMMARY_SCHEMA_VERSION - 1}))
    summary = read_summary(tmp_path)
    assert (getattr(summary, newest).count, getattr(summary, newest).median) == (0, None)
    assert getattr(summary.by_effort["low"], newest).count == 0 and summary.ttft_ms.median == now["ttft_ms"]["median"]
    assert getattr(summary.predicted, newest).median is None and summary.predicted.ttft_ms.median == played.ttft_ms.median
