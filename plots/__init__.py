"""Figures, comparison tables and an offline HTML report from llmload results folders.

    python -m plots figures DIR [DIR ...]   figures/ and report.html in the first DIR
    python -m plots compare A B             Markdown: B (tuned) against A (baseline), cell by cell
"""

from plots.results import MeasuredCell, MissingCell, Results, ResultsError, load_results

__all__ = ["MeasuredCell", "MissingCell", "Results", "ResultsError", "load_results"]
