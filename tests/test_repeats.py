"""The spread between repeated runs of a cell, from literal numbers."""

import pytest

from llmload.sweep.repeats import HEADLINE, spread, spread_rows, format_spread

pytestmark = pytest.mark.pure


def test_spread_of_literal_numbers():
    s = spread([10.0, 12.0, 14.0], [(9.0, 11.0), (11.0, 14.0)])
    assert (s.runs, s.mean, s.min, s.max, s.stdev, s.run_ci95_width_mean) == (3, 12.0, 10.0, 14.0, 2.0, 2.5)
    lone = spread([5.0])
    assert (lone.runs, lone.stdev, lone.run_ci95_width_mean) == (1, None, None)
    assert spread([]).mean is None


def test_rows_per_cell_skip_what_a_run_did_not_measure():
    runs = [{"cell": 0, "key": "k0", "label": "u1", "rps": 2.0, "rps_ci95_lo": 1.5, "rps_ci95_hi": 2.5, "goodput_rps": None},
            {"cell": 0, "key": "k0", "label": "u1", "rps": 3.0, "rps_ci95_lo": None, "rps_ci95_hi": None, "goodput_rps": None},
            {"cell": 1, "key": "k1", "label": "u2", "rps": 4.0}]
    first, second = spread_rows(runs)
    assert (first["runs"], first["rps_min"], first["rps_max"], first["rps_run_ci95_width_mean"]) == (2, 2.0, 3.0, 1.0)
    assert first["rps_stdev"] == pytest.approx(0.5 ** 0.5) and first["goodput_rps_mean"] is None
    assert (second["runs"], second["rps_stdev"]) == (1, None)
    assert all(f"{m}_stdev" in first for m in HEADLINE)
    assert format_spread(first, ("rps",)) == "cell 0 u1, 2 runs: rps 2-3 (sd 0.707; one run's 95% interval 1 wide)"
