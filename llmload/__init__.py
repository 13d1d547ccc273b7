"""llmload: Locust load tests for LLM serving with exact, reasoning-aware streaming metrics.

The data's path, one subpackage a stage:

    promptsets/  templates -> prompt sets (tokens counted as the server sees them)
    client/      one request -> its chunks -> a RequestRecord (raw socket or openai SDK)
    loadtest/    Locust users send the requests; the run session stores their records
    results/     records -> samples.jsonl -> summary.json -> the printed result block
    sweep/       a scenario's cells, one load test each -> cells.csv
    plots/       (beside llmload) results -> figures and report.html

``sim/`` is the built-in vLLM-like target; ``vllm_cpu/`` starts a real vLLM on the CPU; ``system/`` holds the
process, socket, timer and file helpers every stage uses.
"""

__version__ = "0.1.0"

from typing import Any

__all__ = ["ChatOptions", "RequestRecord", "Summary", "chat_body", "read_records", "summarize"]

# Lazy, as pyperf does: `import llmload.sim` must not load numpy or the clients.
_EXPORTS = {
    "ChatOptions": "llmload.client.body", "chat_body": "llmload.client.body",
    "RequestRecord": "llmload.results.records", "read_records": "llmload.results.records",
    "Summary": "llmload.results.summary", "summarize": "llmload.results.summary",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'llmload' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
