"""What served a run, in words: a rehearsal on the built-in target is never shown as a measurement.

A run's ``config.served_by`` (written by the load test from the server's own answers) says what
answered the requests; a scenario's ``server`` block only says what the study declares it ran on.
"""

from __future__ import annotations

from typing import Any

from llmload.timescale import TimeScale

__all__ = ["bare_model_name", "served_by_of", "is_rehearsal", "rehearsal_label", "rehearsal_text",
           "served_by_text"]


def bare_model_name(model: str) -> str:
    """A model id without its organisation: ``openai/gpt-oss-120b`` -> ``gpt-oss-120b`` (MODEL matches either)."""
    return model.rsplit("/", 1)[-1]


def served_by_of(config: dict[str, Any]) -> dict[str, Any] | None:
    """A summary config's ``served_by``; None for results written before it was recorded."""
    value = config.get("served_by")
    return value if isinstance(value, dict) else None


def is_rehearsal(served_by: dict[str, Any] | None) -> bool:
    return bool(served_by and served_by.get("rehearsal"))


def rehearsal_label(served_by: dict[str, Any]) -> str:
    """``REHEARSAL (built-in target playing h100, SPEEDUP 20x)``; ``UNVALIDATED`` where its profile never met a measurement."""
    scale = TimeScale(float(served_by.get("speedup") or 1.0))
    validation = served_by.get("validation")
    unvalidated = ", UNVALIDATED profile" if isinstance(validation, dict) and validation.get("status") == "unvalidated" else ""
    return (f"REHEARSAL (built-in target playing {served_by.get('gpu_profile') or '?'}"
            f"{', ' + scale.text() if scale.sped_up else ''}{unvalidated})")


def rehearsal_text(served_by: dict[str, Any]) -> str:
    """What the console banner and the web UI say beside the host: the label, and that timings are simulated."""
    return f"{rehearsal_label(served_by)}, simulated timings (not a measurement)"


def served_by_text(served_by: dict[str, Any] | None) -> str:
    """One line: what answered the requests, by its own report."""
    if served_by is None:
        return "not recorded (results written before the suite recorded it)"
    model = served_by.get("model") or "?"
    engine = _ENGINE_TITLES.get(served_by.get("engine") or "")
    if is_rehearsal(served_by):
        speaking = f" speaking as {engine}" if engine and served_by.get("engine") != "vllm" else ""
        return (f"{rehearsal_label(served_by)}: {served_by.get('name')} {served_by.get('version') or ''}{speaking} serving "
                f"{model}; simulated timings, not a measurement").replace("  ", " ")
    version = served_by.get("version")
    reported = f"reports version {version}" if version else "reports no version (no /version)"
    return f"the server at {served_by.get('host') or '?'} ({f'{engine}, ' if engine else ''}{reported}) serving {model}"


_ENGINE_TITLES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "trtllm-serve"}
"""served_by's ``engine`` (what /v1/models' owned_by names) in words."""
