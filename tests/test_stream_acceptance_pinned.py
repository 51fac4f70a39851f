"""Exact values of specbench/analysis/stream_acceptance.py, the first stage of its mutation run
(issue 24, scripts/mutation.toml): every figure, reason and key pinned on requests whose acceptance
lengths are known (1 to 5 tokens per decode chunk), the bootstrap decided by its known seed."""

from __future__ import annotations

import dataclasses

import pytest
from test_stream_acceptance import record

from specbench.analysis import acceptance
from specbench.analysis import stream_acceptance as sa

K = 4
# Five requests streaming 1, 2, 3, 4 and 5 tokens per decode chunk (prefill and last chunk 1).
LENGTHS = [1, 2, 3, 4, 5]
RESAMPLES = 50


def spec_records():
    return [record([1, n, n, n, 1], index=i) for i, n in enumerate(LENGTHS)]


def base_records():
    return [record([1, 1, 1, 1], variant="base")]


# The seed-0 bootstrap of the mean of 1..5 with 50 resamples (stats.bootstrap_ci, percentile).
SEED0_LENGTH = (3.0, 2.045, 4.0)
SEED0_RATE = (0.5, 0.26125, 0.75)  # (L - 1) / 4, the length's bounds mapped


def test_the_sources_are_named_as_the_metrics_figures_name_theirs():
    # The /metrics figures say "counters" or "gauges" (or "missing"); both kinds are the "metrics" source.
    assert (sa.SOURCE_STREAM, sa.SOURCE_METRICS) == ("stream", "metrics")
    assert acceptance.SOURCE_MISSING == "missing"


def test_the_figures_are_immutable_and_a_class_without_a_histogram_has_an_empty_one():
    figures = sa.per_request(record([1, 3, 3, 1]), K)
    with pytest.raises(dataclasses.FrozenInstanceError):
        figures.length = 9.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        sa.Reliability(True).ok = False  # type: ignore[misc]
    pooled = sa.ClassAcceptance(sa.SOURCE_STREAM, 0, sa.stats.Interval(None), sa.stats.Interval(None))
    with pytest.raises(dataclasses.FrozenInstanceError):
        pooled.requests = 1  # type: ignore[misc]
    assert pooled.histogram == {} and pooled.to_dict()["histogram"] == {}


def test_every_reason_of_the_self_check_word_for_word():
    assert sa.self_check([], spec_records(), K) == sa.Reliability(
        False, "unavailable: the baseline has no successful request: nothing to check the stream against"
    )
    assert sa.self_check(base_records(), [record([1, 2])], K) == sa.Reliability(
        False, "unavailable: the speculative service has no request with 3+ content chunks and usage-counted tokens"
    )
    assert sa.self_check(base_records(), spec_records(), None) == sa.Reliability(
        False, "k (num_speculative_tokens) of the speculative service is unknown: k + 1 cannot be checked"
    )
    assert sa.self_check(base_records(), spec_records(), 0).reason.startswith("k (num_speculative_tokens)")
    assert sa.self_check(base_records(), spec_records(), K) == sa.Reliability(True, "")
    # At exactly k + 1 tokens in a chunk the stream still passes; one more and it does not.
    assert sa.self_check(base_records(), [record([1, 5, 5, 1])], K).ok
    assert not sa.self_check(base_records(), [record([1, 6, 5, 1])], K).ok


def test_pooled_with_the_default_seed_is_seed_zero():
    length, rate = sa.pooled(spec_records(), K, resamples=RESAMPLES)
    assert (length.point, length.low, length.high) == pytest.approx(SEED0_LENGTH)
    assert (rate.point, rate.low, rate.high) == pytest.approx(SEED0_RATE)
    assert (length.resamples, rate.resamples, rate.confidence) == (RESAMPLES, RESAMPLES, 0.95)
    other, _ = sa.pooled(spec_records(), K, seed=1, resamples=RESAMPLES)
    assert (other.low, other.high) == pytest.approx((1.6, 4.2))  # another seed, other bounds: the seed matters
    unknown_k_length, unknown_k_rate = sa.pooled(spec_records(), None, resamples=RESAMPLES)
    assert unknown_k_length.point == 3.0 and unknown_k_rate == sa.stats.Interval(None, confidence=0.95)


def test_by_class_seeds_each_class_from_the_default_seed():
    classes = sa.by_class(spec_records(), K, resamples=RESAMPLES)
    math_class = classes["math"]
    assert (math_class.source, math_class.requests) == ("stream", 5)
    assert (math_class.mean_acceptance_length.low, math_class.mean_acceptance_length.high) == pytest.approx((2.0, 4.355))
    assert (math_class.acceptance_rate.low, math_class.acceptance_rate.high) == pytest.approx((0.25, 0.83875))
    assert math_class.histogram == {"1": 1, "2": 1, "3": 1, "4": 1, "5": 1}
    reseeded = sa.by_class(spec_records(), K, seed=1, resamples=RESAMPLES)["math"].mean_acceptance_length
    assert (reseeded.low, reseeded.high) == pytest.approx((1.49, 4.51))


def test_the_figure_of_a_service_key_by_key():
    figure = sa.figure(base_records(), spec_records(), K, resamples=RESAMPLES)
    assert figure == {
        "source": "stream",
        "reliable": True,
        "reason": "",
        "requests": 5,
        "mean_acceptance_length": 3.0,
        "acceptance_rate": 0.5,
        "mean_acceptance_length_ci": {
            "point": 3.0,
            "low": pytest.approx(SEED0_LENGTH[1]),
            "high": 4.0,
            "confidence": 0.95,
            "resamples": RESAMPLES,
        },
        "acceptance_rate_ci": {"point": 0.5, "low": pytest.approx(SEED0_RATE[1]), "high": 0.75, "confidence": 0.95, "resamples": RESAMPLES},
        "histogram": {"1": 1, "2": 1, "3": 1, "4": 1, "5": 1},
    }
    unreliable = sa.figure([], spec_records(), K, resamples=RESAMPLES)
    assert unreliable["reliable"] is False and unreliable["reason"].startswith("unavailable: the baseline has no successful request")


def test_cross_check_leaves_out_missing_metrics():
    stream = {"source": "stream", "mean_acceptance_length": 3.0, "acceptance_rate": 0.5}
    measured = {"source": "counters", "mean_acceptance_length": 2.5, "acceptance_rate": 0.375}
    both = sa.cross_check(stream, measured)
    assert (both["mean_acceptance_length_difference"], both["acceptance_rate_difference"]) == (0.5, 0.125)
    assert both["stream"] == stream and both["metrics"] == measured
    missing = sa.cross_check(stream, {"source": "missing", "mean_acceptance_length": 2.5, "acceptance_rate": 0.375})
    assert (missing["mean_acceptance_length_difference"], missing["acceptance_rate_difference"]) == (None, None)
    assert sa.cross_check(stream, {"mean_acceptance_length": 2.5})["mean_acceptance_length_difference"] is None  # no source
    assert sa.cross_check(None, None) == {
        "stream": None,
        "metrics": None,
        "mean_acceptance_length_difference": None,
        "acceptance_rate_difference": None,
    }
