"""Templates -> prompt sets: generated 2k/4k/8k sets, vLLM bench's workloads, token counts as vLLM sees them."""
