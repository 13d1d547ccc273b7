"""llmload: Locust load tests for LLM serving with exact, reasoning-aware streaming metrics.

The data's path: prompts -> Locust users (locust_plugin) -> clients (client_raw, client_openai)
-> StreamAccumulator (stream) -> RequestRecord (records) -> samples.jsonl (storage)
-> Summary (metrics) -> result block (report).
"""

from llmload.metrics import Summary, summarize
from llmload.payload import ChatOptions, chat_body
from llmload.records import RequestRecord, read_records

__all__ = ["ChatOptions", "RequestRecord", "Summary", "chat_body", "read_records", "summarize"]
__version__ = "0.1.0"
