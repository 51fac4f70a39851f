"""specbench.analysis.theory: error messages in full, limits at the limit and one past, ties, and whole
results, where tests/test_stats.py's worked examples and properties let a mutant live (found by
`make mutation`). Free of hypothesis, so `make mutation` runs them first."""

from __future__ import annotations

import dataclasses

import pytest

from specbench.analysis import theory


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: theory.expected_tokens_per_step(1.01, 3), "a must be in 0..1, got 1.01"),
        (lambda: theory.expected_tokens_per_step(-0.01, 3), "a must be in 0..1, got -0.01"),
        (lambda: theory.expected_tokens_per_step(0.5, -1), "k must be >= 0, got -1"),
        (lambda: theory.expected_speedup(0.5, 3, -0.1), "c must be >= 0, got -0.1"),
        (lambda: theory.acceptance_from_tokens_per_step(1.5, 0), "k must be >= 1, got 0"),
    ],
)
def test_errors_name_the_argument_and_the_allowed_values(call, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        call()
    assert str(raised.value) == message


def test_limits_of_the_arguments_are_allowed() -> None:
    assert theory.expected_tokens_per_step(0.0, 0) == 1.0
    assert theory.expected_tokens_per_step(1.0, 0) == 1.0
    assert theory.expected_tokens_per_step(1.0, 1) == 2.0
    assert theory.expected_speedup(1.0, 1, 0.0) == 2.0
    assert theory.acceptance_from_tokens_per_step(2.0, 1) == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize(("a", "k", "expected"), [(0.5, 1, 1.5), (0.5, 3, 1.875), (0.25, 4, 1 + 0.25 + 0.0625 + 0.015625 + 0.00390625)])
def test_expected_tokens_pinned(a: float, k: int, expected: float) -> None:
    assert theory.expected_tokens_per_step(a, k) == expected  # exact in binary


def test_expected_speedup_pinned() -> None:
    assert theory.expected_speedup(0.5, 3, 0.5) == 1.875 / 2.5
    assert theory.expected_speedup(0.5, 1, 1.0) == 0.75


def test_best_k_ties_go_to_the_shorter_speculation() -> None:
    assert theory.best_k(0.0, 0.0) == (0, 1.0)  # every k gives 1.0
    assert theory.best_k(0.5, 0.5, k_max=0) == (0, 1.0)
    assert theory.best_k(1.0, 0.0, k_max=3) == (3, 4.0)
    assert theory.best_k(1.0, 0.0) == (15, 16.0)  # k_max defaults to 15


def test_acceptance_from_tokens_per_step_is_exact_for_k_1() -> None:
    """k = 1: E = 1 + a, so a = E - 1 to the bisection's precision (2^-60, an ulp or so)."""
    for tokens in (1.0, 1.25, 1.5, 1.9, 2.0):
        assert theory.acceptance_from_tokens_per_step(tokens, 1) == pytest.approx(tokens - 1.0, abs=1e-15)


def test_implied_cost_ratio_at_k_1() -> None:
    assert theory.implied_cost_ratio(2.0, 3.0, 1) == 0.5
    assert theory.implied_cost_ratio(1e-9, 3.0, 1) == pytest.approx(3e9 - 1.0)
    assert theory.implied_cost_ratio(1.5, 3.0, 2) == 0.5


def test_estimate_acceptance_whole_results() -> None:
    assert theory.estimate_acceptance({"per_position": [0.25]}, None) == theory.AcceptanceEstimate(0.25, "position-0")
    assert theory.estimate_acceptance({"per_position": [0.5], "mean_acceptance_length": 3.0}, 4) == theory.AcceptanceEstimate(
        0.5, "position-0"
    )
    assert theory.estimate_acceptance({"mean_acceptance_length": 1.5}, 1) == theory.AcceptanceEstimate(
        pytest.approx(0.5, abs=1e-15), "mean-acceptance-length"
    )
    # A rate beyond 0..1 is clipped: 1.0 at k = 2 means every draft accepted.
    assert theory.estimate_acceptance({"acceptance_rate": 1.7}, 2) == theory.AcceptanceEstimate(
        pytest.approx(1.0, abs=1e-15), "acceptance-rate"
    )
    assert theory.estimate_acceptance({"acceptance_rate": -0.2}, 2) == theory.AcceptanceEstimate(
        pytest.approx(0.0, abs=1e-15), "acceptance-rate"
    )
    assert theory.estimate_acceptance({"acceptance_rate": 0.5}, 1) == theory.AcceptanceEstimate(
        pytest.approx(0.5, abs=1e-15), "acceptance-rate"
    )
    assert theory.estimate_acceptance({"per_position": [0.5]}, 3).to_dict() == {"a": 0.5, "source": "position-0"}
    assert theory.estimate_acceptance({"acceptance_rate": None}, 3).to_dict() == {"a": None, "source": "missing"}


def test_bisection_runs_60_halvings_of_zero_to_one() -> None:
    """No acceptance (E = 1) comes back as the midpoint of the last interval [0, 2^-60]: the
    precision the comment promises, neither a halving more nor one spent on a wider start."""
    for k in (1, 4, 15):
        assert theory.acceptance_from_tokens_per_step(1.0, k) == 2.0**-61
        assert theory.acceptance_from_tokens_per_step(0.5, k) == 2.0**-61


def test_estimate_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        theory.AcceptanceEstimate(0.5, "position-0").a = 0.6  # type: ignore[misc]
