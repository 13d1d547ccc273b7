"""vLLM's CPU build serving tiny local models: `python -m llmload.vllm_cpu serve|stop|build`."""
