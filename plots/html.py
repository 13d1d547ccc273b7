"""report.html: one self-contained page (inline SVG figures, inline CSS, no scripts, no network)."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import Sequence

from llmload.system.files import write_atomic
from llmload.results.provenance import is_rehearsal, rehearsal_label, served_by_text
from plots.drawing import FigureData
from plots.results import Results
from plots.tables import Table, cells_table

__all__ = ["write_report", "REPORT_FILE"]

REPORT_FILE = "report.html"
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0;font-size:12px}th,td{border:1px solid #ddd;padding:3px 6px}
th{background:#f4f4f4}td.r{text-align:right;font-variant-numeric:tabular-nums}
code{background:#f4f4f4;padding:0 3px}.note{color:#a40}.figure svg{max-width:100%;height:auto}
.figure{margin:1em 0}.skipped{color:#777}ul.missing li{color:#a40}
.rehearsal{background:#fde8e8;border:2px solid #c00;color:#900;padding:.6em 1em;font-weight:bold}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def table_html(table: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in table.headers)
    rows = "".join("<tr>" + "".join(f'<td class="{a}">{_e(c)}</td>' for c, a in zip(row, table.align)) + "</tr>"
                   for row in table.rows)
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in table.footnotes)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{notes}"


def _svg(path: Path, n: int) -> str:
    """An SVG file's <svg> element, its ids made unique to this figure (several share one page)."""
    text = path.read_text(encoding="utf-8")
    text = text[text.index("<svg"):]
    prefix = f"f{n}-"
    text = re.sub(r'id="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    return re.sub(r'(url\(#|xlink:href="#|href="#)([^)"]+)', lambda m: f"{m.group(1)}{prefix}{m.group(2)}", text)


def _server_html(r: Results) -> str:
    """What answered the requests (by the servers' own reports), then what the scenario declares, kept apart."""
    counts: dict[str, int] = {}
    for c in r.cells:
        text = served_by_text(c.served_by)
        counts[text] = counts.get(text, 0) + 1
    parts = ["<h3>Served by (what answered the requests, as the server reported itself)</h3><ul>"
             + "".join(f"<li>{_e(text)} ({n} cell{'s' if n != 1 else ''})</li>" for text, n in counts.items()) + "</ul>"]
    if r.server:
        rows = tuple((k, v) for k, v in r.server.items())
        parts.append("<h3>Declared by the scenario (what the study runs on; not reported by any server)</h3>"
                     + table_html(Table(("what", "declared"), rows, ("l", "l"))))
        if any(is_rehearsal(c.served_by) for c in r.cells):
            parts.append('<p class="note">These results are a rehearsal: they did not come from the declared server.</p>')
    return "".join(parts)


def _rehearsal_banner(results: Sequence[Results]) -> str:
    rehearsals = [c for r in results for c in r.cells if is_rehearsal(c.served_by)]
    if not rehearsals:
        return ""
    labels = sorted({rehearsal_label(c.served_by) for c in rehearsals})
    sped = (" (those that ran sped up drawn scaled back as predicted for the GPU they played)"
            if any(c.time_scale.sped_up for c in rehearsals) else "")
    return (f'<p class="rehearsal">{_e("; ".join(labels))}: these results come from the built-in target, which simulates '
            f"a GPU; its timings are simulated{sped}. They are not a measurement of any server.</p>")


def _missing_html(r: Results) -> str:
    if not r.missing:
        return "<p>Every cell is complete.</p>"
    return (f"<details><summary>Missing or partial cells ({len(r.missing)} of {r.planned})</summary><ul class=missing>"
            + "".join(f"<li>cell {_e(m.index)} <b>{_e(m.label)}</b> (<code>{_e(m.key)}</code>): {_e(m.reason)}</li>" for m in r.missing)
            + "</ul></details>")


def write_report(results: Sequence[Results], figures: Sequence[FigureData], out: Path,
                 extra_tables: Sequence[tuple[str, str]] = ()) -> Path:
    """Write out/report.html for ``results`` (the first is the report's own folder) and its figures."""
    first = results[0]
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(first.name)}: load test report</title>",
             f"<style>{CSS}</style></head><body>", f"<h1>{_e(first.name)}: load test report</h1>",
             f"<p>Generated {_e(time.strftime('%Y-%m-%d %H:%M %Z'))} by <code>python -m plots figures</code> from "
             + ", ".join(f"<code>{_e(r.path)}</code>" for r in results) + ".</p>", _rehearsal_banner(results)]
    for r in results:
        parts.append(f"<h2>{_e(r.name)} <small>({_e(r.kind)}, {len([c for c in r.cells if c.complete])} of {r.planned} cells complete)</small></h2>")
        if r.description:
            parts.append(f"<p>{_e(r.description)}</p>")
        parts.append(_server_html(r))
        parts.append("<h3>Cells</h3>" + (table_html(cells_table(r)) if r.cells else "<p>No cell has results yet.</p>"))
        parts.append(_missing_html(r))
    for title, body in extra_tables:
        parts.append(f"<h2>{_e(title)}</h2>{body}")
    parts.append("<h2>Figures</h2>")
    skipped = []
    for n, fig in enumerate(figures):
        svg = next((p for p in fig.files if p.suffix == ".svg"), None)
        if svg is None:
            skipped.append(fig)
            continue
        parts.append(f'<div class="figure" id="{_e(fig.name)}"><h3>{_e(fig.title)}</h3>{_svg(svg, n)}'
                     f'<p><a href="figures/{_e(svg.name)}">SVG</a> · <a href="figures/{_e(fig.name)}.png">PNG</a></p></div>')
    if skipped:
        parts.append("<h3>Figures not drawn</h3><ul class=skipped>"
                     + "".join(f"<li>{_e(f.title)}: {_e(f.note)}</li>" for f in skipped) + "</ul>")
    parts.append("</body></html>\n")
    return write_atomic(Path(out) / REPORT_FILE, "\n".join(parts))
