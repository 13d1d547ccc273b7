"""Confidence intervals: exact binomial ranks checked by hand, and coverage by pure simulation."""

import math

import numpy as np
import pytest

from factories import make_record
from llmload.results.intervals import MAX_BATCHES, batch_means_ci, batches_for, quantile_ci, quantile_ranks
from llmload.results.report import format_result
from llmload.results.summary import distribution, summarize

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


def rec(start_s: float, e2e_s: float, ttft_s: float, itl_s: list[float], out: int):
    return make_record(start_monotonic_s=start_s, e2e_s=e2e_s, ttft_s=ttft_s, itl_s=itl_s, prompt_tokens=10, completion_tokens=out)


def exact_coverage(n: int, q: float, low: int, up: int) -> float:
    """P(low <= B <= up - 1), B ~ Binomial(n, q), summed term by term."""
    return sum(math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(low, up))


@pytest.mark.parametrize("n, q", [(6, 0.5), (20, 0.5), (100, 0.5), (101, 0.5), (29, 0.9), (250, 0.9), (299, 0.99), (700, 0.99)])
def test_ranks_cover_at_least_95_percent_and_not_much_more(n, q):
    low, up = quantile_ranks(n, q)
    assert 1 <= low < up <= n
    coverage = exact_coverage(n, q, low, up)
    assert coverage >= 0.95
    # one rank less on either side would fall short: the interval is the narrowest that holds 95%
    assert exact_coverage(n, q, low + 1, up) < 0.95 and exact_coverage(n, q, low, up - 1) < 0.95


def test_known_ranks():
    assert quantile_ranks(6, 0.5) == (1, 6)  # 1 - 2 / 64 = 96.9%
    assert quantile_ranks(100, 0.5) == (41, 61)
    assert quantile_ranks(299, 0.99) == (289, 299)


@pytest.mark.parametrize("n, q", [(0, 0.5), (1, 0.5), (5, 0.5), (28, 0.9), (298, 0.99)])
def test_too_few_samples_give_none(n, q):
    assert quantile_ranks(n, q) is None
    assert quantile_ci(list(range(n)), q) is None


def test_interval_is_two_order_statistics():
    values = [float(v) for v in range(1, 101)]
    assert quantile_ci(values, 0.5) == [41.0, 61.0]


def test_large_samples_are_fast_enough_to_compute():
    low, up = quantile_ranks(10_000_000, 0.99)
    assert low < 9_900_000 < up and up - low < 2_000


@pytest.mark.parametrize("n, q", [(100, 0.5), (40, 0.5), (400, 0.9)])
def test_median_interval_covers_the_true_one_in_93_to_97_percent_of_2000_draws(n, q):
    rng = np.random.default_rng(15)
    true_quantile = -math.log(1 - q)  # of the unit exponential: skewed, like latencies
    covered = 0
    for _ in range(2000):
        lo, hi = quantile_ci(np.sort(rng.exponential(size=n)), q)
        covered += lo <= true_quantile <= hi
    assert 0.93 <= covered / 2000 <= 0.97


def test_batch_means_of_a_poisson_process_cover_its_rate():
    rng = np.random.default_rng(7)
    rate, duration_s, covered = 10.0, 100.0, 0
    for _ in range(2000):
        times = rng.uniform(0.0, duration_s, rng.poisson(rate * duration_s))
        lo, hi = batch_means_ci(times, np.ones(times.size), 0.0, duration_s, MAX_BATCHES)
        covered += lo <= rate <= hi
    assert 0.93 <= covered / 2000 <= 0.97


def test_batch_means_centre_is_the_runs_rate():
    times = [0.5, 1.5, 1.6, 2.5, 3.5, 3.6, 3.7, 4.5, 5.5, 6.5]
    lo, hi = batch_means_ci(times, [2.0] * len(times), 0.0, 10.0, 5)
    assert (lo + hi) / 2 == pytest.approx(2.0 * len(times) / 10.0)
    # windows of 2 s hold 3, 4, 2, 1, 0 events: rates 3, 4, 2, 1, 0 tok/s; sd = sqrt(2.5)
    assert hi - (lo + hi) / 2 == pytest.approx(2.776 * math.sqrt(2.5) / math.sqrt(5))
    assert lo == pytest.approx(max(0.0, 2.0 - 2.776 * math.sqrt(2.5) / math.sqrt(5)))


def test_batch_means_need_five_windows():
    assert batch_means_ci([1.0, 2.0], [1.0, 1.0], 0.0, 4.0, 4) is None
    assert batches_for(100.0, 30.0) == 3 and batches_for(100.0, 1.0) == MAX_BATCHES and batches_for(0.0, 1.0) == 0


def test_distribution_carries_intervals_beside_its_percentiles():
    d = distribution([v / 1000.0 for v in range(1, 101)], 1000.0)
    assert d.median_ci95 == pytest.approx([41.0, 61.0])
    assert d.p90_ci95 is not None and d.p90_ci95[0] <= d.p90 <= d.p90_ci95[1]
    assert d.p99_ci95 is None  # 100 samples cannot bracket a p99 with 95% confidence
    assert distribution([]).median_ci95 is None


def test_summary_and_result_block_carry_intervals():
    records = [rec(i * 0.5, 1.0, 0.1, [0.05] * 9, 10) for i in range(200)]
    s = summarize(records)
    assert s.ttft_ms.median_ci95 == pytest.approx([100.0, 100.0])
    assert s.rps_ci95 is not None and s.rps_ci95[0] <= s.rps <= s.rps_ci95[1]
    assert s.output_throughput_tok_s_ci95[0] <= s.output_throughput_tok_s <= s.output_throughput_tok_s_ci95[1]
    assert summarize(records[:3]).rps_ci95 is None  # a 2 s run of 1 s requests: 2 windows
    block = format_result(s)
    median_row = next(line for line in block.splitlines() if line.startswith("Median TTFT (ms):"))
    assert median_row.split()[-2:] == ["[100.00,", "100.00]"]
