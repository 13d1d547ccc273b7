"""What a run says on the console: the start banner, and one progress line while the test runs.

Kept apart from measuring (records) and from cli.py's process handling: these functions only
format and print. The progress line is drawn only on a terminal (never into a log file or a pipe).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from llmload.loadtest.runconfig import RunConfig
from llmload.results.provenance import is_rehearsal, rehearsal_text
from llmload.results.predicted import predicted_label, validation_words
from llmload.timescale import REAL_TIME, TimeScale

__all__ = ["banner_lines", "override_notes", "progress_line", "format_s", "Progress"]


def format_s(seconds: float) -> str:
    """``42s``, ``2m05s``, ``1h02m``."""
    seconds = max(0, int(round(seconds)))
    minutes, s = divmod(seconds, 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m" if hours else f"{m}m{s:02d}s" if m else f"{s}s"


def override_notes(options: RunConfig, overrides: dict[str, str]) -> list[str]:
    """Settings the prompt set replaces, said out loud (random:IN:OUT sends its own max_tokens)."""
    notes = []
    if "max_tokens" in overrides and options.max_tokens:
        notes.append(f"MAX_TOKENS={options.max_tokens} is not sent: each prompt of PROMPTS={options.prompts} "
                     f"sets its own max_tokens ({overrides['max_tokens']})")
    return notes


def _load_text(options: RunConfig, scale: TimeScale) -> str:
    cap = f", at most {options.max_concurrency} in flight" if options.max_concurrency else ""
    if options.trace:
        speed = f", {options.trace_speed:g}x as fast" if options.trace_speed != 1 else ""
        rows = f"its first {options.trace_limit} rows" if options.trace_limit else "every row"
        return f"the trace {options.trace}, {rows} at its times{speed}{cap} (open loop)"
    conversations = options.turns.strip() != "1"
    unit = "conversations" if conversations else "requests"
    if options.rate:
        how = f"{options.rate:g} {unit}/s, {options.arrivals} arrivals{cap} (open loop)"
    else:
        how = f"{options.num_users} user{'s' if options.num_users != 1 else ''}"
    if conversations:
        how += f", conversations of {options.turns} turns" + (f", think time {options.think_time}" if options.think_time.strip() != "0" else "")
    if options.requests:
        return f"{options.requests} requests, {how}" if options.rate else f"{options.requests} requests, at most {how} at once"
    seconds = scale.target_s(options.duration_s or 0.0)
    scaled = f" (DURATION {options.run_time} on the target's clock, {scale.text()})" if scale.sped_up else ""
    return f"{format_s(seconds)} of load{scaled}, {how}" + ("" if options.rate else " (closed loop)")


def _prompts_text(options: RunConfig) -> str:
    if options.trace:
        return "the trace's rows"
    prefix = f" after a shared prefix of {options.prefix_tokens} tokens" if options.prefix_tokens else ""
    groups = f" (one of {options.prefix_groups})" if options.prefix_tokens and options.prefix_groups > 1 else ""
    return f"{options.prompts}{prefix}{groups}"


def _cache_text(options: RunConfig) -> str:
    """CACHE's intent in words, and CACHE_RESET."""
    if options.cache == "cold":
        where = f" from position {options.prompt_start} of the set's fresh order" if options.prompt_start else ""
        intent = f"CACHE=cold: each request a prompt the server has not seen in this study{where}"
    else:
        intent = "CACHE=warm: prompts repeat on purpose"
    return intent + ("; the server's prefix cache is emptied first (CACHE_RESET=on)" if options.cache_reset == "on" else "")


def banner_lines(options: RunConfig, host: str, model: str, served_by: dict[str, Any], results: str,
                 overrides: dict[str, str], scale: TimeScale = REAL_TIME) -> list[str]:
    """The lines printed before any load: what is loaded, how, for how long, and where results go."""
    max_tokens = overrides.get("max_tokens") or (options.max_tokens or "server default")
    if is_rehearsal(served_by):
        target = f"{host}: {rehearsal_text(served_by)}"
    else:
        version = served_by.get("version")
        target = f"{host} ({f'reports version {version}' if version else 'no /version: not vLLM?'})"
    lines = [
        f"llmload: {_load_text(options, scale)}; effort {options.effort}, max_tokens {max_tokens}, prompts {_prompts_text(options)}, "
        f"client {options.client}, API {options.api}"
        + (f", RESPONSE_FORMAT {options.response_format}" if options.response_format else ""),
        f"  target   {target}",
        f"  model    {model}",
        f"  results  {results}",
        f"  cache    {_cache_text(options)}",
    ]
    if is_rehearsal(served_by):
        lines.append(f"  timings  {predicted_label(served_by)}: {scale.conversion_text()}, raw figures beside them")
        validation = served_by.get("validation") if isinstance(served_by.get("validation"), dict) else {}
        if validation.get("status") != "validated":
            lines.append(f"  model    {validation_words(validation)}")
    if (adopted := scale.adopted_text()) is not None:
        lines.append(f"  scale    {adopted}")
    lines += [f"  note     {n}" for n in override_notes(options, overrides)]
    return lines


def progress_line(elapsed_s: float, total_s: float | None, requests_done: int, requests_total: int = 0) -> str:
    """``[#####.......] 42s of 2m00s, 1m18s left, 312 requests done``; past the end, the drain."""
    done = f"{requests_done} requests done" + (f" of {requests_total}" if requests_total else "")
    if total_s is None or total_s <= 0:
        return f"{format_s(elapsed_s)} elapsed, {done}"
    if elapsed_s >= total_s:
        return f"{format_s(elapsed_s)}: load sent; waiting for the streams in flight to finish, {done}"
    width = 24
    filled = int(width * elapsed_s / total_s)
    return f"[{'#' * filled}{'.' * (width - filled)}] {format_s(elapsed_s)} of {format_s(total_s)}, " \
           f"{format_s(total_s - elapsed_s)} left, {done}"


class Progress:
    """Redraws one status line a second on a terminal while a run writes ``samples``; nothing otherwise."""

    def __init__(self, samples: Path, total_s: float | None, requests_total: int = 0, stream: TextIO = sys.stdout,
                 clock: Callable[[], float] = time.monotonic, interval_s: float = 1.0) -> None:
        self.samples, self.total_s, self.requests_total = samples, total_s, requests_total
        self.stream, self.clock, self.interval_s = stream, clock, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._offset = 0
        self._count = 0

    def requests_done(self) -> int:
        """Lines written to samples.jsonl so far (read incrementally: the file only grows)."""
        try:
            with self.samples.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self._count
        self._offset += len(data)
        self._count += data.count(b"\n")
        return self._count

    def start(self) -> None:
        if not self.stream.isatty():
            return
        started_s = self.clock()

        def run() -> None:
            while not self._stop.wait(self.interval_s):
                line = progress_line(self.clock() - started_s, self.total_s, self.requests_done(), self.requests_total)
                self.stream.write(f"\r\x1b[2K{line}")
                self.stream.flush()

        self._thread = threading.Thread(target=run, name="llmload-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.stream.write("\r\x1b[2K")
        self.stream.flush()
