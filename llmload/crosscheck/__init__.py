"""`make crosscheck`: vLLM's own bench and llmload on one server and workload, their figures side by side."""
