"""The staged sweep's pure pieces (specbench/sweep/staged.py): the stop rule on its own (a decided
case stops; an undecided one asks for the right points), ties, SLOs, the cost objective, stage 1,
the node-hours of both strategies, and a small known truth on the emulator's engine."""

from __future__ import annotations

import pytest

from specbench.analysis import theory
from specbench.emulator import sweep_truth
from specbench.sweep import staged
from specbench.sweep.plan import Estimates

DRAFT = "Qwen/Qwen3-1.7B"
OTHER = "Qwen/Qwen3-0.6B"
CLASSES = ("code", "qa")
TRUE_A = {"code": 0.9, "qa": 0.7}
TRUE_C = 0.1
EQUAL = staged.Objective({cls: 1.0 for cls in CLASSES})


def _config(k: int, draft: str = DRAFT) -> staged.Config:
    return staged.Config(draft, k, "draft")


def _candidates(draft: str = DRAFT, ks: range = range(1, 13)) -> list[staged.Config]:
    return [_config(k, draft) for k in ks]


def _measure(
    k: int, a: dict[str, float] = TRUE_A, c: float = TRUE_C, se: float = 0.01, bias: float = 1.0
) -> dict[str, staged.ClassMeasure]:
    return {cls: staged.ClassMeasure(theory.expected_speedup(v, k, c) * bias, se, v, 0.003) for cls, v in a.items()}


def _observations(measured: dict[staged.Config, dict[str, staged.ClassMeasure]], load: str = "c1") -> staged.Observations:
    base = {load: {cls: staged.BaseClass(100.0, 0.045, 0.1) for cls in CLASSES}}
    return staged.Observations(base, {load: measured})


def _true_best(ks: range = range(1, 13)) -> int:
    return max(ks, key=lambda k: sum(theory.expected_speedup(a, k, TRUE_C) for a in TRUE_A.values()))


def test_an_undecided_case_asks_for_the_predicted_optimum_and_its_neighbours():
    best = _true_best()  # 6 with a = 0.9 / 0.7 and c = 0.1
    observations = _observations({_config(2): _measure(2)})
    decision = staged.decide(observations, _candidates(), EQUAL, "c1")
    assert not decision.made and decision.best == _config(2)
    assert _config(best) in decision.undecided
    proposal = staged.next_stage([decision], size=3)
    assert proposal[0] == _config(best)
    assert set(proposal[1:]) == {_config(best - 1), _config(best + 1)}
    assert _config(2) not in proposal  # never a measured configuration again


def test_a_decided_case_stops():
    best = _true_best()
    measured = {_config(k): _measure(k) for k in (best - 1, best, best + 1)}
    decision = staged.decide(_observations(measured), _candidates(), EQUAL, "c1")
    assert decision.made and decision.best == _config(best)
    assert not decision.undecided and set(decision.ruled_out) == {c for c in _candidates() if c not in measured}
    assert all("predicted" in why for why in decision.ruled_out.values())
    assert staged.next_stage([decision], size=2) == []


def test_a_far_candidate_the_interval_cannot_rule_out_stays_open():
    """Noisy measurements: the model's interval is wide, so a candidate a little better than the
    best measured is not ruled out; precise ones rule it out."""
    best = _true_best()
    noisy = {_config(best - 2): _measure(best - 2, se=0.3)}
    decision = staged.decide(_observations(noisy), _candidates(), EQUAL, "c1")
    assert _config(best) in decision.undecided
    precise = {_config(k): _measure(k, se=0.002) for k in (best - 1, best, best + 1)}
    assert staged.decide(_observations(precise), _candidates(), EQUAL, "c1").made


def test_measured_points_within_noise_are_ties_and_clear_losers_are_not():
    measured = {_config(6): _measure(6, se=0.05), _config(7): _measure(7, se=0.05), _config(1): _measure(1, se=0.01)}
    decision = staged.decide(_observations(measured), _candidates(ks=range(1, 8)), EQUAL, "c1")
    assert decision.best in (_config(6), _config(7))
    assert set(decision.ties) == {_config(6), _config(7)} - {decision.best}


def test_a_draft_that_never_pays_is_ruled_out_from_one_point():
    weak = {"code": 0.15, "qa": 0.1}
    measured = {_config(6): _measure(6, se=0.005), _config(5): _measure(5, se=0.005), _config(7): _measure(7, se=0.005)}
    measured[_config(6, OTHER)] = _measure(6, weak, c=0.3, se=0.005)
    candidates = _candidates(ks=range(3, 10)) + _candidates(OTHER, range(3, 10))
    decision = staged.decide(_observations(measured), candidates, EQUAL, "c1")
    assert decision.made
    assert all(c in decision.ruled_out for c in candidates if c.draft == OTHER and c not in measured)


def test_the_slo_rules_out_a_configuration_and_the_baseline_can_win():
    slow = staged.Objective(EQUAL.weights, slo_tpot_s=0.03)  # baseline 45 ms: only speedups above 1.5 pass
    measured = {_config(1): _measure(1, c=0.3)}  # about 1.2x: TPOT 37 ms, outside
    decision = staged.decide(_observations(measured), [_config(1)], slow, "c1")
    assert decision.estimates[_config(1)].feasible is False
    assert decision.best is None  # the baseline itself breaks the SLO
    lenient = staged.Objective(EQUAL.weights, slo_tpot_s=0.05)
    assert staged.decide(_observations(measured), [_config(1)], lenient, "c1").best == _config(1)


def test_the_cost_objective_is_the_mix_weighted_cost_per_million_tokens():
    objective = staged.Objective({"code": 3.0, "qa": 1.0}, price_per_node_hour=36.0)
    base = {"code": staged.BaseClass(100.0), "qa": staged.BaseClass(50.0)}
    value = objective.value({"code": 2.0, "qa": 1.0}, base)
    # $36/h over 200 and 50 tokens/s: $50 and $200 per million; weights 3/4 and 1/4.
    assert value == pytest.approx(-(0.75 * 50.0 + 0.25 * 200.0))
    assert staged.cost_per_million_tokens(36.0, 200.0) == pytest.approx(50.0)  # analysis/cost.py, the one cost function
    assert objective.display(value) == "$87.50/M tokens"


def test_class_weights_move_the_decision():
    """A code-heavy mix (a = 0.9) wants a longer k than a qa-heavy one (a = 0.7)."""
    measured = {_config(k): _measure(k, se=0.002) for k in range(1, 13)}
    code = staged.decide(_observations(measured), _candidates(), staged.Objective({"code": 1.0, "qa": 0.0}), "c1")
    qa = staged.decide(_observations(measured), _candidates(), staged.Objective({"code": 0.0, "qa": 1.0}), "c1")
    assert code.best.k > qa.best.k


def test_stage_one_takes_the_middle_k_and_prefers_compiled_graphs():
    candidates = _candidates(ks=range(3, 10)) + _candidates(OTHER, range(3, 10))
    assert staged.stage_one(candidates) == [_config(6), _config(6, OTHER)]
    assert staged.stage_one(candidates, [_config(7)]) == [_config(7), _config(6, OTHER)]
    assert staged.stage_one(candidates, [_config(9)]) == [_config(6), _config(6, OTHER)]  # too far from the middle


def test_the_docs_sweep_costs_under_both_strategies():
    """docs/sweeps.md: 2 drafts, k = 3..9, 3 loads, 2 slots, the default estimates; the baseline and
    the 1.7B k = 7 compiled: the grid 22 node-hours; staged stage 1 3.75, expected 6.5, worst 20.25."""
    candidates = _candidates(ks=range(3, 10)) + _candidates(OTHER, range(3, 10))
    precompiled = [staged.BASELINE, _config(7)]
    cost = staged.staged_cost(candidates, 3, 2, precompiled, Estimates(120.0, 15.0, 15.0))
    assert cost.grid == pytest.approx(22.0)
    assert cost.stage_one == pytest.approx(3.75)  # [baseline, 1.7B k7] 60 min, [0.6B k6, baseline again] 165 min
    assert cost.expected == pytest.approx(3.75 + 2.75)
    assert cost.worst == pytest.approx(3.75 + 6 * 2.75)  # 12 other variants, one wave of two a stage


def test_weights_parse_and_bad_ones_name_the_item():
    assert staged.parse_weights(["code:3", "qa:1"]) == {"code": 3.0, "qa": 1.0}
    for bad, message in (("code", "CLASS:WEIGHT"), ("code:-1", ">= 0"), ("code:x", "a number"), ("code:0", "every weight is 0")):
        with pytest.raises(ValueError, match=message):
            staged.parse_weights([bad])
    with pytest.raises(ValueError, match="twice"):
        staged.parse_weights(["qa:1", "qa:2"])


def test_a_small_known_truth_staged_equals_the_grid_for_less():
    """In-process, on the emulator's engine: 2 drafts, k = 3..7, 1 in flight, 2 classes."""
    shape = sweep_truth.Shape(ks=tuple(range(3, 8)), loads=("c1",), classes=("code", "qa"), requests=6, max_tokens=200)
    truth = sweep_truth.Truth("small", {DRAFT: {"code": 0.92, "qa": 0.75}, OTHER: {"code": 0.3, "qa": 0.2}}, {DRAFT: 0.003, OTHER: 0.015})
    result = sweep_truth.compare(truth, staged.Objective({"code": 1.0, "qa": 1.0}), shape)
    assert result.agrees == {"c1": True} and result.class_agrees
    assert result.staged.decisions["c1"].made
    assert result.staged.node_hours <= result.grid_node_hours / 2
    assert not result.staged.measured & {c for c in shape.candidates() if c.draft == OTHER and c.k != 5}  # the 0.6B: one point
