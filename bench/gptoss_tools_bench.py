#!/usr/bin/env python3
"""tiny-gptoss's tool calls under sampling: well-formed share of calls and of answers after the result.

    python bench/gptoss_tools_bench.py HOST [--requests 300] [--users 8] [--efforts low ...]

HOST serves tiny-gptoss (make serve-vllm-cpu). Each effort gets REQUESTS streamed chat completions at
temperature 1.0 and top_p 1.0 offering get_weather between two other functions (tool_choice auto). A call
is well formed when it showed no text, named get_weather once, sent arguments that parse
as a JSON object, and finished with `tool_calls`. Each well-formed call's round trip follows: the call and
a tool result appended, the answer is well formed when it reasoned, answered with text, called nothing
and finished with `stop`. Prints one Markdown row per effort.
"""

from __future__ import annotations

import argparse
import json
import statistics
import urllib.request
from concurrent.futures import ThreadPoolExecutor

FUNCTION = "get_weather"
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
         for name in ("list_invoices", FUNCTION, "create_ticket")]
QUESTION = {"role": "user", "content": "What is the weather in Paris right now?"}
RESULT = json.dumps({"status": "ok", "items": [{"id": 7, "summary": "clear sky, 21 C"}]})


def stream_chat(host: str, body: dict) -> dict:
    """A streamed chat completion as a client assembles it: reasoning deltas, text, the call, finish reasons."""
    request = urllib.request.Request(f"{host}/v1/chat/completions", headers={"Content-Type": "application/json"},
                                     data=json.dumps({**body, "stream": True}).encode())
    with urllib.request.urlopen(request, timeout=300) as response:
        lines = response.read().decode().splitlines()
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ") and line != "data: [DONE]"]
    deltas = [e["choices"][0]["delta"] for e in events if e.get("choices")]
    calls = [call for d in deltas for call in d.get("tool_calls") or []]
    return {"reasoning": sum(1 for d in deltas if d.get("reasoning")),
            "content": "".join(d.get("content") or "" for d in deltas),
            "names": [c["function"]["name"] for c in calls if c["function"].get("name")],
            "call_id": next((c["id"] for c in calls if c.get("id")), None),
            "arguments": "".join(c["function"].get("arguments") or "" for c in calls),
            "finish": [e["choices"][0]["finish_reason"] for e in events
                       if e.get("choices") and e["choices"][0].get("finish_reason")]}


def call_well_formed(chat: dict) -> bool:
    try:
        arguments = json.loads(chat["arguments"])
    except json.JSONDecodeError:
        return False
    return (isinstance(arguments, dict) and chat["names"] == [FUNCTION] and chat["finish"] == ["tool_calls"]
            and not chat["content"])


def answer_well_formed(chat: dict) -> bool:
    return bool(chat["content"]) and not chat["names"] and chat["finish"] == ["stop"] and chat["reasoning"] > 0


def round_trip(host: str, effort: str) -> tuple[bool, bool | None, int]:
    """(call well formed, answer after its result well formed or None without a call, reasoning deltas)."""
    body = {"model": "tiny-gptoss", "tools": TOOLS, "tool_choice": "auto", "reasoning_effort": effort,
            "temperature": 1.0, "top_p": 1.0}
    call = stream_chat(host, {**body, "messages": [QUESTION]})
    if not call_well_formed(call):
        return False, None, call["reasoning"]
    function = {"name": FUNCTION, "arguments": call["arguments"]}
    tool_call = {"id": call["call_id"], "type": "function", "function": function}
    messages = [QUESTION, {"role": "assistant", "content": None, "tool_calls": [tool_call]},
                {"role": "tool", "tool_call_id": call["call_id"], "content": RESULT}]
    return True, answer_well_formed(stream_chat(host, {**body, "messages": messages})), call["reasoning"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--efforts", nargs="+", default=["low", "medium", "high"], choices=["low", "medium", "high"])
    args = parser.parse_args()
    print("| effort | requests | call well formed | answer after the result well formed "
          "| median reasoning deltas before the call |\n|---|---:|---:|---:|---:|")
    with ThreadPoolExecutor(args.users) as pool:
        for effort in args.efforts:
            trips = list(pool.map(lambda _: round_trip(args.host, effort), range(args.requests)))
            calls = sum(ok for ok, _, _ in trips)
            answers = sum(bool(answered) for _, answered, _ in trips)
            median = statistics.median(reasoning for _, _, reasoning in trips)
            print(f"| {effort} | {len(trips)} | {calls / len(trips):.2%} | "
                  f"{answers}/{calls} ({answers / max(calls, 1):.2%}) | {median:g} |", flush=True)


if __name__ == "__main__":
    main()
