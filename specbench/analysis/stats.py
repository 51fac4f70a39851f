"""Exact statistics of a run's raw values: percentiles, and bootstrap confidence intervals of a
ratio of two groups' statistics (the speedup).

Standard library only: the aggregation Lambda ships this module with nothing but the runtime.

Percentiles interpolate linearly between closest ranks (numpy's default, Hyndman-Fan type 7), so
p50 of an even count is the mean of the middle two and p99 of 8 values lies between the two
largest. CloudWatch's own percentiles of the same values are approximations and may differ a little.

The bootstrap resamples each group independently with replacement (requests of the two services are
not paired), recomputes the statistic of each and their ratio, and reports the percentile interval.
It is seeded, so the same values always give the same interval (the dashboard is idempotent).
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

Statistic = Callable[[Sequence[float]], float]


def clean(values: Sequence[float | None]) -> list[float]:
    """The finite values, sorted: None (a metric a request could not have) and NaN/inf are dropped."""
    return sorted(v for v in values if v is not None and math.isfinite(v))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of values sorted ascending, by linear interpolation."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} outside 0..100")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def median(values: Sequence[float]) -> float:
    return percentile(sorted(values), 50.0)


@dataclass(frozen=True)
class Distribution:
    """Summary of one metric's values; every figure is None when there are no values."""

    count: int
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None
    minimum: float | None = None
    maximum: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def distribution(values: Sequence[float | None]) -> Distribution:
    ordered = clean(values)
    if not ordered:
        return Distribution(0)
    return Distribution(
        count=len(ordered),
        p50=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p99=percentile(ordered, 99),
        mean=math.fsum(ordered) / len(ordered),
        minimum=ordered[0],
        maximum=ordered[-1],
    )


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap confidence interval; low/high are None when it cannot be
    estimated (fewer than two values in a group, or a statistic of zero in too many resamples)."""

    point: float | None
    low: float | None = None
    high: float | None = None
    confidence: float = 0.95
    resamples: int = 0

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_interval(interval: Interval, unit: str = "x", scale: float = 1.0, digits: int = 2) -> str:
    """``2.41x (2.20-2.63)``; ``(no CI)`` when the interval is unknown; ``n/a`` when not measured."""
    if interval.point is None:
        return "n/a"
    text = f"{interval.point * scale:.{digits}f}{unit}"
    if not interval.known:
        return text + " (no CI)"
    assert interval.low is not None and interval.high is not None
    return f"{text} ({interval.low * scale:.{digits}f}-{interval.high * scale:.{digits}f})"


def seed_for(*parts: str) -> int:
    """A stable seed from names (Python's hash() changes per process)."""
    return zlib.crc32("\x1f".join(parts).encode("utf-8"))


def bootstrap_ci(
    groups: Sequence[Sequence[float]],
    estimate: Callable[..., float | None],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap of ``estimate(*groups)``: each group resampled independently.

    ``estimate`` returns None where it is undefined (a zero denominator); those resamples are
    dropped, and if more than 1 in 20 of them are, no interval is given."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} outside (0, 1)")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    point = estimate(*groups) if all(groups) else None
    if point is None or any(len(group) < 2 for group in groups):
        return Interval(point, confidence=confidence)
    # The draws of random.Random(seed).choices(group, k=len(group)), each group in turn, written out:
    # CPython's Random.choices without weights returns [population[floor(random() * n)] for i in
    # _repeat(None, k)] with n = float(len(population)) (Lib/random.py, the same in 3.10 to 3.13), so
    # the intervals are unchanged; without its call per group a resample costs about a third less.
    draw = random.Random(seed).random
    floor = math.floor
    shapes = [(group, float(len(group)), range(len(group))) for group in groups]
    estimates = []
    for _ in range(resamples):
        value = estimate(*[[group[floor(draw() * n)] for _ in times] for group, n, times in shapes])
        if value is not None and math.isfinite(value):
            estimates.append(value)
    if len(estimates) < 0.95 * resamples:
        return Interval(point, confidence=confidence, resamples=resamples)
    estimates.sort()
    tail = (1.0 - confidence) / 2.0 * 100.0
    return Interval(point, percentile(estimates, tail), percentile(estimates, 100.0 - tail), confidence, resamples)


def ratio_of(statistic: Statistic) -> Callable[[Sequence[float], Sequence[float]], float | None]:
    """statistic(numerator) / statistic(denominator), None when the denominator's statistic is 0."""

    def ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float | None:
        below = statistic(denominator)
        return None if below == 0 else statistic(numerator) / below

    return ratio


def speedup(baseline: Sequence[float | None], speculative: Sequence[float | None], **options: Any) -> Interval:
    """How many times faster the speculative service is on a latency: median(baseline) / median(speculative),
    with its bootstrap confidence interval."""
    return bootstrap_ci((clean(baseline), clean(speculative)), ratio_of(median), **options)


def median_ci(values: Sequence[float | None], **options: Any) -> Interval:
    """The median with its bootstrap confidence interval (the report's error bars)."""
    return bootstrap_ci((clean(values),), median, **options)


def json_safe(value: Any) -> Any:
    """asdict output made JSON-safe: a non-finite float (an interval with no data) becomes None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
