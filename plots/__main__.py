"""python -m plots figures DIR [DIR ...] | python -m plots compare A B

    figures   every figure (PNG and SVG) into DIR/figures/ of the first DIR, and DIR/report.html
              (a `make capacity` folder: its capacity figure too; a `make tune` folder, given alone: the
              tune's figures and report, plots/tune.py)
              (all figures inline, the cells table, the server, the missing cells)
    compare   Markdown to stdout: B (tuned) against A (baseline), per workload both measured

Bad input (a folder that is not results, no matching cell) prints one line `error: ...` on stderr
and exits 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = "usage: python -m plots figures DIR [DIR ...] | python -m plots compare A B"


def _tune_figures(out: Path) -> int:
    """A `make tune` folder (it holds tune.json): the tune's figures into OUT/figures and OUT/report.html."""
    from llmload.results.tunefile import read_tune
    from llmload.results.tunereport import tune_lines
    from plots.tune import tune_figures

    print("\n".join(tune_lines(read_tune(out))))
    report = tune_figures(out)
    drawn = sorted(p.name for p in (out / "figures").glob("tune_*.png"))
    print(f"{len(drawn)} figures (PNG and SVG) in {out / 'figures'}; report: {report}")
    return 0


def _figures(dirs: list[str]) -> int:
    from llmload.results.storage import CAPACITY_FILE
    from llmload.results.tunefile import TUNE_FILE
    from plots.results import ResultsError

    tunes = [d for d in dirs if (Path(d) / TUNE_FILE).is_file()]
    if tunes and len(dirs) > 1:
        raise ResultsError(f"{tunes[0]} is a tune's folder (it holds {TUNE_FILE}); draw it on its own: "
                           f"make figures RESULTS={tunes[0]}")
    if tunes:
        return _tune_figures(Path(tunes[0]))
    from plots.capacity import load_capacity
    from plots.decision import decision_table, predicted_table
    from plots.capacity_figure import capacity_figure
    from plots.figures import draw_all
    from plots.html import table_html, write_report
    from plots.points import same_point
    from plots.results import load_results
    from plots.tables import compare_rows, compare_table, match_cells, same_point_table

    results = [load_results(d) for d in dirs]
    first = results[0]
    cells = [c for r in results for c in r.cells]
    out = first.path / "figures"
    figures = draw_all(cells, out)
    if (first.path / CAPACITY_FILE).exists():  # a `make capacity` folder: its figure too
        figures.append(capacity_figure(load_capacity(first.path), out))
    comparisons = []
    decision = decision_table(results)
    if decision is not None:
        comparisons.append(("The GPU decision: capacity at the SLO, output tokens/s and cost per million tokens there",
                            table_html(decision)))
        print(decision.to_markdown())
    predicted = predicted_table(results)
    if predicted is not None:
        comparisons.append(("Rehearsals: figures predicted for the GPU each played", table_html(predicted)))
    shared = same_point(cells)
    if shared:
        comparisons.append(("Runs of the same settings: the figures draw the last given",
                            table_html(same_point_table(shared))))
    for other in results[1:]:  # a later folder measuring the first one's workloads: its comparison table too
        pairs = match_cells(first.cells, other.cells)[0]
        if pairs:
            comparisons.append((f"{other.name} ({other.path}) against {first.name}", table_html(compare_table(compare_rows(pairs)))))
    report = write_report(results, figures, first.path, comparisons)
    drawn = [f for f in figures if not f.skipped]
    print(f"{len(drawn)} figures (PNG and SVG) in {out}; report: {report}")
    for f in figures:
        if f.skipped:
            print(f"  skipped {f.name}: {f.note}")
    for group in shared:
        print(f"  same settings as {group[-1].path} (drawn): {', '.join(str(c.path) for c in group[:-1])} (not drawn; "
              "a sweep with REPEATS pools repeats)")
    for r in results:
        for m in r.missing:
            print(f"  {r.name}: cell {m.index} {m.label}: {m.reason}")
    return 0


def _compare(a: str, b: str) -> int:
    from plots.results import load_results
    from plots.tables import compare

    sys.stdout.write(compare(load_results(a), load_results(b)))
    return 0


def main(argv: list[str]) -> int:
    from plots.results import ResultsError

    try:
        if len(argv) >= 2 and argv[0] == "figures":
            return _figures(argv[1:])
        if len(argv) == 3 and argv[0] == "compare":
            return _compare(argv[1], argv[2])
        if argv[:1] == ["figures"] and len(argv) == 1:
            raise ResultsError("RESULTS is missing: give results folders, e.g. make figures RESULTS=results/<sweep or run>")
        if argv[:1] == ["compare"] and len(argv) != 3:
            raise ResultsError("A and B are needed: make compare A=results/<baseline> B=results/<tuned>")
        if argv and argv[0] in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        raise ResultsError(USAGE.removeprefix("usage: ").join(("expected ", "")))
    except ResultsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {getattr(e, 'filename', '') or ''}: {e.strerror or e}".replace("error: : ", "error: "), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
