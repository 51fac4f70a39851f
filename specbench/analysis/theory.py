"""The standard model of speculative decoding (Leviathan et al. 2023), to say what speedup a
measured acceptance should give, and so whether a measured speedup falls short of it.

With per-token acceptance probability a, k drafted tokens per step and a draft step costing c
target steps: expected tokens per target step E = (1 - a^(k+1)) / (1 - a), expected speedup
S = E / (k*c + 1). Speedup needs a > c.

vLLM's "acceptance rate" (accepted / drafted tokens) is not a: under the model it equals
(E - 1) / k. The acceptance of draft position 0 estimates a directly; failing that, a is solved
from the mean acceptance length (E) or from the rate. Standard library only (the Lambda ships it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


def expected_tokens_per_step(a: float, k: int) -> float:
    """E(a, k): tokens a target step yields, the bonus token included (1 at a=0, k+1 at a=1)."""
    _check_unit("a", a)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    # The series 1 + a + ... + a^k by Horner's rule: the closed form divides two roundings near a = 1.
    total = 1.0
    for _ in range(k):
        total = 1.0 + a * total
    return total


def expected_speedup(a: float, k: int, c: float) -> float:
    """S(a, k, c) = E / (k*c + 1): target-step time saved per token, against plain decoding."""
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c}")
    return expected_tokens_per_step(a, k) / (k * c + 1.0)


def best_k(a: float, c: float, k_max: int = 15) -> tuple[int, float]:
    """The speculation length in 0..k_max with the highest expected speedup (no closed form)."""
    return max(((k, expected_speedup(a, k, c)) for k in range(k_max + 1)), key=lambda pair: (pair[1], -pair[0]))


def acceptance_from_tokens_per_step(tokens_per_step: float, k: int) -> float:
    """The a whose E(a, k) equals a measured mean acceptance length (bisection: E rises with a)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    target = min(max(tokens_per_step, 1.0), k + 1.0)
    low, high = 0.0, 1.0
    for _ in range(60):  # 2^-60: far below any measurement's precision
        middle = (low + high) / 2.0
        if expected_tokens_per_step(middle, k) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def implied_cost_ratio(measured_speedup: float, tokens_per_step: float, k: int) -> float | None:
    """The c that makes the model reproduce a measured speedup: c = (E / S - 1) / k. It lumps every
    overhead of a speculative step (draft, verification, sampling) into one figure. None when no
    c >= 0 can: the measured speedup exceeds E, so the acceptance estimate is too low."""
    if measured_speedup <= 0 or k < 1:
        return None
    c = (tokens_per_step / measured_speedup - 1.0) / k
    return c if c >= 0 else None


@dataclass(frozen=True)
class AcceptanceEstimate:
    a: float | None
    source: str  # "position-0" | "mean-acceptance-length" | "acceptance-rate" | "missing"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_acceptance(figures: Mapping[str, Any] | None, k: int | None) -> AcceptanceEstimate:
    """Estimate a from an endpoint's acceptance figures (specbench.analysis.acceptance.Acceptance.to_dict())."""
    if not figures:
        return AcceptanceEstimate(None, "missing")
    per_position = figures.get("per_position")
    if per_position:
        return AcceptanceEstimate(_clip(per_position[0]), "position-0")
    if not k:
        return AcceptanceEstimate(None, "missing")
    length = figures.get("mean_acceptance_length")
    if length is not None:
        return AcceptanceEstimate(acceptance_from_tokens_per_step(length, k), "mean-acceptance-length")
    rate = figures.get("acceptance_rate")
    if rate is not None:
        return AcceptanceEstimate(acceptance_from_tokens_per_step(1.0 + _clip(rate) * k, k), "acceptance-rate")
    return AcceptanceEstimate(None, "missing")


def _clip(value: float) -> float:
    return min(max(float(value), 0.0), 1.0)


def _check_unit(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in 0..1, got {value}")
