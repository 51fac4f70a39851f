"""The serving model: parameter counts against the model cards, step times against hand arithmetic,
the calibration's recovery of known parameters, and the write-up's anchor."""

from __future__ import annotations

import math
import random

import pytest

from specbench.analysis import serving_model as sm
from specbench.analysis import theory

DRAFT = sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=7)
BASE = DRAFT.with_k(0)


def test_parameter_counts_match_the_model_cards():
    # Model cards: 32.8B; 1.7B (1.4B non-embedding); 0.6B (0.44B non-embedding).
    assert sm.QWEN3_32B.params / 1e9 == pytest.approx(32.8, abs=0.05)
    assert sm.QWEN3_1_7B.params / 1e9 == pytest.approx(1.7, abs=0.05)
    assert (sm.QWEN3_1_7B.params - sm.QWEN3_1_7B.embedding_params) / 1e9 == pytest.approx(1.4, abs=0.02)
    assert sm.QWEN3_0_6B.params / 1e9 == pytest.approx(0.6, abs=0.01)
    assert (sm.QWEN3_0_6B.params - sm.QWEN3_0_6B.embedding_params) / 1e9 == pytest.approx(0.44, abs=0.01)
    # Untied 32B: the input embedding is a lookup, the output layer is read in full.
    assert sm.QWEN3_32B.streamed_params == sm.QWEN3_32B.params - 151_936 * 5120
    assert sm.QWEN3_1_7B.streamed_params == sm.QWEN3_1_7B.params  # tied: the one matrix is the output layer


def test_more_qwen3_sizes_match_their_model_cards():
    # Model cards: 14.8B (13.2B non-embedding), 8.2B (6.95B), 4.0B (3.6B); "non-embedding" leaves out the
    # input embedding and (untied) the output layer.
    for shape, total, non_embedding in ((sm.QWEN3_14B, 14.8, 13.2), (sm.QWEN3_8B, 8.2, 6.95), (sm.QWEN3_4B, 4.0, 3.6)):
        assert shape.params / 1e9 == pytest.approx(total, abs=0.05), shape.name
        assert (shape.params - shape.embedding_params - shape.lm_head_params) / 1e9 == pytest.approx(non_embedding, abs=0.05), shape.name
    # 8B by hand: attention 4096 x (32 + 16) x 128 + 32 x 128 x 4096, SwiGLU 3 x 4096 x 12288, norms 2 x 4096 + 256.
    assert sm.QWEN3_8B.layer_params == 25_165_824 + 16_777_216 + 150_994_944 + 8448
    assert sm.QWEN3_8B.params == 36 * 192_946_432 + 2 * 151_936 * 4096 + 4096 == 8_190_735_360
    assert sm.QWEN3_4B.lm_head_params == 0 and sm.QWEN3_14B.lm_head_params == 151_936 * 5120  # 4B tied, 14B untied


def test_topology_and_the_weight_bound():
    assert (BASE.devices, BASE.replicas_per_node) == (8, 2)  # TP 32 at LNC 2 = 8 chips of 16
    assert sm.Deployment(tensor_parallel_size=64).devices == 16
    # 64 GB of streamed BF16 weights over 8 x 2.9 TB/s: about 2.8 ms (REFERENCE.md section 6).
    assert sm.weight_bound_s(BASE) == pytest.approx(sm.QWEN3_32B.weight_bytes / (8 * 2.9e12))
    assert 2.6e-3 < sm.weight_bound_s(BASE) < 2.9e-3


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tensor_parallel_size": 30}, "tensor_parallel_size must be a multiple of 4"),
        ({"tensor_parallel_size": 256}, "at most 16 devices"),
        ({"method": "medusa"}, "method must be one of"),
        ({"k": 3}, "k must be 0 without a speculation method"),
        ({"method": "draft", "draft": "Qwen/Qwen3-1.7B", "k": 0}, "k must be an integer >= 1"),
        ({"method": "draft", "draft": "nope/x", "k": 2}, "model 'nope/x' has no recorded geometry"),
        ({"node_type": "trn1.32xlarge"}, "node_type must be one of trn2.48xlarge"),
        ({"max_num_seqs": 0}, "max_num_seqs must be an integer >= 1"),
    ],
)
def test_bad_deployments_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        sm.Deployment(**changes)


def test_step_time_by_term():
    profile = sm.Profile(overhead_s=0.01, bandwidth_efficiency=0.5, compute_efficiency=0.25, draft_overhead_s=0.002)
    bw, peak = 8 * 2.9e12, 8 * 667e12
    step = sm.decode_step(DRAFT, profile, 4)
    assert step.tokens == 32
    assert step.weights_s == pytest.approx(sm.QWEN3_32B.weight_bytes / (bw * 0.5))
    assert step.compute_s == pytest.approx(32 * 2 * sm.QWEN3_32B.streamed_params / (peak * 0.25))
    draft_one = sm.QWEN3_1_7B.weight_bytes / (bw * 0.5) + 4 * 2 * sm.QWEN3_1_7B.params / (peak * 0.25) + 0.002
    assert step.draft_s == pytest.approx(7 * draft_one)
    assert step.total_s == pytest.approx(step.weights_s + step.compute_s + 0.01 + 7 * draft_one)
    # The design row is the same arithmetic, linear in the four free parameters.
    point = sm.MeasuredPoint(DRAFT, 4, 1.0, metric="step")
    row = sm.design_row(point)
    assert math.fsum(r * x for r, x in zip(row, sm.profile_vector(profile), strict=True)) == pytest.approx(step.total_s)
    # Compute grows with the batch, weights do not; no term left out when efficiencies are None.
    assert sm.decode_step(DRAFT, profile, 8).compute_s == pytest.approx(2 * step.compute_s)
    flat = sm.Profile(overhead_s=0.03, bandwidth_efficiency=None, compute_efficiency=None, draft_overhead_s=0.003)
    assert sm.decode_step(DRAFT, flat, 64).total_s == pytest.approx(0.03 + 7 * 0.003)


def test_eagle3_head_is_one_target_layer_wide():
    head = sm.Deployment(method="eagle3", draft="AngelSlim/Qwen3-32B_eagle3", k=5).draft_shape
    assert head is not None and head.layers == 1 and head.hidden == 5120
    assert 0.5e9 < head.params < 1.0e9 and head.embedding_params == 0


def synthetic_points(truth: sm.Profile, noise: float = 0.0, seed: int = 0) -> list[sm.MeasuredPoint]:
    """Points of several deployments (two TPs, both drafts, baseline, k and batch varied) that the
    true profile produced, with optional relative noise."""
    rng = random.Random(seed)
    points = []
    for tp in (16, 32):
        for draft, ks in (("", (0,)), ("Qwen/Qwen3-1.7B", (3, 7)), ("Qwen/Qwen3-0.6B", (5,))):
            for k in ks:
                dep = sm.Deployment(method="draft" if draft else "", draft=draft, k=k, tensor_parallel_size=tp, max_num_seqs=64)
                for concurrency in (1, 8, 64):
                    for a, metric in ((0.8, "tpot"), (0.6, "step")):
                        exact = sm.MeasuredPoint(dep, concurrency, 1.0, a, metric=metric).model_s(truth)
                        points.append(sm.MeasuredPoint(dep, concurrency, exact * (1 + rng.gauss(0, noise)), a, metric=metric))
    return points


TRUTH = sm.Profile(overhead_s=0.012, bandwidth_efficiency=0.6, compute_efficiency=0.35, draft_overhead_s=0.0015)


def test_calibration_recovers_known_parameters_exactly():
    points = synthetic_points(TRUTH)
    assert sm.identifiable(points) == sm.FREE
    fit = sm.fit_profile(points, sm.Profile())
    assert fit.fitted == sm.FREE
    for name in ("overhead_s", "bandwidth_efficiency", "compute_efficiency", "draft_overhead_s"):
        assert getattr(fit.profile, name) == pytest.approx(getattr(TRUTH, name), rel=1e-6), name
    assert max(abs(r.relative) for r in fit.residuals) < 1e-9


def test_calibration_recovers_them_through_noise():
    fit = sm.fit_profile(synthetic_points(TRUTH, noise=0.01, seed=4), sm.Profile())
    assert fit.profile.overhead_s == pytest.approx(TRUTH.overhead_s, rel=0.03)
    assert fit.profile.draft_overhead_s == pytest.approx(TRUTH.draft_overhead_s, rel=0.1)
    assert fit.profile.compute_efficiency == pytest.approx(TRUTH.compute_efficiency, rel=0.05)
    assert fit.profile.bandwidth_efficiency == pytest.approx(TRUTH.bandwidth_efficiency, rel=0.15)
    assert 0.005 < fit.rms_relative < 0.02  # the noise, not the model


def test_one_deployment_cannot_tell_bandwidth_from_overhead():
    points = [
        p for p in synthetic_points(TRUTH) if p.deployment.tensor_parallel_size == 32 and p.deployment.draft in ("", "Qwen/Qwen3-1.7B")
    ]
    assert sm.identifiable(points) == ("overhead_s", "inverse_compute_efficiency", "draft_overhead_s")
    start = sm.Profile(bandwidth_efficiency=TRUTH.bandwidth_efficiency)
    fit = sm.fit_profile(points, start)
    assert fit.profile.overhead_s == pytest.approx(TRUTH.overhead_s, rel=1e-6)
    assert fit.profile.draft_overhead_s == pytest.approx(TRUTH.draft_overhead_s, rel=1e-6)
    with pytest.raises(ValueError, match="cannot tell the free parameters apart"):
        sm.fit_profile(points, start, sm.FREE)
    with pytest.raises(ValueError, match="1 point\\(s\\) cannot fix 2 parameters"):
        sm.fit_profile(points[:1], start, ("overhead_s", "draft_overhead_s"))
    with pytest.raises(ValueError, match="unknown; allowed"):
        sm.fit_profile(points, start, ("latency",))


def test_the_writeup_anchor_is_reproduced():
    profile = sm.writeup_profile()
    base = sm.predict(BASE, profile, 0.9, 4)
    spec = sm.predict(DRAFT, profile, 0.9, 4)
    assert base.tpot_s == pytest.approx(0.045, rel=1e-9) and spec.tpot_s == pytest.approx(0.015, rel=1e-9)
    # The bandwidth bound is ~2.8 ms: the measured step is ~16x it, the overhead carries the rest.
    assert base.step_s / sm.weight_bound_s(BASE) == pytest.approx(16.3, abs=0.3)
    assert 0.038 < profile.overhead_s < 0.043 and 0.004 < profile.draft_overhead_s < 0.007
    assert spec.tokens_per_step == pytest.approx(theory.expected_tokens_per_step(0.9, 7))


def test_speedup_falls_with_the_batch_and_crosses_over():
    profile = sm.Profile(overhead_s=0.002, bandwidth_efficiency=0.7, compute_efficiency=0.1, draft_overhead_s=0.0002)
    dep = sm.Deployment(method="draft", draft="Qwen/Qwen3-0.6B", k=4, max_num_seqs=512)
    gains = [sm.speedup(dep, profile, 0.6, c) for c in (1, 4, 16, 64, 256)]
    assert gains == sorted(gains, reverse=True) and gains[0] > 1 > gains[-1]
    cross = sm.crossover_concurrency(dep, profile, 0.6)
    assert cross is not None
    below, above = math.floor(cross), math.ceil(cross)
    assert sm.speedup(dep, profile, 0.6, below) > 1 >= sm.speedup(dep, profile, 0.6, above)
    # Higher acceptance pays longer; beyond max_num_seqs nothing changes, so a small batch limit never crosses.
    assert (sm.crossover_concurrency(dep, profile, 0.9) or math.inf) > cross
    assert sm.crossover_concurrency(sm.Deployment(method="draft", draft="Qwen/Qwen3-0.6B", k=4, max_num_seqs=4), profile, 0.6) is None
    k, best = sm.best_k(dep, profile, 0.9, 1)
    assert best == max(sm.speedup(dep.with_k(j), profile, 0.9, 1) for j in range(1, 16)) and 1 <= k <= 15


def test_queueing_beyond_max_num_seqs_adds_to_ttft_only():
    profile = sm.writeup_profile()
    four, eight = sm.predict(BASE, profile, 0.0, 4), sm.predict(BASE, profile, 0.0, 8)
    assert eight.tpot_s == pytest.approx(four.tpot_s) and eight.tokens_per_s_per_node == pytest.approx(four.tokens_per_s_per_node)
    # Little's law: 8 clients over a replica serving 4 at a time wait about one request's time in a slot.
    assert eight.ttft_s - four.ttft_s == pytest.approx(four.e2e_s, rel=0.01)


def test_profile_round_trips_and_rejects_unknown_fields():
    profile = sm.Profile(overhead_s=0.01, bandwidth_efficiency=None)
    assert sm.Profile.from_dict(profile.to_dict()) == profile
    assert sm.Profile.from_dict({"overhead_s": 0.02}, profile).bandwidth_efficiency is None
    with pytest.raises(ValueError, match="unknown field\\(s\\) speed; allowed"):
        sm.Profile.from_dict({"speed": 1})
    with pytest.raises(ValueError, match="compute_efficiency must be a number > 0"):
        sm.Profile(compute_efficiency=0)
