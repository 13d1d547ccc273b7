"""Markdown tables: a results folder's cells, and B (tuned) against A (baseline) cell by cell.

Cells of A and B are matched by their workload (the run options that say what was measured:
model, prompts, effort, users, max_tokens, requests, ...), never by GPU, host or server flags, so a
baseline and a tuned sweep of one scenario pair up. A pair whose mean output tokens differ by more
than 10% is flagged: the servers did different work, and their throughput does not compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from llmload.results.provenance import is_rehearsal
from plots.results import MeasuredCell, Results, ResultsError

__all__ = ["Table", "CompareRow", "pct_change", "outputs_differ", "match_cells", "compare_rows", "compare_table",
           "compare", "cells_table", "same_point_table", "served_by_short", "OUTPUT_TOLERANCE"]

OUTPUT_TOLERANCE = 0.10
FLAG = "†"


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: tuple[str, ...]  # "l" or "r" per column
    footnotes: tuple[str, ...] = ()

    def to_markdown(self) -> str:
        def esc(text: str) -> str:
            return text.replace("|", "\\|")
        lines = ["| " + " | ".join(esc(h) for h in self.headers) + " |",
                 "|" + "|".join("---:" if a == "r" else "---" for a in self.align) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in self.rows]
        if self.footnotes:
            lines.append("")
            lines += self.footnotes
        return "\n".join(lines) + "\n"


def pct_change(base: float | None, new: float | None) -> float | None:
    """(new - base) / base in percent; None when either is unknown or base is 0."""
    if base is None or new is None or base == 0:
        return None
    return (new - base) / base * 100.0


def outputs_differ(a_mean: float | None, b_mean: float | None, tolerance: float = OUTPUT_TOLERANCE) -> bool:
    """True when B's mean output tokens are more than ``tolerance`` (relative to A's) away from A's."""
    if a_mean is None or b_mean is None:
        return False
    if a_mean == 0:
        return b_mean != 0
    return abs(b_mean - a_mean) / a_mean > tolerance


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


@dataclass(frozen=True)
class CompareRow:
    label: str
    a: MeasuredCell
    b: MeasuredCell
    a_tok_s: float | None
    b_tok_s: float | None
    tok_s_change_pct: float | None
    a_tpot_ms: float | None
    b_tpot_ms: float | None
    tpot_change_pct: float | None
    a_output_mean: float | None
    b_output_mean: float | None
    flagged: bool


def match_cells(a: Sequence[MeasuredCell], b: Sequence[MeasuredCell]) -> tuple[list[tuple[MeasuredCell, MeasuredCell]], list[MeasuredCell], list[MeasuredCell]]:
    """Pairs of cells with the same workload (in A's order), then A's and B's unmatched cells."""
    pool: dict[tuple, list[MeasuredCell]] = {}
    for cell in b:
        pool.setdefault(cell.workload(), []).append(cell)
    pairs, only_a = [], []
    for cell in a:
        twins = pool.get(cell.workload())
        if twins:
            pairs.append((cell, twins.pop(0)))
        else:
            only_a.append(cell)
    matched_b = {id(y) for _, y in pairs}
    return pairs, only_a, [c for c in b if id(c) not in matched_b]


def compare_rows(pairs: Sequence[tuple[MeasuredCell, MeasuredCell]]) -> list[CompareRow]:
    rows = []
    for x, y in pairs:
        a_tok, b_tok = x.metric("total_throughput_tok_s"), y.metric("total_throughput_tok_s")
        a_tpot, b_tpot = x.metric("tpot_ms.mean"), y.metric("tpot_ms.mean")
        a_out, b_out = x.metric("output_tokens.mean"), y.metric("output_tokens.mean")
        rows.append(CompareRow(x.label, x, y, a_tok, b_tok, pct_change(a_tok, b_tok), a_tpot, b_tpot,
                               pct_change(a_tpot, b_tpot), a_out, b_out, outputs_differ(a_out, b_out)))
    return rows


def compare_table(rows: Sequence[CompareRow]) -> Table:
    body, notes = [], []
    for n, r in enumerate(rows, 1):
        label = r.label + (f" {FLAG}{n}" if r.flagged else "")
        body.append((label, _num(r.a_tok_s), _num(r.b_tok_s), _pct(r.tok_s_change_pct),
                     _num(r.a_tpot_ms, 2), _num(r.b_tpot_ms, 2), _pct(r.tpot_change_pct)))
        if r.flagged:
            notes.append(f"{FLAG}{n} {r.label}: mean output tokens {_num(r.a_output_mean)} (baseline) vs {_num(r.b_output_mean)} "
                         f"(tuned), {_pct(pct_change(r.a_output_mean, r.b_output_mean))}: more than "
                         f"{OUTPUT_TOLERANCE:.0%} apart, so the two servers did different work and comparing them misleads.")
    return Table(("workload", "baseline total tok/s", "tuned total tok/s", "change", "baseline mean TPOT (ms)",
                  "tuned mean TPOT (ms)", "change"), tuple(body), ("l", "r", "r", "r", "r", "r", "r"), tuple(notes))


def served_by_short(cell: MeasuredCell) -> str:
    """A cells-table word for what answered: ``REHEARSAL llmload.sim h100 20x`` or the server's reported version."""
    s = cell.served_by
    if s is None:
        return "not recorded"
    if is_rehearsal(s):
        scale = cell.time_scale
        scaled = f" {scale.text()}, times and rates scaled back" if scale.sped_up else ""  # MeasuredCell.metric
        return f"REHEARSAL {s.get('name')} {s.get('gpu_profile')}{scaled}"
    return f"server {s.get('version') or '(no /version)'}"


def _describe(results: Results) -> str:
    server = results.server
    bits = [f"`{results.path}`", results.name]
    served = sorted({served_by_short(c) for c in results.cells})
    if served:
        bits.append("served by " + " / ".join(served))
    if server.get("gpu"):
        bits.append(f"declared GPU {server['gpu']}")
    if server.get("command"):
        bits.append(f"declared `{server['command']}`")
    return ", ".join(bits)


def compare(a: Results, b: Results) -> str:
    """Markdown: B (tuned) against A (baseline) for every workload both measured; ResultsError when none."""
    pairs, only_a, only_b = match_cells(a.cells, b.cells)
    if not pairs:
        raise ResultsError(f"no cell of {b.path} measured the same workload as a cell of {a.path}; nothing to compare")
    rows = compare_rows(pairs)
    out = [f"## {b.name} against {a.name}", "", f"- baseline (A): {_describe(a)}", f"- tuned (B): {_describe(b)}",
           "- cells matched by their workload settings (server-only differences such as GPU, host or server flags ignored); "
           "change = (tuned - baseline) / baseline", "", compare_table(rows).to_markdown()]
    if only_a or only_b:
        out.append("")
        if only_a:
            out.append("Only in the baseline (not compared): " + ", ".join(c.label for c in only_a))
        if only_b:
            out.append("Only in the tuned run (not compared): " + ", ".join(c.label for c in only_b))
    missing = [(r, m) for r in (a, b) for m in r.missing]
    if missing:
        out.append("")
        out.append("Unfinished cells: " + "; ".join(f"{r.name} {m.label} ({m.reason})" for r, m in missing))
    return "\n".join(out).rstrip() + "\n"


def cells_table(results: Results | Sequence[MeasuredCell]) -> Table:
    """One row per cell: the figures a reader looks for first."""
    cells = results.cells if isinstance(results, Results) else results
    body = []
    for c in cells:
        ratio, valid = c.metric("answered_ratio"), c.metric("answer_valid_ratio")
        body.append((str(c.index if c.index is not None else "-"), c.label, c.gpu, "complete" if c.complete else "partial", served_by_short(c),
                     c.api, str(int(c.metric("requests_ok") or 0)), _num(c.metric("rps"), 2),
                     _num(c.metric("response_time_ms.median"), 0), _num(c.metric("response_time_ms.p99"), 0),
                     _num(c.metric("ttft_ms.median"), 0), _num(c.metric("tpot_ms.mean"), 2),
                     _num(c.metric("output_throughput_tok_s"), 0), _num(c.metric("total_throughput_tok_s"), 0),
                     _num(c.metric("output_tokens.mean"), 0), "-" if ratio is None else f"{ratio:.0%}",
                     "-" if valid is None else f"{valid:.0%}"))
    return Table(("cell", "label", "GPU", "status", "served by", "API", "ok", "req/s", "median RT (ms)", "p99 RT (ms)",
                  "median TTFT (ms)", "mean TPOT (ms)", "output tok/s", "total tok/s", "mean output tokens", "answered",
                  "valid answers (RESPONSE_FORMAT)"),
                 tuple(body), ("r", "l", "l", "l", "l", "l") + ("r",) * 11)


def same_point_table(groups: Sequence[tuple[MeasuredCell, ...]]) -> Table:
    """Runs with the same settings (points.same_point): the one the figures draw, and the others."""
    rows = tuple((group[-1].label, str(group[-1].path), ", ".join(str(c.path) for c in group[:-1])) for group in groups)
    return Table(("settings", "drawn", "not drawn: the same settings"), rows, ("l", "l", "l"),
                 ("A figure has one point per setting and draws the last run given: give one run of each, or a sweep "
                  "with REPEATS, whose repeats are pooled.",))
