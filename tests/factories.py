"""Records for tests, built in one place: a field added to RequestRecord needs a default here only."""

from llmload.results.records import RequestRecord, tpot_s


def make_record(**fields) -> RequestRecord:
    """A successful request with ``fields`` as given. Unless given: TTFT 0.1 s, no ITL gaps, E2E the TTFT
    plus the gaps, TPOT by the record's formula (an event per gap after the first), TTFVT None."""
    fields.setdefault("ttft_s", 0.1)
    fields.setdefault("itl_s", [])
    fields.setdefault("e2e_s", (fields["ttft_s"] or 0.0) + sum(fields["itl_s"]))
    fields.setdefault("ttfvt_s", None)
    events = 0 if fields["ttft_s"] is None else len(fields["itl_s"]) + 1
    fields.setdefault("tpot_s", tpot_s(fields["e2e_s"], fields["ttft_s"], fields.get("completion_tokens"), events))
    return RequestRecord(**{"request_id": "r", "prompt_id": "p", "start_unix_s": 0.0, "start_monotonic_s": 0.0, **fields})
