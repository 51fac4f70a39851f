"""specbench.analysis.stats: values pinned for fixed inputs and seeds, and the limits of its options tested at
the limit and one past. Quick and free of hypothesis, so `make mutation` runs them first; each one
kills mutants that tests/test_stats.py's worked examples and properties let live."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import zlib
from collections.abc import Iterator

import pytest

from specbench.analysis import stats

BASELINE = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
SPECULATIVE = [1.0, 1.1, 1.2, 1.6, 1.9]


def reference_interval(groups: list[list[float]], resamples: int, confidence: float, seed: int) -> tuple[float, float]:
    """The percentile bootstrap written out independently: the same draws (each group in turn, with
    random.Random(seed).choices), the ratio of statistics.median, the tails by statistics.quantiles."""
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        medians = [statistics.median(rng.choices(group, k=len(group))) for group in groups]
        ratios.append(medians[0] / medians[1] if len(medians) == 2 else medians[0])
    cuts = statistics.quantiles(sorted(ratios), n=round(2 / (1 - confidence)), method="inclusive")
    return cuts[0], cuts[-1]


@pytest.mark.parametrize(
    ("confidence", "low", "high"),
    [(0.95, 0.8333333333333334, 2.7392045454545455), (0.9, 0.9375, 2.5), (0.5, 1.3636363636363635, 2.0833333333333335)],
)
def test_speedup_interval_is_pinned_for_a_seed(confidence: float, low: float, high: float) -> None:
    """The bounds are the (1 - confidence) / 2 tails of the seeded resamples: p2.5/p97.5 at 95 %."""
    interval = stats.speedup(BASELINE, SPECULATIVE, resamples=500, seed=9, confidence=confidence)
    assert interval == stats.Interval(2.25 / 1.2, pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12), confidence, 500)
    assert (interval.low, interval.high) == pytest.approx(reference_interval([BASELINE, SPECULATIVE], 500, confidence, 9), rel=1e-12)


def test_median_ci_is_pinned_for_a_seed() -> None:
    values = [3.0, 1.0, 2.0, 5.0, 4.0, 7.5, 0.5]
    interval = stats.median_ci(values, resamples=300, seed=4)
    expected = reference_interval([values], 300, 0.95, 4)
    assert interval == stats.Interval(3.0, pytest.approx(expected[0], rel=1e-12), pytest.approx(expected[1], rel=1e-12), 0.95, 300)
    assert (interval.low, interval.high) == (1.0, 5.0)


def test_the_default_options_are_2000_resamples_at_95_percent_seed_0() -> None:
    default = stats.speedup(BASELINE, SPECULATIVE)
    assert default == stats.speedup(BASELINE, SPECULATIVE, resamples=2000, confidence=0.95, seed=0)
    assert (default.confidence, default.resamples) == (0.95, 2000)
    expected = reference_interval([BASELINE, SPECULATIVE], 2000, 0.95, 0)
    assert (default.low, default.high) == pytest.approx(expected, rel=1e-12)


def test_a_group_of_exactly_two_values_is_resampled() -> None:
    interval = stats.speedup([1.0, 3.0], [1.0, 2.0], resamples=40, seed=1)
    assert interval.known and interval.resamples == 40
    assert (interval.low, interval.high) == pytest.approx(reference_interval([[1.0, 3.0], [1.0, 2.0]], 40, 0.95, 1), rel=1e-12)


def counting_estimate(dropped: set[int], dropped_value: float | None = None) -> object:
    """An estimate whose n-th call returns n (call 0 is the point estimate), or ``dropped_value`` for
    the calls in ``dropped``."""
    calls: Iterator[int] = iter(range(1_000_000))

    def estimate(*_groups: list[float]) -> float | None:
        n = next(calls)
        return dropped_value if n in dropped else float(n)

    return estimate


def test_one_resample_is_enough_and_zero_is_refused() -> None:
    assert stats.bootstrap_ci(([1.0, 2.0],), counting_estimate(set()), resamples=1) == stats.Interval(0.0, 1.0, 1.0, 0.95, 1)
    with pytest.raises(ValueError, match="^resamples must be at least 1$"):
        stats.bootstrap_ci(([1.0, 2.0],), counting_estimate(set()), resamples=0)


@pytest.mark.parametrize(("confidence", "valid"), [(0.0, False), (1e-9, True), (0.999999, True), (1.0, False), (-0.5, False)])
def test_confidence_limits(confidence: float, valid: bool) -> None:
    if valid:
        assert stats.bootstrap_ci(([1.0, 2.0],), counting_estimate(set()), resamples=3, confidence=confidence).known
    else:
        with pytest.raises(ValueError, match=rf"^confidence {confidence} outside \(0, 1\)$"):
            stats.bootstrap_ci(([1.0, 2.0],), counting_estimate(set()), resamples=3, confidence=confidence)


@pytest.mark.parametrize("dropped_value", [None, math.nan, math.inf, -math.inf])
def test_one_undefined_resample_in_20_is_dropped_two_drop_the_interval(dropped_value: float | None) -> None:
    """Resamples 1..20 estimate 1..20; those undefined are left out, and more than 1 in 20 gives none."""
    one = stats.bootstrap_ci(([1.0, 2.0],), counting_estimate({20}, dropped_value), resamples=20)
    # 19 estimates 1..19: p2.5 at position 18 * 0.025 = 0.45, p97.5 at 17.55.
    assert one == stats.Interval(0.0, pytest.approx(1.45, rel=1e-12), pytest.approx(18.55, rel=1e-12), 0.95, 20)
    two = stats.bootstrap_ci(([1.0, 2.0],), counting_estimate({19, 20}, dropped_value), resamples=20)
    assert two == stats.Interval(0.0, None, None, 0.95, 20)


def test_all_resamples_defined_gives_the_tails_of_all() -> None:
    # 20 estimates 1..20: p2.5 at position 19 * 0.025 = 0.475, p97.5 at 18.525.
    interval = stats.bootstrap_ci(([1.0, 2.0], [3.0, 4.0]), counting_estimate(set()), resamples=20, confidence=0.95)
    assert interval == stats.Interval(0.0, pytest.approx(1.475, rel=1e-12), pytest.approx(19.525, rel=1e-12), 0.95, 20)


def test_an_undefined_point_gives_nothing_else() -> None:
    assert stats.bootstrap_ci(([1.0, 2.0],), counting_estimate({0}), resamples=20, confidence=0.9) == stats.Interval(
        None, None, None, 0.9, 0
    )


def test_ratio_of_a_zero_denominator_is_none() -> None:
    ratio = stats.ratio_of(stats.median)
    assert ratio([3.0, 1.0, 2.0], [4.0]) == 0.5
    assert ratio([3.0], [0.0, 0.0, 1.0]) is None
    assert ratio([0.0], [2.0]) == 0.0


def test_clean_keeps_finite_values_sorted() -> None:
    assert stats.clean([3.0, None, -1.0, math.nan, math.inf, 0.0, -math.inf, 2.5]) == [-1.0, 0.0, 2.5, 3.0]


def test_percentile_limits() -> None:
    assert stats.percentile([1.0, 2.0], 0.0) == 1.0
    assert stats.percentile([1.0, 2.0], 100.0) == 2.0
    for q in (-1e-9, 100.000001):
        with pytest.raises(ValueError, match=rf"^percentile {q} outside 0..100$"):
            stats.percentile([1.0, 2.0], q)
    with pytest.raises(ValueError, match="^percentile of no values$"):
        stats.percentile([], 50)


@pytest.mark.parametrize(
    ("q", "expected"),
    [(0, 10.0), (12.5, 15.0), (25, 20.0), (50, 30.0), (62.5, 40.0), (75, 50.0), (87.5, 65.0), (100, 80.0)],
)
def test_percentile_interpolates_between_closest_ranks(q: float, expected: float) -> None:
    assert stats.percentile([10.0, 20.0, 30.0, 50.0, 80.0], q) == expected


def test_median_sorts_its_values() -> None:
    assert stats.median([5.0, 1.0, 4.0, 2.0]) == 3.0
    assert stats.median([9.0]) == 9.0


def test_distribution_pinned_and_as_a_dict() -> None:
    summary = stats.distribution([10.0, None, 80.0, 30.0, math.nan, 50.0, 20.0])
    assert summary == stats.Distribution(count=5, p50=30.0, p90=68.0, p99=78.8, mean=38.0, minimum=10.0, maximum=80.0)
    assert summary.to_dict() == {"count": 5, "p50": 30.0, "p90": 68.0, "p99": 78.8, "mean": 38.0, "minimum": 10.0, "maximum": 80.0}
    assert stats.distribution([]) == stats.Distribution(count=0, p50=None, p90=None, p99=None, mean=None, minimum=None, maximum=None)


def test_interval_known_needs_both_bounds_and_its_dict() -> None:
    assert stats.Interval(1.0, 0.5, 1.5).known
    assert not stats.Interval(1.0, None, 1.5).known
    assert not stats.Interval(1.0, 0.5, None).known
    assert not stats.Interval(1.0).known
    assert stats.Interval(2.0).to_dict() == {"point": 2.0, "low": None, "high": None, "confidence": 0.95, "resamples": 0}
    assert stats.Interval(2.0, 1.0, 3.0, 0.9, 7).to_dict() == {"point": 2.0, "low": 1.0, "high": 3.0, "confidence": 0.9, "resamples": 7}


def test_format_interval() -> None:
    assert stats.format_interval(stats.Interval(2.4137, 2.2011, 2.6349, resamples=200)) == "2.41x (2.20-2.63)"
    assert stats.format_interval(stats.Interval(1.5)) == "1.50x (no CI)"
    assert stats.format_interval(stats.Interval(1.5, 1.0, None)) == "1.50x (no CI)"
    assert stats.format_interval(stats.Interval(None, 1.0, 2.0)) == "n/a"
    assert stats.format_interval(stats.Interval(0.0123, 0.0120, 0.0130), unit=" ms", scale=1000, digits=1) == "12.3 ms (12.0-13.0)"
    assert stats.format_interval(stats.Interval(0.0, 0.0, 0.0)) == "0.00x (0.00-0.00)"


def test_seed_for_is_the_crc32_of_the_parts_joined_by_unit_separators() -> None:
    assert stats.seed_for("qa", "spec", "TTFT") == 3055193083
    assert stats.seed_for("qa", "spec", "TTFT") == zlib.crc32(b"qa\x1fspec\x1fTTFT")
    assert stats.seed_for() == 0


def test_results_are_frozen() -> None:
    """A summary or an interval is a measured value: nothing downstream may change it in place."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.distribution([1.0]).count = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.Interval(1.0).low = 0.5  # type: ignore[misc]
