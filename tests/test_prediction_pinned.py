"""Exact values of specbench/analysis/prediction.py, the first stage of its mutation run (issue 24,
scripts/mutation.toml): on a flat profile (every step a known number of seconds) the rows, their
dollars, the best k and the texts follow by hand; on a compute-bound one the crossover is the
serving model's."""

from __future__ import annotations

import dataclasses

import pytest

from specbench.analysis import prediction, theory
from specbench.analysis import serving_model as sm

DRAFT = sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=7)
FLAT = sm.Profile(overhead_s=0.04, bandwidth_efficiency=None, compute_efficiency=None, draft_overhead_s=0.005)
COMPUTE_BOUND = sm.Profile(overhead_s=0.002, bandwidth_efficiency=0.7, compute_efficiency=0.1, draft_overhead_s=0.0002)


def rel(value, tolerance=1e-12):
    return pytest.approx(value, rel=tolerance)


def test_headroom_and_the_default_loads():
    assert prediction.K_MAX == 15
    bound = sm.weight_bound_s(DRAFT)
    assert prediction.headroom(0.045, DRAFT) == (0.045 / bound, 0.045 - bound)
    assert prediction.default_loads(4) == [1, 2, 4, 8]
    assert prediction.default_loads(1) == [1, 2]
    assert prediction.default_loads(3) == [1, 2, 4]
    assert prediction.default_loads(5) == [1, 2, 4, 8]


def test_a_flat_profile_gives_every_row_by_hand():
    report = prediction.predict_deployment(DRAFT, FLAT, {"json": (0.5, "assumed"), "chat": (0.2, "a run")}, [2, 1, 2], price_per_hour=36.0)
    assert (report.deployment, report.profile, report.workload, report.price_per_hour) == (DRAFT, FLAT, sm.Workload(), 36.0)
    assert report.loads == [1, 2]
    assert report.weight_bound_s == sm.weight_bound_s(DRAFT) and report.baseline_step_s == 0.04
    assert report.assumptions == sm.ASSUMPTIONS and report.to_dict()["assumptions"] == list(sm.ASSUMPTIONS)
    assert report.to_dict()["loads"] == [1, 2] and report.to_dict()["classes"][0]["prompt_class"] == "json"
    json_, chat = report.classes
    assert (json_.prompt_class, json_.a, json_.source, chat.prompt_class, chat.a, chat.source) == (
        "json",
        0.5,
        "assumed",
        "chat",
        0.2,
        "a run",
    )
    one, two = json_.rows
    assert (one.concurrency, two.concurrency) == (1, 2)
    # One client: baseline TPOT 40 ms; speculative 75 ms a step of E(0.5, 7) tokens.
    assert one.baseline == sm.predict(DRAFT.with_k(0), FLAT, 0.0, 1) and one.speculative == sm.predict(DRAFT, FLAT, 0.5, 1)
    assert one.baseline.tpot_s == rel(0.04) and one.speculative.tpot_s == rel(0.075 / theory.expected_tokens_per_step(0.5, 7))
    assert one.speedup == rel(0.04 / (0.075 / theory.expected_tokens_per_step(0.5, 7)))
    # Two clients: the other's prefill (40 and 45 ms) interrupts each request's 599 tokens.
    base_tpot = (599 * 0.04 + 0.04) / 599
    spec_tpot = (599 / theory.expected_tokens_per_step(0.5, 7) * 0.075 + 0.045) / 599
    assert two.speedup == rel(base_tpot / spec_tpot)
    # Dollars: $36 an hour is 1 cent a second over the node's tokens per second.
    assert one.baseline_cost == rel(0.01 / one.baseline.tokens_per_s_per_node * 1e6)
    assert one.speculative_cost == rel(0.01 / one.speculative.tokens_per_s_per_node * 1e6)
    # Best k: E(0.5, k) x 40 / (40 + 5 k) is highest at k = 2 (1.75 x 40 / 50 = 1.4).
    scores = {k: theory.expected_tokens_per_step(0.5, k) * 0.04 / (0.04 + 0.005 * k) for k in range(1, 16)}
    assert max(scores, key=scores.get) == 2 and (one.best_k, one.best_k_speedup) == (2, rel(scores[2]))
    # Speculation at a = 0.2 never pays on this profile: at 1 client already.
    assert chat.crossover == 1.0 and chat.first_level_not_paying == 1
    assert chat.text == "stops paying at ~1 clients in flight (model, batch interpolated)"
    assert json_.crossover is None and json_.first_level_not_paying is None
    assert json_.text == f"pays at every load: the batch stops growing at max_num_seqs 4, where the speedup is {two.speedup:.2f}x"


def test_a_class_that_pays_at_every_load_quotes_the_speedup_at_the_highest():
    dep = sm.Deployment(method="draft", draft="Qwen/Qwen3-0.6B", k=4)
    (cls,) = prediction.predict_deployment(dep, COMPUTE_BOUND, {"qa": (0.9, "assumed")}, [4, 1, 2]).classes
    assert [round(r.speedup, 2) for r in cls.rows] == [3.25, 3.04, 2.72]  # falling with the batch
    assert cls.text == "pays at every load: the batch stops growing at max_num_seqs 4, where the speedup is 2.72x"
    assert (cls.crossover, cls.first_level_not_paying) == (None, None)


def test_the_defaults_no_price_and_k_up_to_15():
    # a = 0.99: E grows with k almost one for one, so the longest k allowed is best.
    report = prediction.predict_deployment(DRAFT, FLAT, {"json": (0.99, "assumed")}, [1])
    (row,) = report.classes[0].rows
    assert (row.baseline_cost, row.speculative_cost, report.price_per_hour) == (None, None, None)
    assert row.best_k == 15 and report.workload is sm.DEFAULT_WORKLOAD
    short = prediction.predict_deployment(DRAFT, FLAT, {"json": (0.99, "assumed")}, [1], sm.Workload(16, 50), None, 3)
    assert short.classes[0].rows[0].best_k == 3 and short.workload == sm.Workload(16, 50)
    assert short.classes[0].rows[0].baseline == sm.predict(DRAFT.with_k(0), FLAT, 0.0, 1, sm.Workload(16, 50))


def test_the_crossover_on_a_compute_bound_profile():
    dep = sm.Deployment(method="draft", draft="Qwen/Qwen3-0.6B", k=4, max_num_seqs=512)
    report = prediction.predict_deployment(dep, COMPUTE_BOUND, {"qa": (0.6, "assumed")}, [1, 16, 32, 64])
    (cls,) = report.classes
    cross = sm.crossover_concurrency(dep, COMPUTE_BOUND, 0.6)
    assert cross is not None and 16 < cross < 32
    assert cls.crossover == cross and cls.text == f"stops paying at ~{cross:.3g} clients in flight (model, batch interpolated)"
    assert [r.speedup > 1 for r in cls.rows] == [True, True, False, False]
    assert cls.first_level_not_paying == 32
    # A level exactly at a speedup of 1 does not pay.
    row = cls.rows[2]
    exactly = prediction.Row(32, row.baseline, row.speculative, 1.0, row.best_k, row.best_k_speedup, None, None)
    assert next((r.concurrency for r in [cls.rows[0], exactly] if r.speedup <= 1.0), None) == 32


def test_bad_input_is_one_line():
    with pytest.raises(ValueError) as error:
        prediction.predict_deployment(DRAFT.with_k(0), FLAT, {"json": (0.5, "assumed")}, [1])
    assert str(error.value) == "predict needs a speculative deployment (serving.speculation_method draft or eagle3, k >= 1)"
    for loads in ([], [0], [1, 2.0], [1, -3]):
        with pytest.raises(ValueError) as error:
            prediction.predict_deployment(DRAFT, FLAT, {"json": (0.5, "assumed")}, loads)
        assert str(error.value) == f"loads must be integers >= 1 (clients in flight); got {list(loads)!r}"


def test_a_speedup_of_exactly_one_does_not_pay_and_the_report_is_immutable():
    # No draft cost and no acceptance: the speculative step is the plain one, a speedup of exactly 1.
    free = sm.Profile(overhead_s=0.04, bandwidth_efficiency=None, compute_efficiency=None, draft_overhead_s=0.0)
    report = prediction.predict_deployment(DRAFT, free, {"qa": (0.0, "assumed")}, [1, 2])
    (cls,) = report.classes
    assert [r.speedup for r in cls.rows] == [1.0, 1.0]
    assert cls.first_level_not_paying == 1 and cls.crossover == 1.0
    for value in (report, cls, cls.rows[0]):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, None)
