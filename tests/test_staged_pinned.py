"""Exact values of specbench/sweep/staged.py, the first stage of its mutation run (issue 24,
scripts/mutation.toml): the mix objective, the fit of c on synthetic points of known a and c, the stop
rule on a decided and an undecided case, the next stage's points, stage 1 and the stages' node-hours.

The synthetic draft: a = 0.6 per token, c = 0.1, so S(k) = E(0.6, k) / (0.1 k + 1) is 1.4545, 1.6333,
1.6738, 1.6469, 1.5889 for k = 1..5: the optimum is k = 3."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from specbench.analysis import theory
from specbench.sweep import staged
from specbench.sweep.plan import Estimates, Unit
from specbench.sweep.points import SweepVariant

D, OTHER = "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"
A, C = 0.6, 0.1
SPEED = staged.Objective({"qa": 1.0})


def cfg(k: int, draft: str = D) -> staged.Config:
    return staged.Config(draft, k, "draft")


def exact(k: int, se: float = 0.0, a: float = A, c: float = C, a_se: float = 0.0, **extra) -> dict[str, staged.ClassMeasure]:
    return {"qa": staged.ClassMeasure(theory.expected_speedup(a, k, c), se, a, a_se, **extra)}


def obs(measured, load: str = "c1", base: staged.BaseClass | None = None) -> staged.Observations:
    return staged.Observations({load: {"qa": base or staged.BaseClass(100.0, 0.05, 0.2)}}, {load: measured})


def test_the_constants():
    assert (staged.GRID, staged.STAGED, staged.STRATEGIES, staged.SPEEDUP, staged.COST) == (
        "grid",
        "staged",
        ("grid", "staged"),
        "speedup",
        "cost",
    )
    assert (staged.Z, staged.RESAMPLES, staged.ONE_SIDED) == (1.959964, 400, 0.05)
    assert staged.DEFAULT_ESTIMATES == Estimates(120.0, 15.0, 15.0)


def test_a_config_is_the_baseline_without_a_draft_and_sorts_by_draft_then_k():
    assert staged.BASELINE == staged.Config("", 0, "") and staged.BASELINE.is_baseline and staged.BASELINE.label == "baseline"
    assert not cfg(4).is_baseline and cfg(4).label == "Qwen/Qwen3-1.7B k=4"
    assert sorted([cfg(5), cfg(3, OTHER), staged.BASELINE, cfg(2)]) == [staged.BASELINE, cfg(3, OTHER), cfg(2), cfg(5)]
    observations = staged.Observations({}, {"c1": {cfg(1): {}}, "c4": {cfg(2): {}, cfg(1): {}}})
    assert observations.configs() == {staged.BASELINE, cfg(1), cfg(2)}


def test_the_values_are_immutable_and_their_defaults_are_unknowns():
    measure = staged.ClassMeasure(1.5, 0.1)
    assert (measure.a, measure.a_se, measure.tpot_s, measure.ttft_s) == (None, 0.0, None, None)
    assert (staged.BaseClass(100.0).tpot_s, staged.BaseClass(100.0).ttft_s) == (None, None)
    assert staged.Objective({"qa": 1.0}).price_per_node_hour is None
    assert (staged.Objective({}).slo_tpot_s, staged.Objective({}).slo_ttft_s) == (None, None)
    estimate = staged.Estimate(cfg(2), False, None, None, None)
    assert estimate.feasible is True and estimate.per_class == {}
    decision = staged.Decision("c1", None, None, (), (), {}, {})
    fit = staged.DraftFit(D, "c1", {}, 0.1, 0.0)
    cost = staged.StagedCost(1.0, 2.0, 3.0, 4.0)
    result = staged.StagedResult([], {}, {}, staged.Observations({}, {}), 0.0)
    values = [
        cfg(1),
        measure,
        staged.BaseClass(1.0),
        staged.Observations({}, {}),
        staged.Objective({}),
        fit,
        estimate,
        decision,
        cost,
        result,
    ]
    for value in values:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, None)
    assert result.measured == {staged.BASELINE} and not decision.made


def test_the_speedup_objective_is_the_mix_weighted_speedup():
    objective = staged.Objective({"code": 3.0, "qa": 1.0, "chat": 0.0, "x": -1.0})
    assert objective.kind == "speedup"
    assert objective.normalised() == {"code": 0.75, "qa": 0.25}
    assert objective.value({"code": 2.0, "qa": 1.2, "chat": -5.0}, {}) == pytest.approx(1.8, rel=1e-15)
    assert objective.value({"code": 2.0}, {}) is None  # a weighted class without a figure
    assert objective.value({"code": 2.0, "qa": 0.0}, {}) is None
    assert objective.value({"code": 2.0, "qa": math.nan}, {}) is None
    assert objective.display(1.8) == "1.800x" and objective.display(None) == "n/a"
    assert staged.Objective({"qa": 1.0}, price_per_node_hour=0.0).kind == "speedup"


def test_the_cost_objective_is_minus_the_mix_weighted_cost_per_million_tokens():
    objective = staged.Objective({"code": 1.0, "qa": 1.0}, price_per_node_hour=36.0)
    assert objective.kind == "cost"
    base = {"code": staged.BaseClass(20.0), "qa": staged.BaseClass(40.0)}
    # $36/h is 1 cent a second: code at 20 x 2 = 40 tokens/s is $250 per million, qa at 40 x 1.25 = 50 is $200.
    assert objective.value({"code": 2.0, "qa": 1.25}, base) == pytest.approx(-225.0, rel=1e-15)
    assert objective.display(-225.0) == "$225.00/M tokens"
    assert objective.value({"code": 2.0, "qa": 1.25}, {"code": staged.BaseClass(20.0)}) is None  # qa: no baseline
    assert objective.value({"code": 2.0, "qa": 1.25}, {**base, "qa": staged.BaseClass(None)}) is None
    assert objective.value({"code": 2.0, "qa": 1.25}, {**base, "qa": staged.BaseClass(0.0)}) is None
    assert objective.value({"code": 2.0, "qa": 1.25}, {**base, "qa": staged.BaseClass(-4.0)}) is None  # no cost
    assert objective.value({"code": 2.0, "qa": 1.25}, {**base, "qa": staged.BaseClass(math.inf)}) is None


def test_acceptance_is_pooled_by_inverse_variance_over_every_point_of_the_draft():
    measured = {
        "c1": {cfg(2): {"qa": staged.ClassMeasure(1.5, 0.1, 0.8, 0.01)}, cfg(3, OTHER): {"qa": staged.ClassMeasure(1.1, 0.1, 0.2, 0.01)}},
        "c4": {
            cfg(4): {"qa": staged.ClassMeasure(1.4, 0.1, 0.7, 0.02), "code": staged.ClassMeasure(2.0, 0.1, 0.9, 0.0)},
            staged.BASELINE: {"qa": staged.ClassMeasure(1.0, 0.0)},  # no acceptance: left out
        },
        "c8": {cfg(6): {"chat": staged.ClassMeasure(1.2, 0.1), "json": staged.ClassMeasure(1.3, 0.1, 0.5, 0.1)}},
    }
    pooled = staged.pooled_acceptance(staged.Observations({}, measured), D)
    # Weights 1/0.01^2 = 10000 and 1/0.02^2 = 2500: (8000 + 1750) / 12500 = 0.78.
    assert pooled["qa"] == pytest.approx((0.78, 1 / math.sqrt(12500)), rel=1e-12)
    # A standard error of 0 counts as 1e-4 (weight 1e8), not as an infinite weight.
    assert pooled["code"] == pytest.approx((0.9, 1e-4), rel=1e-12)
    assert set(pooled) == {"qa", "code", "json"} and pooled["json"] == pytest.approx((0.5, 0.1), rel=1e-12)
    other = staged.pooled_acceptance(staged.Observations({}, measured), OTHER)
    assert set(other) == {"qa"} and other["qa"] == pytest.approx((0.2, 0.01), rel=1e-12)
    assert staged.pooled_acceptance(staged.Observations({}, measured), "none") == {}


def test_fit_c_recovers_the_draft_cost_of_exact_points():
    rows = [("qa", k, theory.expected_speedup(A, k, C)) for k in (1, 3, 6)]
    assert staged.fit_c({"qa": A}, rows) == pytest.approx(C, rel=1e-12)
    # Least squares of E/S - 1 = k c: residuals 0.2 at k = 1 and 0.2 at k = 2 give (0.2 + 0.4) / 5.
    noisy = [("qa", 1, theory.expected_tokens_per_step(A, 1) / 1.2), ("qa", 2, theory.expected_tokens_per_step(A, 2) / 1.2)]
    assert staged.fit_c({"qa": A}, noisy) == pytest.approx(0.12, rel=1e-12)
    # Rows of an unknown class, k = 0 or no speedup are skipped; none left: no fit.
    skipped = [("code", 2, 1.5), ("qa", 0, 1.0), ("qa", 2, 0.0), ("qa", 2, math.nan)]
    assert staged.fit_c({"qa": A}, skipped + rows) == pytest.approx(C, rel=1e-12)
    assert staged.fit_c({"qa": A}, skipped) is None
    assert staged.fit_c({"qa": A}, []) is None
    # Faster than E allows: c cannot be negative.
    assert staged.fit_c({"qa": A}, [("qa", 2, theory.expected_tokens_per_step(A, 2) * 1.1)]) == 0.0


def test_fit_draft_pools_a_fits_c_at_the_load_and_measures_the_unexplained_residual():
    exact_points = {cfg(k): exact(k, se=0.01, a_se=0.01) for k in (1, 3)}
    fit = staged.fit_draft(obs(exact_points), D, "c1")
    assert (fit.draft, fit.load) == (D, "c1")
    assert fit.c == pytest.approx(C, rel=1e-12)
    assert fit.a["qa"] == pytest.approx((A, 0.01 / math.sqrt(2)), rel=1e-12)
    assert fit.residual == 0.0  # the points' noise (1%) explains more than the (zero) misfit
    # The same points 10% off in opposite directions, with a standard error of 1%:
    off = {cfg(1): exact(1, se=0.0), cfg(2): exact(2, se=0.0)}
    s1, s2 = theory.expected_speedup(A, 1, C) * 1.1, theory.expected_speedup(A, 2, C) * 0.9
    off = {cfg(1): {"qa": staged.ClassMeasure(s1, s1 * 0.01, A, 0.01)}, cfg(2): {"qa": staged.ClassMeasure(s2, s2 * 0.01, A, 0.01)}}
    fit = staged.fit_draft(obs(off), D, "c1")
    e1, e2 = theory.expected_tokens_per_step(A, 1), theory.expected_tokens_per_step(A, 2)
    c = (1 * (e1 / s1 - 1) + 2 * (e2 / s2 - 1)) / 5
    assert fit.c == pytest.approx(c, rel=1e-12)
    r1, r2 = (s1 - theory.expected_speedup(A, 1, c)) / s1, (s2 - theory.expected_speedup(A, 2, c)) / s2
    assert fit.residual == pytest.approx(math.sqrt((r1**2 - 0.01**2 + r2**2 - 0.01**2) / 2), rel=1e-9)
    # Points below 1 count; a class without acceptance and a speedup of 0 do not.
    slow = {cfg(1): {"qa": staged.ClassMeasure(0.9, 0.0, A, 0.01), "chat": staged.ClassMeasure(1.1, 0.0)}}
    slow[cfg(2)] = {"qa": staged.ClassMeasure(0.95, 0.0, A, 0.01)}
    slow[cfg(3)] = {"qa": staged.ClassMeasure(0.0, 0.0, A, 0.01)}
    fit = staged.fit_draft(obs(slow), D, "c1")
    e1, e2 = theory.expected_tokens_per_step(A, 1), theory.expected_tokens_per_step(A, 2)
    c = (1 * (e1 / 0.9 - 1) + 2 * (e2 / 0.95 - 1)) / 5
    assert fit.c == pytest.approx(c, rel=1e-12)
    r1, r2 = (0.9 - theory.expected_speedup(A, 1, c)) / 0.9, (0.95 - theory.expected_speedup(A, 2, c)) / 0.95
    assert fit.residual == pytest.approx(math.sqrt((r1**2 + r2**2) / 2), rel=1e-9) and fit.residual > 0.01
    assert staged.fit_draft(obs(off), D, "c9") is None  # nothing measured at that load
    assert staged.fit_draft(obs(off), OTHER, "c1") is None
    assert staged.predict(fit, 3) == pytest.approx({"qa": theory.expected_speedup(A, 3, c)}, rel=1e-12)


def test_percentiles_interpolate_between_ranks():
    assert staged._percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert staged._percentile([4.0, 1.0, 3.0, 2.0], 0.0) == 1.0
    assert staged._percentile([4.0, 1.0, 3.0, 2.0], 1.0) == 4.0
    assert staged._percentile([float(v) for v in range(21)], 0.05) == pytest.approx(1.0)
    assert staged._percentile([float(v) for v in range(21)], 0.025) == pytest.approx(0.5)
    assert staged._percentile([7.0], 0.3) == 7.0
    assert staged._percentile([4.0, 1.0, 3.0, 2.0], 0.9) == pytest.approx(3.7)


def test_feasibility_reads_the_measured_medians_or_scales_the_baselines():
    objective = staged.Objective({"qa": 1.0}, slo_tpot_s=0.04, slo_ttft_s=0.2)
    base = {"qa": staged.BaseClass(100.0, 0.06, 0.2)}
    # Predicted: the baseline's 60 ms TPOT over the speedup; TTFT the baseline's (0.2 s, the limit itself).
    assert staged._feasible(objective, {"qa": 1.5}, base, {})  # 40 ms: at the limit
    assert not staged._feasible(objective, {"qa": 1.49}, base, {})
    assert not staged._feasible(objective, {"qa": 2.0}, {"qa": staged.BaseClass(100.0, 0.06, 0.21)}, {})
    # Measured medians win over the scaled baseline.
    measures = {"qa": staged.ClassMeasure(1.0, 0.0, tpot_s=0.05, ttft_s=0.1)}
    assert not staged._feasible(objective, {"qa": 3.0}, base, measures)
    assert staged._feasible(objective, {"qa": 1.0}, base, {"qa": staged.ClassMeasure(1.0, 0.0, tpot_s=0.04, ttft_s=0.2)})
    assert not staged._feasible(objective, {"qa": 3.0}, base, {"qa": staged.ClassMeasure(1.0, 0.0, tpot_s=0.01, ttft_s=0.3)})
    # Nothing to compare: feasible (no baseline TPOT, no speedup, or no limits).
    assert staged._feasible(objective, {"qa": 1.0}, {"qa": staged.BaseClass(100.0, None, None)}, {})
    assert staged._feasible(objective, {}, base, {})
    assert staged._feasible(staged.Objective({"qa": 1.0}), {"qa": 0.1}, base, {})
    assert staged._feasible(objective, {"qa": 1.5}, {}, {})


# --- the stop rule -------------------------------------------------------------------------------

CANDIDATES = [cfg(k) for k in range(1, 6)]


def test_a_decided_case_stops_with_every_other_k_ruled_out():
    # k = 2, 3, 4 measured exactly (standard error 0.001): 3 is best, 1 and 5 are predicted below.
    measured = {cfg(k): exact(k, se=0.001, a_se=0.001) for k in (2, 3, 4)}
    d = staged.decide(obs(measured), CANDIDATES, SPEED, "c1")
    assert d.made and d.load == "c1"
    assert d.best == cfg(3) and d.best_value == pytest.approx(theory.expected_speedup(A, 3, C), rel=1e-12)
    assert d.ties == () and d.undecided == ()
    assert set(d.ruled_out) == {staged.BASELINE, cfg(1), cfg(5)} - {staged.BASELINE}
    pattern = r"predicted {}x \[1\.\d{{3}}x - 1\.\d{{3}}x\]: below the best measured 1\.674x, difference CI above 0"
    assert re.fullmatch(pattern.format("1.455"), d.ruled_out[cfg(1)]), d.ruled_out[cfg(1)]
    assert re.fullmatch(pattern.format("1.589"), d.ruled_out[cfg(5)]), d.ruled_out[cfg(5)]
    # Every estimate: measured ones at their measured point, the others at the model's.
    assert [d.estimates[c].measured for c in [staged.BASELINE, *CANDIDATES]] == [True, False, True, True, True, False]
    assert d.estimates[staged.BASELINE].point == 1.0 and d.estimates[staged.BASELINE].per_class == {"qa": 1.0}
    assert d.estimates[cfg(5)].point == pytest.approx(theory.expected_speedup(A, 5, C), rel=1e-9)
    assert d.estimates[cfg(5)].per_class == pytest.approx({"qa": theory.expected_speedup(A, 5, C)}, rel=1e-9)
    # One-sided 90% bounds of the replicates, within a hair of the exact points.
    low, high = d.estimates[cfg(5)].low, d.estimates[cfg(5)].high
    assert low < d.estimates[cfg(5)].point < high and high - low < 0.005
    assert d.estimates[cfg(3)].low < d.best_value < d.estimates[cfg(3)].high
    assert all(e.feasible for e in d.estimates.values())


def test_an_undecided_case_asks_for_the_predicted_optimum_and_its_neighbours():
    # Stage 1: k = 1 only, noisy: the model predicts k = 3 best, but cannot rule out its neighbours.
    d = staged.decide(obs({cfg(1): exact(1, se=0.05, a_se=0.05)}), CANDIDATES, SPEED, "c1")
    assert not d.made and d.best == cfg(1)
    assert d.undecided == (cfg(2), cfg(3), cfg(4), cfg(5))
    assert d.ruled_out == {}
    assert d.estimates[cfg(3)].point == pytest.approx(theory.expected_speedup(A, 3, C), rel=1e-9)
    assert staged.next_stage([d], 3) == [cfg(3), cfg(2), cfg(4)]
    assert staged.next_stage([d], 5) == [cfg(3), cfg(2), cfg(4), cfg(5)]
    assert staged.next_stage([d], 0) == [cfg(3)]  # at least one
    # The same stage with the draft's points made exact: k = 2, 4, 5 are then ruled out... but 3 and 2
    # are close (1.674 against 1.633), so with noise 0.05 they stay open.


def test_the_bootstrap_defaults_are_its_seed_0_and_400_resamples():
    observations = obs({cfg(1): exact(1, se=0.05, a_se=0.05), cfg(4): exact(4, se=0.05, a_se=0.05)})
    default = staged.decide(observations, CANDIDATES, SPEED, "c1")
    assert default == staged.decide(observations, CANDIDATES, SPEED, "c1", resamples=400, seed=0, margin=0.0)
    assert default.estimates[cfg(3)] != staged.decide(observations, CANDIDATES, SPEED, "c1", seed=1).estimates[cfg(3)]
    assert default.estimates[cfg(3)] != staged.decide(observations, CANDIDATES, SPEED, "c1", resamples=401).estimates[cfg(3)]
    # Fewer than 10 replicates give no bounds; 10 do.
    nine = staged.decide(observations, CANDIDATES, SPEED, "c1", resamples=9)
    assert (nine.estimates[cfg(3)].low, nine.estimates[cfg(3)].high) == (None, None)
    assert nine.undecided == (cfg(2), cfg(3), cfg(5))  # no bound: not ruled out
    ten = staged.decide(observations, CANDIDATES, SPEED, "c1", resamples=10)
    assert ten.estimates[cfg(3)].low is not None and ten.estimates[cfg(3)].high is not None


def test_measured_points_within_noise_are_ties_and_clear_losers_are_not():
    # k = 3 and 4 differ by 0.027 with standard errors of 0.05: tied; k = 1 is 0.22 below at 0.001.
    measured = {cfg(3): exact(3, se=0.05), cfg(4): exact(4, se=0.05), cfg(1): exact(1, se=0.001)}
    d = staged.decide(obs(measured), [cfg(1), cfg(3), cfg(4)], SPEED, "c1")
    assert d.best == cfg(3) and d.ties == (cfg(4),) and d.made
    # Equal points: the baseline first, then the shorter k.
    same = {cfg(2): exact(3, se=0.0), cfg(5): exact(3, se=0.0)}
    d = staged.decide(obs(same), [cfg(2), cfg(5)], SPEED, "c1", resamples=20)
    assert d.best == cfg(2) and d.ties == (cfg(5),)  # identical replicates: a difference of 0 is a tie
    even = {cfg(2): {"qa": staged.ClassMeasure(1.0, 0.0, A, 0.0)}}
    d = staged.decide(obs(even), [cfg(2)], SPEED, "c1", resamples=20)
    assert d.best == staged.BASELINE and d.ties == (cfg(2),)


def test_the_margin_rules_out_a_candidate_that_could_win_by_less():
    # k = 2 and 4 measured exactly; 3 is predicted 0.027 (1.6%) above the best measured k = 4.
    measured = {cfg(2): exact(2, se=0.0, a_se=0.0), cfg(4): exact(4, se=0.0, a_se=0.0)}
    candidates = [cfg(2), cfg(3), cfg(4)]
    d = staged.decide(obs(measured), candidates, SPEED, "c1")
    assert d.best == cfg(4) and d.undecided == (cfg(3),)
    d = staged.decide(obs(measured), candidates, SPEED, "c1", margin=0.02)
    assert d.made and d.undecided == ()
    pattern = r"predicted 1\.674x \[1\.67\dx - 1\.67\dx\]: upper bound below the best measured 1\.647x \+ 2%"
    assert re.fullmatch(pattern, d.ruled_out[cfg(3)]), d.ruled_out[cfg(3)]
    assert staged.decide(obs(measured), candidates, SPEED, "c1", margin=0.01).undecided == (cfg(3),)
    # The margin scales the best's size: for the cost objective (negative values) it still widens.
    priced = staged.Objective({"qa": 1.0}, price_per_node_hour=36.0)
    d = staged.decide(obs(measured), candidates, priced, "c1", margin=0.02)
    assert d.made and d.ruled_out[cfg(3)].endswith(" + 2%") and "$" in d.ruled_out[cfg(3)]
    assert staged.decide(obs(measured), candidates, priced, "c1", margin=0.01).undecided == (cfg(3),)


def test_the_slos_rule_out_predictions_and_skip_measured_points():
    # Baseline TPOT 60 ms; the limit 40 ms needs a speedup of 1.5: k = 1 (1.45) breaks it when measured.
    objective = staged.Objective({"qa": 1.0}, slo_tpot_s=0.04)
    base = staged.BaseClass(100.0, 0.06, 0.1)
    measured = {cfg(1): exact(1, se=0.0), cfg(3): exact(3, se=0.0)}
    d = staged.decide(obs(measured, base=base), [cfg(1), cfg(3), cfg(9)], objective, "c1")
    assert d.best == cfg(3) and not d.estimates[cfg(1)].feasible and cfg(1) not in d.ties
    assert not d.estimates[staged.BASELINE].feasible
    # k = 9 is predicted at 1.26 (TPOT 48 ms): outside the SLOs.
    assert d.ruled_out == {cfg(9): f"predicted outside the SLOs ({theory.expected_speedup(A, 9, C):.3f}x)"}
    # Nothing feasible measured: no best, every unmeasured candidate open.
    strict = staged.Objective({"qa": 1.0}, slo_tpot_s=0.001)
    d = staged.decide(obs(measured, base=base), [cfg(1), cfg(3), cfg(9)], strict, "c1")
    assert (d.best, d.best_value, d.ties, d.undecided, d.ruled_out) == (None, None, (), (cfg(9),), {})
    assert not d.made and set(d.estimates) == {staged.BASELINE, cfg(1), cfg(3), cfg(9)}


def test_without_a_baseline_or_a_point_of_the_draft_nothing_is_decided():
    empty = staged.Observations({}, {})
    d = staged.decide(empty, [cfg(3)], SPEED, "c1")
    assert d.best is None and d.undecided == (staged.BASELINE, cfg(3)) and not d.made
    assert d.estimates[cfg(3)] == staged.Estimate(cfg(3), False, None, None, None, True, {})
    # A baseline alone: it is measured (speedup 1) and best, but the draft cannot be predicted yet.
    d = staged.decide(obs({}), [cfg(3), cfg(4, OTHER)], SPEED, "c1")
    assert d.best == staged.BASELINE and d.best_value == 1.0 and not d.made
    assert d.undecided == (cfg(4, OTHER), cfg(3))
    assert staged.next_stage([d], 1) == [cfg(4, OTHER)]  # both unknown: in the order of the undecided


def test_next_stage_fills_spare_slots_with_the_closest_ruled_out_and_skips_decided_loads():
    decided = staged.decide(obs({cfg(k): exact(k, se=0.001, a_se=0.001) for k in (2, 3, 4)}), CANDIDATES, SPEED, "c1")
    assert staged.next_stage([decided], 4) == []
    undecided = staged.decide(obs({cfg(2): exact(2, se=0.0, a_se=0.0), cfg(4): exact(4, se=0.0, a_se=0.0)}), CANDIDATES, SPEED, "c1")
    assert undecided.undecided == (cfg(3),) and set(undecided.ruled_out) == {cfg(1), cfg(5)}
    # k = 3 asked for; then the ruled-out by predicted point: k = 5 (1.589) before k = 1 (1.455).
    assert staged.next_stage([decided, undecided], 3) == [cfg(3), cfg(5), cfg(1)]
    assert staged.next_stage([decided, undecided], 2) == [cfg(3), cfg(5)]


def test_next_stage_takes_neighbours_of_the_top_then_the_rest_by_upper_bound():
    def estimate(k, point, high):
        return staged.Estimate(cfg(k), False, point, None, high)

    estimates = {cfg(k): estimate(k, p, h) for k, p, h in [(1, 1.2, 1.9), (2, 1.5, 1.6), (3, 1.4, 1.5), (5, 1.1, 2.0)]}
    d = staged.Decision("c1", staged.BASELINE, 1.0, (), (cfg(1), cfg(2), cfg(3), cfg(5)), {}, estimates)
    # Top by point: k = 2, its neighbours 1 and 3; then the rest by upper bound: 5.
    assert staged.next_stage([d], 10) == [cfg(2), cfg(1), cfg(3), cfg(5)]
    other = staged.Decision("c4", staged.BASELINE, 1.0, (), (cfg(5),), {}, {cfg(5): estimate(5, 1.3, 1.4)})
    assert staged.next_stage([d, other], 10) == [cfg(2), cfg(1), cfg(3), cfg(5)]
    assert staged.next_stage([other, d], 3) == [cfg(5), cfg(2), cfg(1)]
    # A candidate the model cannot predict yet (no point) comes first, and first by upper bound.
    unknown = {**estimates, cfg(7): estimate(7, None, None)}
    d = staged.Decision("c1", staged.BASELINE, 1.0, (), (cfg(1), cfg(2), cfg(3), cfg(5), cfg(7)), {}, unknown)
    assert staged.next_stage([d], 10) == [cfg(7), cfg(5), cfg(1), cfg(2), cfg(3)]
    assert staged.next_stage([], 3) == []


# --- stage 1, the per-class optima, the weights -----------------------------------------------------


def test_stage_one_takes_the_middle_k_per_draft_preferring_a_compiled_one_within_one():
    candidates = [staged.BASELINE, *[cfg(k) for k in range(1, 13)], *[cfg(k, OTHER) for k in (2, 3, 4)]]
    assert staged.stage_one(candidates) == [cfg(6), cfg(3, OTHER)]  # 6.5: the lower of 6 and 7
    assert staged.stage_one(candidates, [cfg(7)]) == [cfg(7), cfg(3, OTHER)]
    assert staged.stage_one(candidates, [cfg(5)]) == [cfg(6), cfg(3, OTHER)]  # 1.5 from the middle
    assert staged.stage_one(candidates, [cfg(8), cfg(4, OTHER)]) == [cfg(6), cfg(4, OTHER)]
    assert staged.stage_one([cfg(4, OTHER), cfg(2)]) == [cfg(4, OTHER), cfg(2)]
    assert staged.stage_one([staged.BASELINE]) == []


def test_class_optima_are_the_measured_best_per_class_over_the_baseline():
    measured = {
        "c1": {
            cfg(2): {"qa": staged.ClassMeasure(1.4, 0.0), "code": staged.ClassMeasure(0.9, 0.0)},
            cfg(3): {"qa": staged.ClassMeasure(1.4, 0.0), "code": staged.ClassMeasure(1.0, 0.0)},
        }
    }
    observations = staged.Observations(
        {"c1": {"qa": staged.BaseClass(1.0), "code": staged.BaseClass(1.0), "chat": staged.BaseClass(1.0)}}, measured
    )
    assert staged.class_optima(observations, "c1") == {"qa": (cfg(2), 1.4), "code": (staged.BASELINE, 1.0), "chat": (staged.BASELINE, 1.0)}
    assert staged.class_optima(observations, "c4") == {}


def test_weights_parse_with_one_line_errors():
    assert staged.parse_weights(["code:3", "qa:0.5", "chat:0"]) == {"code": 3.0, "qa": 0.5, "chat": 0.0}
    assert staged.parse_weights([]) == {}
    assert staged.parse_weights(["qa:0.5"]) == {"qa": 0.5}
    cases = {
        "code": "'code' is not CLASS:WEIGHT with a number",
        "code:x": "'code:x' is not CLASS:WEIGHT with a number",
        ":1": "':1': expected CLASS:WEIGHT with a weight >= 0",
        "code:-1": "'code:-1': expected CLASS:WEIGHT with a weight >= 0",
        "code:nan": "'code:nan': expected CLASS:WEIGHT with a weight >= 0",
        "code:inf": "'code:inf': expected CLASS:WEIGHT with a weight >= 0",
        "code:0": "every weight is 0: at least one class needs a weight > 0",
    }
    for item, message in cases.items():
        with pytest.raises(ValueError) as error:
            staged.parse_weights([item])
        assert str(error.value) == message
    with pytest.raises(ValueError) as error:
        staged.parse_weights(["qa:1", "qa:2"])
    assert str(error.value) == "'qa:2': class qa given twice"


# --- stages and their node-hours -----------------------------------------------------------------


def test_observe_groups_by_load_and_keeps_every_baseline_load():
    m = exact(2)
    result = staged.observe({"c1": {}, "c4": {}}, {cfg(2): {"c1": m, "c8": m}, cfg(3): {"c1": m}})
    assert result.baseline == {"c1": {}, "c4": {}}
    assert result.measured == {"c1": {cfg(2): m, cfg(3): m}, "c4": {}, "c8": {cfg(2): m}}


def test_variants_are_named_after_the_draft_and_k():
    assert staged.variant_of(staged.BASELINE) == SweepVariant("baseline")
    assert staged.variant_of(cfg(4)) == SweepVariant("q17b-k4", D, 4, "draft")
    assert staged.variant_of(staged.Config("local-draft", 2, "draft")) == SweepVariant("local-draft-k2", "local-draft", 2, "draft")
    assert staged.variant_of(staged.Config("org/Eagle3.Head", 2, "eagle3")) == SweepVariant("eagle3head-k2", "org/Eagle3.Head", 2, "eagle3")


def test_stage_units_and_their_node_hours():
    estimates = Estimates(120.0, 15.0, 30.0)
    first = staged.stage_units(1, [cfg(4), cfg(5)], [cfg(5)])
    assert [(u.index, u.variant.name, u.repeat, u.compiled) for u in first] == [
        (0, "baseline", False, False),
        (1, "q17b-k4", False, False),
        (2, "q17b-k5", False, True),
        (3, "baseline", True, True),
    ]
    named = {cfg(4): SweepVariant("mine", D, 4, "draft")}
    later = staged.stage_units(2, [cfg(4), cfg(5)], [cfg(5)], named)
    assert later == (Unit(0, SweepVariant("mine", D, 4, "draft"), False, False), Unit(1, staged.variant_of(cfg(5)), False, True))
    # Two slots, 2 loads: waves [baseline, k4] 120 + 60 = 180 min, [k5, baseline again] 15 + 60 = 75.
    assert staged.stage_node_hours(first, 2, 2, estimates) == pytest.approx(255 / 60, rel=1e-12)
    assert staged.stage_node_hours(first, 2, 2, estimates, nodes=3) == pytest.approx(3 * 255 / 60, rel=1e-12)
    assert staged.grid_node_hours([cfg(4), cfg(5)], 2, 2, [cfg(5)], estimates, 2) == pytest.approx(2 * 255 / 60, rel=1e-12)
    assert staged.grid_node_hours([cfg(4), cfg(5)], 2, 2, [cfg(5)], estimates) == pytest.approx(255 / 60, rel=1e-12)


def test_the_staged_cost_stage_one_expected_and_worst():
    # 1 draft, k = 1..5, 1 load, 2 slots, nothing compiled: stage 1 (k = 3) is [baseline, k3] 135 min and
    # [baseline again] 30 min; the rest (1, 2, 4, 5) two waves of two uncompiled: 135 min each.
    cost = staged.staged_cost(CANDIDATES, 1, 2, [], Estimates(120.0, 15.0, 15.0))
    assert cost == staged.StagedCost(165 / 60, 300 / 60, 435 / 60, cost.grid)
    # The grid: [baseline, k1], [k2, k3], [k4, k5], [baseline again]: 3 x 135 + 30 min.
    assert cost.grid == pytest.approx(435 / 60, rel=1e-12)
    assert staged.staged_cost(CANDIDATES, 1, 2, [], Estimates(120.0, 15.0, 15.0), nodes=2).worst == pytest.approx(2 * 435 / 60)
    # Three slots: the rest is one wave of three and one of one (k = 5), 135 min each.
    three = staged.staged_cost(CANDIDATES, 1, 3, [], Estimates(120.0, 15.0, 15.0))
    assert (three.stage_one, three.expected, three.worst) == (pytest.approx(135 / 60), pytest.approx(270 / 60), pytest.approx(405 / 60))
    alone = staged.staged_cost([cfg(3)], 1, 2, [], Estimates(120.0, 15.0, 15.0))
    assert alone.expected == alone.stage_one == alone.worst == pytest.approx(165 / 60)


def test_run_staged_measures_until_every_load_is_decided():
    asked = []

    def measure(config):
        asked.append(config)
        return {"c1": exact(config.k, se=0.002, a_se=0.002), "c4": exact(config.k, se=0.002, a_se=0.002, c=0.2)}

    baseline = {load: {"qa": staged.BaseClass(100.0)} for load in ("c1", "c4")}
    result = staged.run_staged(CANDIDATES, measure, baseline, SPEED, ["c1", "c4"], slots=2)
    # Stage 1 k = 3; at c = 0.2 the optimum is k = 2 (1.4 against 1.36 at k = 3).
    assert [round(theory.expected_speedup(A, k, 0.2), 3) for k in (1, 2, 3)] == [1.333, 1.4, 1.36]
    assert result.stages[0] == [cfg(3)]
    assert asked == [c for stage in result.stages for c in stage]
    assert result.decisions["c1"].best == cfg(3) and result.decisions["c4"].best == cfg(2)
    assert all(d.made for d in result.decisions.values())
    assert set(result.decided_in) == {"c1", "c4"} and max(result.decided_in.values()) == len(result.stages)
    assert result.measured == {staged.BASELINE, *asked}
    assert result.observations.measured["c4"][cfg(3)] == measure(cfg(3))["c4"]
    # Node-hours: stage 1 165 min, every later stage a wave of at most two uncompiled configurations (135 min) a load each x 2.
    later = [math.ceil(len(stage) / 2) * (120 + 2 * 15) for stage in result.stages[1:]]
    assert result.node_hours == pytest.approx((120 + 2 * 15 + 15 + 2 * 15 + sum(later)) / 60, rel=1e-12)


def test_run_staged_with_one_slot_takes_three_stages_of_one():
    def measure(config):
        return {"c1": exact(config.k, se=0.01, a_se=0.01), "c4": exact(config.k, se=0.01, a_se=0.01, c=0.3)}

    baseline = {load: {"qa": staged.BaseClass(100.0)} for load in ("c1", "c4")}
    result = staged.run_staged(CANDIDATES, measure, baseline, SPEED, ["c1", "c4"], slots=1)
    # At c = 0.3 the optimum is k = 1 (1.231 against 1.225 at k = 2): stage 2 measures 1, stage 3 its neighbour 2.
    assert result.stages == [[cfg(3)], [cfg(1)], [cfg(2)]]
    assert result.decided_in == {"c1": 1, "c4": 3}
    assert (result.decisions["c1"].best, result.decisions["c4"].best) == (cfg(3), cfg(1))
    # Stage 1: baseline, k = 3, baseline again, one wave each (150 + 150 + 45 min); then 150 min a stage.
    assert result.node_hours == pytest.approx((150 + 150 + 45 + 150 + 150) / 60, rel=1e-12)


def test_a_redrawn_speedup_never_falls_below_a_millionth():
    # A standard error far above the speedup: many redraws would be negative; they are clamped to 1e-6.
    d = staged.decide(obs({cfg(1): exact(1, se=10.0)}), [cfg(1)], SPEED, "c1", resamples=100)
    assert d.estimates[cfg(1)].low == 1e-6 and d.estimates[cfg(1)].high > 10


def test_a_redrawn_acceptance_stays_below_one():
    # a = 0.99 with a standard error of 0.5: half the redraws would exceed 1, which E(a, k) rejects.
    d = staged.decide(obs({cfg(2): exact(2, se=0.01, a=0.99, a_se=0.5)}), [cfg(2), cfg(3)], SPEED, "c1", resamples=50)
    assert d.estimates[cfg(3)].high <= theory.expected_speedup(0.9999, 3, 0.0) and d.estimates[cfg(3)].low is not None


def test_the_seed_0_replicates_of_a_fit_with_a_residual():
    # Points 10% off the model (residual 0.090): the bounds are those of the first 20 replicates of
    # random.Random(0), each redrawing the speedups (se 0.02), the acceptance (0.01) and the misfit.
    s1, s2 = theory.expected_speedup(A, 1, C) * 1.1, theory.expected_speedup(A, 2, C) * 0.9
    off = {cfg(1): {"qa": staged.ClassMeasure(s1, 0.02, A, 0.01)}, cfg(2): {"qa": staged.ClassMeasure(s2, 0.02, A, 0.01)}}
    assert staged.fit_draft(obs(off), D, "c1").residual == pytest.approx(0.09019300276488167, rel=1e-9)
    d = staged.decide(obs(off), CANDIDATES, SPEED, "c1", resamples=20)
    measured, predicted = d.estimates[cfg(1)], d.estimates[cfg(4)]
    assert (measured.low, measured.point, measured.high) == pytest.approx((1.5833584787923534, 1.6, 1.6360219927100155), rel=1e-9)
    assert (predicted.low, predicted.high) == pytest.approx((1.2776092204525766, 1.8105558841060996), rel=1e-9)
    assert predicted.point == pytest.approx(1.5036521739130437, rel=1e-9)


def test_a_draft_without_a_fit_stays_open_and_the_others_are_still_ruled_out():
    # "A/a" sorts before the measured draft and has no point: it is open, and the loops go on past it.
    measured = {cfg(k): exact(k, se=0.001, a_se=0.001) for k in (2, 3, 4)}
    unfitted = staged.Config("A/a", 3, "draft")
    d = staged.decide(obs(measured), [unfitted, *CANDIDATES], SPEED, "c1")
    assert d.undecided == (unfitted,) and set(d.ruled_out) == {cfg(1), cfg(5)}


def test_an_upper_bound_below_a_noisy_best_rules_a_candidate_out_without_a_margin():
    # The best (k = 3) is measured with a standard error of 0.2: the difference CI spans 0, but the other
    # draft's k = 2, predicted from a precise point at 1.544, cannot beat its measured 1.674.
    measured = {cfg(3): exact(3, se=0.2, a_se=0.001), cfg(1, OTHER): exact(1, se=0.0001, a=0.55, a_se=0.0001)}
    d = staged.decide(obs(measured), [cfg(3), cfg(1, OTHER), cfg(2, OTHER)], SPEED, "c1")
    assert d.best == cfg(3) and d.ties == (cfg(1, OTHER),) and d.made
    reason = d.ruled_out[cfg(2, OTHER)]
    assert re.fullmatch(r"predicted 1\.544x \[1\.54\dx - 1\.54\dx\]: upper bound below the best measured 1\.674x", reason), reason


def test_a_measured_point_outside_the_slos_is_never_a_tie():
    # k = 4 measures as fast as k = 3 within noise, but its TTFT breaks the limit.
    objective = staged.Objective({"qa": 1.0}, slo_ttft_s=0.5)
    measured = {cfg(3): exact(3, se=0.05), cfg(4): exact(3, se=0.05, ttft_s=0.6)}
    d = staged.decide(obs(measured), [cfg(3), cfg(4)], objective, "c1")
    assert d.best == cfg(3) and not d.estimates[cfg(4)].feasible and d.ties == ()


def test_spare_slots_take_ruled_out_candidates_without_a_point_last():
    def estimate(k, point):
        return staged.Estimate(cfg(k), False, point, None, None)

    estimates = {cfg(1): estimate(1, 1.5), cfg(2): estimate(2, None), cfg(3): estimate(3, 1.2), cfg(4): estimate(4, 1.3)}
    d = staged.Decision("c1", staged.BASELINE, 1.0, (), (cfg(1),), {cfg(2): "x", cfg(3): "y", cfg(4): "z"}, estimates)
    assert staged.next_stage([d], 4) == [cfg(1), cfg(4), cfg(3), cfg(2)]
