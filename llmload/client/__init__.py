"""One streamed chat completion, measured: request body, HTTP (raw socket or openai SDK), SSE, and its record."""
