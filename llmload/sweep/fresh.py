"""Fresh prompts for every run of a study (a sweep, a capacity search, a tune, crosscheck's runs): each run starts its
prompts where the runs before it under the study's folder stopped, so none meets prompts an earlier run left in the
server's prefix cache (CACHE=cold).

A run's PROMPT_START and how many requests it sent are in its folder (config.json, samples.jsonl): the next run starts
after the furthest any run reached, finished or cut short (a cut run's prompts may be cached too). Requests are an
upper bound on the prompts a run drew (a conversation's later turns draw none): skipping a few is harmless.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from llmload.results.storage import CONFIG_FILE, SAMPLES_FILE

__all__ = ["next_prompt_start", "PROMPT_START"]

PROMPT_START = "PROMPT_START"


def _reached(run: Path) -> int:
    """Where a run's prompts ended: its PROMPT_START plus the requests it recorded (0 for a folder that holds no run)."""
    try:
        config = orjson.loads((run / CONFIG_FILE).read_bytes())
        start = int(config.get("prompt_start") or 0)
    except (OSError, orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return 0
    try:
        with (run / SAMPLES_FILE).open("rb") as samples:
            requests = sum(1 for _ in samples)
    except OSError:
        requests = 0
    return start + requests


def next_prompt_start(study: Path, first: int = 0) -> int:
    """The PROMPT_START of the study's next run: past every run's prompts under ``study`` (at least ``first``)."""
    runs = (path.parent for path in Path(study).rglob(CONFIG_FILE)) if Path(study).is_dir() else ()
    return max([first, *(_reached(run) for run in runs)])
