"""Cost per million tokens, a rehearsal's figures predicted for the GPU it played, and the decision rows."""

import pytest

from llmload.errors import ConfigError
from llmload.results.cost import DEFAULT_PRICES, cost_per, price_of, usd_per_gpu_hour
from llmload.results.decision import decision_rows
from llmload.results.records import RequestRecord
from llmload.results.slo import parse_slos, slos_of
from llmload.results.summary import summarize as summarize_records
from llmload.sim.hardware import GPU_FIGURES


def summarize(records, config):
    """As a run summarizes its records: its SLOs parsed from its config (limits on the target's clock)."""
    return summarize_records(records, config, slos=slos_of(config))

pytestmark = pytest.mark.pure


def test_every_gpu_the_suite_plays_has_a_default_list_price_with_its_source():
    assert set(DEFAULT_PRICES) == set(GPU_FIGURES)
    for gpu in GPU_FIGURES:
        price, source = price_of("", gpu)
        assert price is not None and price > 0 and "default list price (not a quote)" in source


def _record(i: int, e2e_s: float = 2.0, tokens: int = 100, ttft_s: float = 0.2) -> RequestRecord:
    return RequestRecord(request_id=f"r{i}", prompt_id="p", start_unix_s=1000.0 + i * 0.1, start_monotonic_s=i * 0.1,
                         e2e_s=e2e_s, ttft_s=ttft_s, ttfvt_s=ttft_s, tpot_s=(e2e_s - ttft_s) / (tokens - 1),
                         itl_s=[(e2e_s - ttft_s) / (tokens - 1)] * (tokens - 1), prompt_tokens=1000,
                         completion_tokens=tokens, finish_reason="length", answered=True)


RECORDS = [_record(i) for i in range(400)]
SIM = {"name": "llmload.sim", "rehearsal": True, "gpu_profile": "h200", "profile": "h200-gpt-oss-20b-bf16",
       "profile_kind": "measured", "speedup": 10.0}


def test_cost_per_million_tokens_is_price_over_throughput_and_its_interval_flips():
    # 3.6 USD an hour is a tenth of a cent a second; at 1000 tokens a second a million tokens take 1000 s: 1 USD
    value, ci = cost_per(3.6, 1000.0, [800.0, 1250.0], 1e6)
    assert value == pytest.approx(1.0) and ci == pytest.approx([0.8, 1.25])
    assert cost_per(3.6, 1000.0, [0.0, 1250.0], 1e6)[1] is None  # a rate that may be 0 has no upper bound
    assert cost_per(None, 1000.0, None, 1e6) == (None, None)


def test_price_is_price_else_the_gpu_default_with_its_source_else_none():
    assert price_of("2.5", "h100") == (2.5, "PRICE")
    price, source = price_of("", "a100")
    assert price == DEFAULT_PRICES["a100"].usd_per_gpu_hour and "default list price (not a quote)" in source and "as of" in source
    assert price_of("", "b200")[0] is None and "give PRICE" in price_of("", "b200")[1]
    for bad in ("0", "-1", "abc", "nan", "inf"):
        with pytest.raises(ConfigError, match="PRICE=.* is not a positive number of USD per GPU-hour"):
            usd_per_gpu_hour(bad)


def test_a_run_gets_its_cost_with_gpus_and_goodput():
    summary = summarize(RECORDS, {"gpu": "h100", "price": "4", "gpus": 2, "slo": "e2e_p90<=3s"})
    cost = summary.cost
    assert (cost.usd_per_gpu_hour, cost.gpus, cost.usd_per_server_hour, cost.basis) == (4.0, 2, 8.0, "measured")
    per_second = 8.0 / 3600
    assert cost.usd_per_million_output_tokens == pytest.approx(per_second / summary.output_throughput_tok_s * 1e6)
    assert cost.usd_per_thousand_requests == pytest.approx(per_second / summary.rps * 1e3)
    assert cost.usd_per_million_goodput_tokens == pytest.approx(cost.usd_per_million_output_tokens)  # every request met it
    lo, hi = cost.usd_per_million_output_tokens_ci95
    assert lo < cost.usd_per_million_output_tokens < hi


def test_goodput_tokens_count_only_requests_that_met_every_slo():
    mixed = [_record(i, e2e_s=2.0 if i % 2 else 5.0) for i in range(400)]
    span_s = max(r.start_monotonic_s + r.e2e_s for r in mixed)
    judged = summarize(mixed, {"gpu": "h100", "slo": "e2e_p90<=3s"})
    assert judged.goodput_output_tok_s == pytest.approx(200 * 100 / span_s)
    assert judged.cost.usd_per_million_goodput_tokens == pytest.approx(11.06 / 3600 / judged.goodput_output_tok_s * 1e6)
    unjudged = summarize(mixed, {"gpu": "h100"})
    assert unjudged.goodput_output_tok_s is None and unjudged.cost.usd_per_million_goodput_tokens is None


def test_a_rehearsal_is_predicted_for_its_gpu_and_priced_there():
    raw = summarize(RECORDS, {"gpu": "h200", "served_by": SIM})
    p = raw.predicted
    assert p.label == "predicted for h200 (profile h200-gpt-oss-20b-bf16, measured; SPEEDUP 10x scaled back; UNVALIDATED)"
    assert not p.validated and "UNVALIDATED" in p.validation  # SIM says nothing of its validation
    assert p.rps == pytest.approx(raw.rps / 10) and p.rps_ci95 == pytest.approx([x / 10 for x in raw.rps_ci95])
    assert p.ttft_ms.median == pytest.approx(raw.ttft_ms.median * 10)
    assert p.tpot_ms.p90_ci95 == pytest.approx([x * 10 for x in raw.tpot_ms.p90_ci95])
    measured = summarize(RECORDS, {"gpu": "h200"})
    assert measured.predicted is None
    # priced at the played GPU's rates: ten times what the raw, sped-up rates would cost
    assert raw.cost.basis == p.label
    assert raw.cost.usd_per_million_output_tokens == pytest.approx(10 * measured.cost.usd_per_million_output_tokens)


def test_decision_rows_take_the_largest_load_meeting_the_slo_per_gpu_and_model():
    def run(gpu, users, e2e_s, served=None):
        config = {"gpu": gpu, "model": "openai/gpt-oss-20b", "users": users, "slo": "e2e_p90<=3s"}
        if served:
            config["served_by"] = served
        return summarize([_record(i, e2e_s) for i in range(100)], config)
    rows = decision_rows([run("h100", 4, 2.0), run("h100", 8, 2.5), run("h100", 16, 4.0),
                          run("h200", 4, 0.1, SIM), run("h200", 32, 0.2, SIM)])  # raw: 10x sooner than the GPU
    by_gpu = {r.gpu: r for r in rows}
    assert by_gpu["h100"].capacity == 8 and not by_gpu["h100"].predicted and by_gpu["h100"].runs == 3
    assert by_gpu["h200"].capacity == 32 and by_gpu["h200"].predicted and by_gpu["h200"].basis.startswith("predicted for h200")
    figures = {f.name: f for f in by_gpu["h200"].figures}
    # the row's figures are those of the run at the capacity (32 users, priced at the rates predicted for the h200)
    assert figures["usd_per_million_output_tokens"].value == pytest.approx(
        run("h200", 32, 0.2, SIM).cost.usd_per_million_output_tokens)
    h100 = {f.name: f.value for f in by_gpu["h100"].figures}
    assert h100["usd_per_million_output_tokens"] == pytest.approx(run("h100", 8, 2.5).cost.usd_per_million_output_tokens)
    assert list(figures) == ["output_throughput_tok_s", "usd_per_million_output_tokens", "usd_per_million_goodput_tokens"]


def _summary_of(config):
    return summarize([_record(i, 2.0) for i in range(100)], {"gpu": "h100", "model": "gpt-oss-20b",
                                                              "slo": "e2e_p90<=3s", **config})


def test_decision_rows_rank_rate_runs_by_their_rate_and_trace_runs_by_their_speed():
    """A RATE sweep whose runs met the SLO has a capacity (its largest rate), not "no run met the SLO"; a trace's
    runs rank by TRACE_SPEED, never as users=1; and kinds of load are never compared with each other."""
    rows = decision_rows([_summary_of({"rate": 2.0, "users": 1}), _summary_of({"rate": 8.0, "users": 1}),
                          _summary_of({"trace": "t.jsonl", "trace_speed": 3.0, "users": 1}),
                          _summary_of({"trace": "t.jsonl", "trace_speed": 0.5, "users": 1})])
    by = {r.capacity_by: r for r in rows}
    assert set(by) == {"rate", "trace_speed"}
    assert by["rate"].capacity == 8.0 and by["rate"].capacity_from == "largest load meeting the SLO among the runs"
    assert by["trace_speed"].capacity == 3.0 and by["trace_speed"].runs == 2


def test_a_validated_prediction_carries_its_model_error_and_an_unvalidated_one_says_so():
    validated = {**SIM, "validation": {"status": "validated", "method": "leave one operating point out",
                                       "errors": {"rps": {"worst_abs": 0.12}, "server_ttft_mean_ms": {"worst_abs": 0.22}}}}
    p = summarize(RECORDS, {"gpu": "h200", "served_by": validated}).predicted
    assert p.validated and p.model_error["rps"] == pytest.approx(0.12) and p.model_error["ttft_ms"] == pytest.approx(0.22)
    assert p.model_error["tpot_ms"] is None  # the profile was not validated for it
    row = decision_rows([summarize(RECORDS, {"gpu": "h200", "served_by": validated, "users": 8})])[0]
    assert row.validated and {f.name: f.model_error for f in row.figures}["usd_per_million_output_tokens"] == pytest.approx(0.12)
    unvalidated = {**SIM, "validation": {"status": "unvalidated", "method": "extrapolated from h200 by hardware figures"}}
    q = summarize(RECORDS, {"gpu": "h200", "served_by": unvalidated}).predicted
    assert not q.validated and q.validation.startswith("UNVALIDATED prediction: extrapolated from h200")
    assert "not measurements" in q.validation and set(q.model_error.values()) == {None}
