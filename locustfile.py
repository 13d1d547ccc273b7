"""Streamed chat-completion load for vLLM / OpenAI-compatible servers (see README).

    locust -f locustfile.py --host http://127.0.0.1:8000 --effort medium
"""

import locust  # noqa: F401  first: gevent must patch sockets before anything imports ssl

from llmload.loadtest.user import ChatUser  # noqa: F401  registers the options, events and web UI table
