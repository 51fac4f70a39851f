"""Exact values of specbench/analysis/serving_model.py, the first stage of its mutation run (issue 24,
scripts/mutation.toml): parameter counts by hand from the models' config.json, step times term by
term, a closed loop's figures on a flat profile (every step a known number of seconds), the
calibration recovering known parameters from synthetic points, the crossover and best k, the messages
and the profile file."""

from __future__ import annotations

import dataclasses
import math

import pytest

from specbench.analysis import serving_model as sm
from specbench.analysis import theory

DRAFT = sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=7)
BASE = DRAFT.with_k(0)
BW, PEAK = 8 * 2.9e12, 8 * 667e12  # TP 32 at LNC 2: 8 chips
# Flat: no bandwidth or compute term, so a decode step is overhead + k x draft overhead exactly.
FLAT = sm.Profile(overhead_s=0.04, bandwidth_efficiency=None, compute_efficiency=None, draft_overhead_s=0.005)
TRUTH = sm.Profile(overhead_s=0.012, bandwidth_efficiency=0.6, compute_efficiency=0.35, draft_overhead_s=0.0015)


def rel(value, tolerance=1e-12):
    return pytest.approx(value, rel=tolerance)


def test_the_hardware_and_the_registry():
    assert sm.BYTES_PER_PARAM == 2
    assert sm.TRN2_48XLARGE == sm.Hardware("trn2.48xlarge", 16, 8, 96.0, 2.9e12, 667e12)
    assert sm.TRN2_3XLARGE == sm.Hardware("trn2.3xlarge", 1, 8, 96.0, 2.9e12, 667e12)  # one chip of the same figures
    assert sm.HARDWARE == {"trn2.48xlarge": sm.TRN2_48XLARGE, "trn2.3xlarge": sm.TRN2_3XLARGE}
    assert sm.METHODS == ("", "draft", "eagle3")
    known = {"Qwen/Qwen3-32B", "Qwen/Qwen3-14B", "Qwen/Qwen3-8B", "Qwen/Qwen3-4B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"}
    assert set(sm.MODELS) == known and sm.EAGLE3_DRAFT_VOCAB == 32_000
    assert sm.model_shape("Qwen/Qwen3-0.6B") is sm.QWEN3_0_6B
    with pytest.raises(ValueError) as error:
        sm.model_shape("x/y")
    assert (
        str(error.value)
        == "model 'x/y' has no recorded geometry; known: Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-14B, Qwen/Qwen3-32B, Qwen/Qwen3-4B, Qwen/Qwen3-8B"
    )


def test_parameter_counts_by_hand():
    # Qwen3-32B: attention 5120 x (64 + 2 x 8) x 128 + 64 x 128 x 5120, SwiGLU 3 x 5120 x 25600, norms 2 x 5120 + 2 x 128.
    m = sm.QWEN3_32B
    assert m.layer_params == 52_428_800 + 41_943_040 + 393_216_000 + 10_496
    assert (m.embedding_params, m.lm_head_params) == (777_912_320, 777_912_320)  # untied
    assert m.params == 64 * 487_598_336 + 2 * 777_912_320 + 5120 == 32_762_123_264
    assert m.streamed_params == m.params - 777_912_320 and m.weight_bytes == 2 * m.streamed_params
    assert m.flops_per_token == 2 * 31_984_210_944
    # Qwen3-1.7B (tied): the embedding is the output layer, read in full each step.
    m = sm.QWEN3_1_7B
    assert m.layer_params == 8_388_608 + 4_194_304 + 37_748_736 + 4352 == 50_336_000
    assert (m.embedding_params, m.lm_head_params) == (311_164_928, 0)
    assert m.params == m.streamed_params == 28 * 50_336_000 + 311_164_928 + 2048 == 1_720_574_976
    assert sm.QWEN3_0_6B.params == 28 * 15_730_944 + 155_582_464 + 1024 == 596_049_920
    # A tied model with its own output vocabulary pays for that layer.
    odd = sm.ModelShape("odd", 1, 8, 16, 2, 1, 4, 100, True, lm_head_vocab=10)
    assert odd.lm_head_params == 80 and odd.embedding_params == 800 and odd.streamed_params == odd.params - 800


def test_an_eagle3_head_is_one_target_layer_with_a_fusion_layer_and_a_draft_vocabulary():
    head = sm.eagle3_head(sm.QWEN3_32B)
    assert head.name == "eagle3-head" and sm.eagle3_head(sm.QWEN3_32B, "h").name == "h"
    assert (head.layers, head.hidden, head.intermediate, head.heads, head.kv_heads, head.head_dim) == (1, 5120, 25600, 64, 8, 128)
    assert (head.vocab, head.tied_embeddings, head.embeddings, head.lm_head_vocab) == (151_936, False, False, 32_000)
    assert head.extra_params == 3 * 5120 * 5120 + 5120 * 64 * 128 == 120_586_240
    assert (head.embedding_params, head.lm_head_params) == (0, 32_000 * 5120)
    assert head.params == head.streamed_params == 487_598_336 + 163_840_000 + 120_586_240 + 5120
    eagle = sm.Deployment(method="eagle3", k=3)
    assert eagle.draft_shape == head
    assert sm.Deployment(method="eagle3", draft="org/head", k=3).draft_shape.name == "org/head"
    assert BASE.draft_shape is None and DRAFT.draft_shape is sm.QWEN3_1_7B


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"method": "medusa"}, "method must be one of '', draft, eagle3; got 'medusa'"),
        ({"k": -1}, "k must be an integer >= 0; got -1"),
        ({"method": "draft", "draft": "Qwen/Qwen3-1.7B", "k": True}, "k must be an integer >= 0; got True"),
        ({"k": 3}, "k must be 0 without a speculation method; got 3"),
        ({"method": "draft", "draft": "Qwen/Qwen3-1.7B", "k": 0}, "k must be an integer >= 1 with a speculation method; got 0"),
        ({"max_num_seqs": 0}, "max_num_seqs must be an integer >= 1; got 0"),
        ({"max_num_seqs": 2.0}, "max_num_seqs must be an integer >= 1; got 2.0"),
        ({"lnc": 4}, "lnc must be 1 or 2; got 4"),
        ({"node_type": "trn1.32xlarge"}, "node_type must be one of trn2.48xlarge, trn2.3xlarge; got 'trn1.32xlarge'"),
        ({"tensor_parallel_size": 30}, "tensor_parallel_size must be a multiple of 4 (logical cores per device at LNC 2); got 30"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size must be a multiple of 4 (logical cores per device at LNC 2); got 0"),
        ({"tensor_parallel_size": 32.0}, "tensor_parallel_size must be a multiple of 4 (logical cores per device at LNC 2); got 32.0"),
        ({"tensor_parallel_size": 4, "lnc": 1}, "tensor_parallel_size must be a multiple of 8 (logical cores per device at LNC 1); got 4"),
        ({"tensor_parallel_size": 68}, "tensor_parallel_size must be at most 16 devices of a node; got 68"),
        ({"target": "x/y"}, "model 'x/y' has no recorded geometry"),
        ({"method": "draft", "draft": "x/y", "k": 2}, "model 'x/y' has no recorded geometry"),
    ],
)
def test_a_bad_deployment_is_one_line_naming_the_field(changes, message):
    with pytest.raises(ValueError) as error:
        sm.Deployment(**changes)
    if message.startswith("model"):  # model_shape's own message, with the known models
        assert str(error.value).startswith(message + "; known: ")
    else:
        assert str(error.value) == f"serving model: {message}"


def test_the_topology_of_a_deployment():
    assert (BASE.devices, BASE.replicas_per_node) == (8, 2)
    assert (sm.Deployment(tensor_parallel_size=64).devices, sm.Deployment(tensor_parallel_size=64).replicas_per_node) == (16, 1)
    assert (sm.Deployment(tensor_parallel_size=16).devices, sm.Deployment(tensor_parallel_size=16).replicas_per_node) == (4, 4)
    lnc1 = sm.Deployment(tensor_parallel_size=40, lnc=1)
    assert (lnc1.devices, lnc1.replicas_per_node) == (5, 3)
    assert sm.Deployment(tensor_parallel_size=128, lnc=1).devices == 16
    assert BASE.hardware is sm.TRN2_48XLARGE and BASE.target_shape is sm.QWEN3_32B
    assert sm.Deployment(method="eagle3", k=2).draft == "" and sm.Deployment(method="", k=0).k == 0
    assert DRAFT.with_k(3) == sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=3)
    assert DRAFT.with_k(0) == sm.Deployment() and BASE == sm.Deployment(tensor_parallel_size=32, max_num_seqs=4)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"overhead_s": -0.001}, "overhead_s must be a number >= 0 (seconds); got -0.001"),
        ({"overhead_s": math.inf}, "overhead_s must be a number >= 0 (seconds); got inf"),
        ({"overhead_s": True}, "overhead_s must be a number >= 0 (seconds); got True"),
        ({"draft_overhead_s": math.nan}, "draft_overhead_s must be a number >= 0 (seconds); got nan"),
        ({"draft_overhead_s": "1"}, "draft_overhead_s must be a number >= 0 (seconds); got '1'"),
        (
            {"bandwidth_efficiency": 0},
            "bandwidth_efficiency must be a number > 0 (a share of the peak), or null to leave the term out; got 0",
        ),
        (
            {"compute_efficiency": -0.5},
            "compute_efficiency must be a number > 0 (a share of the peak), or null to leave the term out; got -0.5",
        ),
        (
            {"compute_efficiency": math.inf},
            "compute_efficiency must be a number > 0 (a share of the peak), or null to leave the term out; got inf",
        ),
        (
            {"compute_efficiency": False},
            "compute_efficiency must be a number > 0 (a share of the peak), or null to leave the term out; got False",
        ),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_field(changes, message):
    with pytest.raises(ValueError) as error:
        sm.Profile(**changes)
    assert str(error.value) == f"serving model: {message}"


def test_profiles_their_defaults_and_their_dictionaries():
    assert sm.DEFAULT_PROFILE == sm.Profile(0.0, 0.7, 0.5, 0.0) == sm.Profile()
    assert sm.Profile(0, 1, 2, 0) == sm.Profile(overhead_s=0, bandwidth_efficiency=1, compute_efficiency=2)  # > 1 is allowed
    assert FLAT.to_dict() == {"overhead_s": 0.04, "bandwidth_efficiency": None, "compute_efficiency": None, "draft_overhead_s": 0.005}
    assert sm.Profile.from_dict({"overhead_s": 0.02}) == sm.Profile(overhead_s=0.02)
    assert sm.Profile.from_dict({"overhead_s": 0.02}, FLAT) == sm.Profile(0.02, None, None, 0.005)
    with pytest.raises(ValueError) as error:
        sm.Profile.from_dict({"speed": 1, "alpha": 2})
    assert str(error.value) == (
        "profile: unknown field(s) alpha, speed; allowed: bandwidth_efficiency, compute_efficiency, draft_overhead_s, overhead_s"
    )


def test_a_decode_step_term_by_term():
    profile = sm.Profile(overhead_s=0.01, bandwidth_efficiency=0.5, compute_efficiency=0.25, draft_overhead_s=0.002)
    step = sm.decode_step(DRAFT, profile, 4)
    target_bytes, target_flops = 2 * 31_984_210_944, 2 * 31_984_210_944
    draft_bytes, draft_flops = 2 * 1_720_574_976, 2 * 1_720_574_976
    assert step.tokens == 32
    assert step.weights_s == rel(target_bytes / (BW * 0.5))
    assert step.compute_s == rel(32 * target_flops / (PEAK * 0.25))
    assert step.overhead_s == 0.01
    one_draft = draft_bytes / (BW * 0.5) + 4 * draft_flops / (PEAK * 0.25) + 0.002
    assert sm.draft_step_s(DRAFT, profile, 4) == rel(one_draft)
    assert step.draft_s == rel(7 * one_draft)
    assert step.total_s == rel(step.weights_s + step.compute_s + 0.01 + 7 * one_draft)
    plain = sm.decode_step(BASE, profile, 3)
    assert (plain.tokens, plain.draft_s) == (3, 0.0) and plain.compute_s == rel(3 * target_flops / (PEAK * 0.25))
    assert sm.draft_step_s(BASE, profile, 4) == 0.0
    assert sm.weight_bound_s(BASE) == rel(target_bytes / BW)
    assert sm.StepTime(1.0, 2.0, 4.0, 8.0, 3).total_s == 15.0
    # A term left out (None) costs nothing.
    assert sm.decode_step(DRAFT, FLAT, 64) == sm.StepTime(0.0, 0.0, 0.04, 7 * 0.005, 64 * 8)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError) as error:
            sm.decode_step(DRAFT, FLAT, bad)
        assert str(error.value) == f"serving model: batch must be an integer >= 1; got {bad!r}"


def test_a_prefill_step_processes_every_prompt_token_on_target_and_draft():
    profile = sm.Profile(overhead_s=0.01, bandwidth_efficiency=0.5, compute_efficiency=0.25, draft_overhead_s=0.002)
    step = sm.prefill_step(DRAFT, profile, [64, 36])
    target_bytes = 2 * 31_984_210_944
    draft = 2 * 1_720_574_976
    assert step.tokens == 100
    assert step.weights_s == rel(target_bytes / (BW * 0.5))
    assert step.compute_s == rel(100 * target_bytes / (PEAK * 0.25))
    assert step.draft_s == rel(draft / (BW * 0.5) + 100 * draft / (PEAK * 0.25) + 0.002)
    assert sm.prefill_step(BASE, profile, [64]).draft_s == 0.0
    assert sm.prefill_step(DRAFT, FLAT, [1]) == sm.StepTime(0.0, 0.0, 0.04, 0.005, 1)
    for bad in ([], [0], [64, 0], [2.5]):
        with pytest.raises(ValueError) as error:
            sm.prefill_step(DRAFT, FLAT, bad)
        assert str(error.value) == f"serving model: prompt_tokens must be integers >= 1; got {bad!r}"


def test_a_closed_loop_on_a_flat_profile():
    assert sm.Workload() == sm.DEFAULT_WORKLOAD == sm.Workload(64, 600)
    # Baseline, 4 clients: 599 decode steps of 40 ms, and 3 prefills (40 ms) of the others interrupt them.
    p = sm.predict(BASE, FLAT, 0.5, 4)
    decode = 599 * 0.04 + 3 * 0.04
    assert (p.concurrency, p.batch, p.tokens_per_step) == (4, 4, 1.0)
    assert (p.step_s, p.prefill_s) == (0.04, 0.04)
    assert p.tpot_s == rel(decode / 599) and p.ttft_s == 0.04 and p.e2e_s == rel(0.04 + decode)
    # 4 requests per 24.12 s in a slot, 600 tokens each, 2 replicas per node.
    assert p.tokens_per_s_per_node == rel(4 / (0.04 + decode) * 600 * 2)
    # 8 clients: the surplus 4 wait one request's time in a slot; the rest is unchanged.
    q = sm.predict(BASE, FLAT, 0.0, 8)
    assert q.batch == 4 and q.tpot_s == rel(p.tpot_s) and q.ttft_s == rel(0.04 + (0.04 + decode))
    assert q.e2e_s == rel(q.ttft_s + decode) and q.tokens_per_s_per_node == rel(p.tokens_per_s_per_node)
    # Speculative, a = 0.5, k = 7: E = 2 - 2^-7 tokens a step of 40 + 7 x 5 ms; prefill 45 ms.
    s = sm.predict(DRAFT, FLAT, 0.5, 2, sm.Workload(10, 101))
    tokens = 2 - 0.5**7
    decode = 100 / tokens * 0.075 + 1 * 0.045
    assert s.tokens_per_step == rel(tokens) and (s.step_s, s.prefill_s) == (rel(0.075), rel(0.045))
    assert s.tpot_s == rel(decode / 100) and s.e2e_s == rel(0.045 + decode)
    assert s.tokens_per_s_per_node == rel(2 / (0.045 + decode) * 101 * 2)
    # One output token: no decode.
    one = sm.predict(BASE, FLAT, 0.0, 1, sm.Workload(64, 1))
    assert (one.tpot_s, one.e2e_s, one.ttft_s) == (0.0, 0.04, 0.04)
    assert one.tokens_per_s_per_node == rel(1 / 0.04 * 1 * 2)
    with pytest.raises(ValueError) as error:
        sm.predict(BASE, FLAT, 0.0, 0)
    assert str(error.value) == "serving model: concurrency must be an integer >= 1; got 0"


def test_speedup_best_k_and_the_crossover():
    # Flat: the speedup is E(a, k) x 40 ms / (40 + 5 k) ms per token (prefills aside: 1 client has none).
    assert sm.speedup(DRAFT, FLAT, 0.5, 1) == rel(theory.expected_tokens_per_step(0.5, 7) * 0.04 / 0.075)
    k, best = sm.best_k(DRAFT, FLAT, 0.8, 1, k_max=15)
    scores = {j: theory.expected_tokens_per_step(0.8, j) * 0.04 / (0.04 + 0.005 * j) for j in range(1, 16)}
    assert k == max(scores, key=scores.get) and best == rel(scores[k])
    assert sm.best_k(DRAFT, FLAT, 0.8, 1, k_max=2) == (2, rel(scores[2]))
    # a = 0: every k loses the same way... no: longer k loses more, so k = 1 is best.
    assert sm.best_k(DRAFT, FLAT, 0.0, 1)[0] == 1
    # Equal speedups (no draft cost, a = 1 gives k + 1 tokens: the longest wins; ties go to the shorter k).
    free = sm.Profile(overhead_s=0.04, bandwidth_efficiency=None, compute_efficiency=None)
    assert sm.best_k(DRAFT, free, 0.0, 1, k_max=4) == (1, rel(1.0))
    with pytest.raises(ValueError) as error:
        sm.best_k(BASE, FLAT, 0.8, 1)
    assert str(error.value) == "best_k needs a speculation method (draft or eagle3)"
    # Compute-bound enough that the gain falls with the batch: the crossover interpolates linearly.
    profile = sm.Profile(overhead_s=0.002, bandwidth_efficiency=0.7, compute_efficiency=0.1, draft_overhead_s=0.0002)
    dep = sm.Deployment(method="draft", draft="Qwen/Qwen3-0.6B", k=4, max_num_seqs=512)
    gains = {c: sm.speedup(dep, profile, 0.6, c) - 1 for c in range(1, 513)}
    first = min(c for c, g in gains.items() if g <= 0)
    cross = first - 1 + gains[first - 1] / (gains[first - 1] - gains[first])
    assert sm.crossover_concurrency(dep, profile, 0.6) == rel(cross)
    assert sm.crossover_concurrency(dep, profile, 0.6, limit=first - 1) is None
    assert sm.crossover_concurrency(dep, profile, 0.6, limit=first) == rel(cross)
    assert sm.crossover_concurrency(dep, profile, 0.05) == 1.0  # never pays
    assert sm.crossover_concurrency(dep, profile, 0.6, sm.Workload(64, 600), limit=1) is None
    # No draft cost, no acceptance: a speedup of exactly 1 at one client already does not pay.
    free_draft = sm.Profile(overhead_s=0.04, bandwidth_efficiency=None, compute_efficiency=None, draft_overhead_s=0.0)
    assert sm.crossover_concurrency(DRAFT, free_draft, 0.0) == 1.0


def test_measured_points_validate_and_model_their_metric():
    point = sm.MeasuredPoint(DRAFT, 8, 0.05, 0.5, metric="step")
    assert point.model_s(FLAT) == rel(0.075)  # the batch capped at max_num_seqs 4
    assert sm.MeasuredPoint(BASE, 4, 0.05).model_s(FLAT) == rel(sm.predict(BASE, FLAT, 0.0, 4).tpot_s)
    assert (point.label, sm.MeasuredPoint(BASE, 4, 0.05).metric, point.workload) == ("", "tpot", sm.Workload())
    cases = [
        ({"metric": "e2e"}, "metric must be step or tpot; got 'e2e'"),
        ({"concurrency": 0}, "concurrency must be an integer >= 1; got 0"),
        ({"concurrency": True}, "concurrency must be an integer >= 1; got True"),
        ({"value_s": 0.0}, "value_s must be a number > 0 (seconds); got 0.0"),
        ({"value_s": "1"}, "value_s must be a number > 0 (seconds); got '1'"),
    ]
    for changes, message in cases:
        with pytest.raises(ValueError) as error:
            sm.MeasuredPoint(**{"deployment": BASE, "concurrency": 4, "value_s": 0.05, **changes})
        assert str(error.value) == f"serving model: {message}"


def test_the_design_row_is_the_model_linear_in_its_four_parameters():
    profiles = [TRUTH, sm.Profile(0.003, 0.9, 0.2, 0.0007), sm.Profile(0.01, None, 0.3, 0.001)]
    for dep in (DRAFT, BASE, sm.Deployment(method="eagle3", k=3, tensor_parallel_size=16, max_num_seqs=8)):
        for concurrency in (1, 3, 8, 20):
            for metric in ("step", "tpot"):
                point = sm.MeasuredPoint(dep, concurrency, 1.0, 0.7, metric=metric, workload=sm.Workload(32, 200))
                row = sm.design_row(point)
                for profile in profiles:
                    assert math.fsum(r * x for r, x in zip(row, sm.profile_vector(profile), strict=True)) == rel(
                        point.model_s(profile), 1e-9
                    )
    # By hand: a plain step's row is (1, weights / bandwidth, tokens x FLOPs / peak, 0).
    assert sm.design_row(sm.MeasuredPoint(BASE, 3, 1.0, metric="step")) == rel(
        (1.0, 2 * 31_984_210_944 / BW, 3 * 2 * 31_984_210_944 / PEAK, 0.0)
    )
    with pytest.raises(ValueError) as error:
        sm.design_row(sm.MeasuredPoint(BASE, 3, 1.0, workload=sm.Workload(64, 1)))
    assert str(error.value) == "serving model: a TPOT needs output_tokens >= 2"


def test_profile_vectors():
    assert sm.profile_vector(sm.Profile(0.01, 0.5, 0.25, 0.002)) == (0.01, 2.0, 4.0, 0.002)
    assert sm.profile_vector(FLAT) == (0.04, 0.0, 0.0, 0.005)
    assert sm.vector_profile((0.01, 2.0, 4.0, 0.002)) == sm.Profile(0.01, 0.5, 0.25, 0.002)
    assert sm.vector_profile((-0.01, 0.0, -1.0, -0.002)) == sm.Profile(0.0, None, None, 0.0)


def test_residuals_and_the_fit_rms():
    assert sm.Residual("x", 2.0, 2.5).relative == 0.25 and sm.Residual("x", 2.0, 1.5).relative == -0.25
    assert sm.Residual("x", 0.0, 1.0).relative == math.inf
    assert sm.Fit(FLAT, ()).rms_relative == 0.0
    assert sm.Fit(FLAT, (), [sm.Residual("a", 1.0, 1.3), sm.Residual("b", 1.0, 0.9)]).rms_relative == rel(math.sqrt((0.09 + 0.01) / 2))


def synthetic(truth: sm.Profile, tps=(16, 32), drafts=("", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B")) -> list[sm.MeasuredPoint]:
    points = []
    for tp in tps:
        for draft in drafts:
            for k in (0,) if not draft else (3, 6):
                dep = sm.Deployment(method="draft" if draft else "", draft=draft, k=k, tensor_parallel_size=tp, max_num_seqs=64)
                for concurrency in (1, 16, 64):
                    for a, metric in ((0.8, "tpot"), (0.6, "step")):
                        value = sm.MeasuredPoint(dep, concurrency, 1.0, a, metric=metric).model_s(truth)
                        points.append(sm.MeasuredPoint(dep, concurrency, value, a, f"{tp}/{draft}/{k}/{concurrency}", metric))
    return points


def test_the_fit_recovers_known_parameters_from_synthetic_points():
    assert sm.FREE == ("overhead_s", "inverse_bandwidth_efficiency", "inverse_compute_efficiency", "draft_overhead_s")
    assert sm.IDENTIFIABLE_SHARE == 0.05
    points = synthetic(TRUTH)
    fit = sm.fit_profile(points, sm.Profile(0.5, 0.1, 0.9, 0.3))
    assert fit.fitted == sm.FREE
    assert fit.profile.overhead_s == rel(0.012, 1e-9) and fit.profile.draft_overhead_s == rel(0.0015, 1e-9)
    assert fit.profile.bandwidth_efficiency == rel(0.6, 1e-9) and fit.profile.compute_efficiency == rel(0.35, 1e-9)
    assert fit.rms_relative < 1e-12 and [r.label for r in fit.residuals] == [p.label for p in points]
    assert fit.residuals[0].measured_s == points[0].value_s and fit.residuals[0].fitted_s == rel(points[0].value_s, 1e-9)
    # The defaults: every identifiable parameter, from the default profile.
    assert sm.fit_profile(points).profile.overhead_s == rel(0.012, 1e-9)


def test_held_parameters_stay_at_the_start_and_the_others_absorb_them():
    # One TP, one draft: bandwidth moves with the overheads, so it is held at the starting value.
    points = synthetic(TRUTH, tps=(32,), drafts=("", "Qwen/Qwen3-1.7B"))
    assert sm.identifiable(points) == ("overhead_s", "inverse_compute_efficiency", "draft_overhead_s")
    fit = sm.fit_profile(points, sm.Profile(bandwidth_efficiency=0.6))
    assert fit.fitted == ("overhead_s", "inverse_compute_efficiency", "draft_overhead_s")
    assert fit.profile.bandwidth_efficiency == 0.6
    assert (fit.profile.overhead_s, fit.profile.compute_efficiency, fit.profile.draft_overhead_s) == (
        rel(0.012, 1e-9),
        rel(0.35, 1e-9),
        rel(0.0015, 1e-9),
    )
    # Fitting two, the others held at the truth, recovers the two exactly.
    fit = sm.fit_profile(points, sm.Profile(0.0, 0.6, 0.35, 0.0), ("overhead_s", "draft_overhead_s"))
    assert (fit.profile.overhead_s, fit.profile.draft_overhead_s) == (rel(0.012, 1e-9), rel(0.0015, 1e-9))
    assert fit.profile.compute_efficiency == 0.35
    # Nothing free: the start, its residuals.
    held = sm.fit_profile(points, TRUTH, ())
    assert held.profile == TRUTH and held.fitted == () and held.rms_relative < 1e-12
    # Baseline points only: no draft column; one load, no compute column either.
    plain = [p for p in points if not p.deployment.k and p.concurrency == 1]
    assert sm.identifiable(plain) == ("overhead_s",)
    assert sm.identifiable([p for p in points if not p.deployment.k]) == ("overhead_s", "inverse_compute_efficiency")


def test_the_fit_says_what_it_cannot_do_in_one_line():
    points = synthetic(TRUTH, tps=(32,), drafts=("", "Qwen/Qwen3-1.7B"))
    with pytest.raises(ValueError) as error:
        sm.fit_profile([])
    assert str(error.value) == "calibration needs at least one measured point"
    with pytest.raises(ValueError) as error:
        sm.fit_profile(points, TRUTH, ("latency", "overhead_s", "speed"))
    assert str(error.value) == f"free parameter(s) latency, speed unknown; allowed: {', '.join(sm.FREE)}"
    with pytest.raises(ValueError) as error:
        sm.fit_profile(points[:1], TRUTH, ("overhead_s", "draft_overhead_s"))
    assert str(error.value) == "calibration: 1 point(s) cannot fix 2 parameters"
    with pytest.raises(ValueError) as error:
        sm.fit_profile(points, TRUTH, sm.FREE)
    assert str(error.value) == "calibration: the points cannot tell the free parameters apart (vary the batch, k or the method)"
    assert sm._least_squares([], []) == []
    # A well-posed 2 x 2 system by hand: x + y = 3, x - y = 1, scaled columns.
    assert sm._least_squares([[1.0, 1.0], [1.0, -1.0]], [3.0, 1.0]) == rel([2.0, 1.0])
    assert sm._least_squares([[0.0, 2.0], [3.0, 0.0], [1.0, 1.0]], [4.0, 3.0, 3.0]) == rel([1.0, 2.0])


def test_the_writeup_anchor():
    assert (sm.WRITEUP_BASELINE_STEP_S, sm.WRITEUP_SPECULATIVE_TPOT_S, sm.WRITEUP_STRUCTURED_ACCEPTANCE) == (0.045, 0.015, 0.9)
    assert sm.WRITEUP_DEPLOYMENT == sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=7)
    base, spec = sm.writeup_points()
    assert base == sm.MeasuredPoint(BASE, 4, 0.045, 0.0, "write-up baseline, 45 ms per token")
    assert spec == sm.MeasuredPoint(DRAFT, 4, 0.015, 0.9, "write-up structured, draft k=7, 15 ms per token")
    profile = sm.writeup_profile()
    assert (profile.bandwidth_efficiency, profile.compute_efficiency) == (0.7, 0.5)
    assert sm.predict(BASE, profile, 0.0, 4).tpot_s == rel(0.045, 1e-9)
    assert sm.predict(DRAFT, profile, 0.9, 4).tpot_s == rel(0.015, 1e-9)


def test_the_assumptions_and_the_profile_document():
    assert sm.ASSUMPTIONS == (
        "a decode step reads the target's BF16 weights once (HBM bandwidth x efficiency) and computes 2 x params FLOPs "
        "per processed token (dense BF16 peak x efficiency), plus a fixed overhead per step",
        "speculation: k draft (or EAGLE3 head) steps on the same devices, then the target verifies k + 1 positions per sequence",
        "tokens per step E = (1 - a^(k+1)) / (1 - a) (Leviathan et al.); a per prompt class, constant over the output",
        "prefill runs in its own steps (vLLM V0, Neuron schedulers); a closed loop of clients; at most max_num_seqs run, the rest queue",
        "left out: KV-cache reads of attention (short contexts), collectives beyond the overhead, compiled-bucket padding",
    )
    assert sm.PROFILE_FORMAT == "specbench-serving-profile/1"
    assert sm.profile_document(FLAT) == {"format": "specbench-serving-profile/1", "profile": FLAT.to_dict()}
    fit = sm.Fit(FLAT, ("overhead_s",), [sm.Residual("p", 0.05, 0.04)])
    document = sm.profile_document(FLAT, DRAFT, fit)
    assert document["deployment"] == {
        "target": "Qwen/Qwen3-32B",
        "method": "draft",
        "draft": "Qwen/Qwen3-1.7B",
        "k": 7,
        "tensor_parallel_size": 32,
        "lnc": 2,
        "max_num_seqs": 4,
        "node_type": "trn2.48xlarge",
    }
    assert document["fitted"] == ["overhead_s"] and document["residuals"] == [{"label": "p", "measured_s": 0.05, "fitted_s": 0.04}]
    assert sm.read_profile_document(document) == (FLAT, DRAFT)
    assert sm.read_profile_document({"profile": {"overhead_s": 0.02}}, FLAT) == (sm.Profile(0.02, None, None, 0.005), None)
    assert sm.read_profile_document({"format": None, "profile": {}}) == (sm.DEFAULT_PROFILE, None)
    assert sm.read_profile_document({"overhead_s": 0.03}) == (sm.Profile(overhead_s=0.03), None)  # a bare profile
    assert sm.read_profile_document({"overhead_s": 0.03}, FLAT) == (sm.Profile(0.03, None, None, 0.005), None)
    assert sm.read_profile_document({"profile": {}, "deployment": None}) == (sm.DEFAULT_PROFILE, None)
    bad = [
        ([], "profile file: expected a JSON object"),
        ({"format": "v2", "profile": {}}, "profile file: format 'v2' unknown; expected specbench-serving-profile/1"),
        ({"profile": {}, "deployment": []}, "profile file: deployment must be an object"),
        (
            {"profile": {}, "deployment": {"k": 1, "zz": 2, "aa": 3}},
            "profile file: deployment has unknown field(s) aa, zz; allowed: "
            "draft, k, lnc, max_num_seqs, method, node_type, target, tensor_parallel_size",
        ),
    ]
    for data, message in bad:
        with pytest.raises(ValueError) as error:
            sm.read_profile_document(data)
        assert str(error.value) == message


def test_the_values_are_immutable_and_their_defaults_plain():
    shape = sm.ModelShape("m", 1, 8, 16, 2, 1, 4, 100, True)
    assert (shape.extra_params, shape.lm_head_vocab, shape.embeddings) == (0, 0, True)
    assert sm.MeasuredPoint(DRAFT, 4, 0.05).a == 0.0
    assert sm.Fit(FLAT, ()).residuals == []
    assert isinstance(BASE.devices, int) and isinstance(BASE.replicas_per_node, int)
    assert sm.Deployment(max_num_seqs=1).max_num_seqs == 1
    assert sm.writeup_profile() is sm.writeup_profile()
    values = [
        sm.TRN2_48XLARGE,
        shape,
        BASE,
        FLAT,
        sm.StepTime(0.0, 0.0, 0.0, 0.0, 1),
        sm.Workload(),
        sm.predict(BASE, FLAT, 0.0, 1),
        sm.MeasuredPoint(BASE, 4, 0.05),
        sm.Residual("x", 1.0, 1.0),
        sm.Fit(FLAT, ()),
    ]
    for value in values:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, None)


def test_two_output_tokens_make_one_decode_step_and_a_short_queue():
    two = sm.Workload(64, 2)
    p = sm.predict(BASE, FLAT, 0.0, 4, two)
    assert p.tpot_s == rel(0.04 + 3 * 0.04)  # one decode step and the 3 others' prefills
    # 8 clients over 4 slots: each waits one request's time in a slot (0.2 s), under a second.
    q = sm.predict(BASE, FLAT, 0.0, 8, two)
    assert q.ttft_s == rel(0.04 + (0.04 + 0.16))
    row = sm.design_row(sm.MeasuredPoint(BASE, 4, 0.2, workload=two))
    assert math.fsum(r * x for r, x in zip(row, sm.profile_vector(FLAT), strict=True)) == rel(p.tpot_s)


def test_best_k_allows_up_to_15_by_default():
    assert sm.best_k(DRAFT, FLAT, 0.99, 1)[0] == 15


def test_a_crossover_between_one_and_two_clients():
    # Compute-bound: at a = 0.5 speculation pays for one client and not for two.
    profile = sm.Profile(overhead_s=0.0, bandwidth_efficiency=0.7, compute_efficiency=0.01, draft_overhead_s=0.0)
    dep = sm.Deployment(method="draft", draft="Qwen/Qwen3-0.6B", k=2, max_num_seqs=8)
    g1, g2 = sm.speedup(dep, profile, 0.5, 1) - 1, sm.speedup(dep, profile, 0.5, 2) - 1
    assert g1 > 0 >= g2
    assert sm.crossover_concurrency(dep, profile, 0.5) == rel(1 + g1 / (g1 - g2))


def test_the_prefill_row_and_the_solver_by_hand():
    target = 2 * 31_984_210_944
    assert sm._prefill_row(BASE, 64) == (1.0, target / BW, 64 * target / PEAK, 0.0)
    assert sm.vector_profile((0.0, 1.0, 0.5, 0.0)) == sm.Profile(0.0, 1.0, 2.0, 0.0)
    assert sm._least_squares([[2.0], [4.0]], [1.0, 2.0]) == rel([0.5])
    # Negative coefficients: x = 1, y = 2 from -2x + y = 0 and x + y = 3.
    assert sm._least_squares([[-2.0, 1.0], [1.0, 1.0]], [0.0, 3.0]) == rel([1.0, 2.0])
    # Columns of very different sizes are scaled before the pivot test: 1e-8 x + y = 2e-8 + 1, 2e-8 x + 3y = 4e-8 + 3.
    assert sm._least_squares([[1e-8, 1.0], [2e-8, 3.0]], [2e-8 + 1.0, 4e-8 + 3.0]) == rel([2.0, 1.0], 1e-6)
    # Both columns tiny: unscaled, the normal matrix (1e-28) would fail the pivot test.
    assert sm._least_squares([[1e-14, 0.0], [0.0, 1e-14]], [2e-14, 1e-14]) == rel([2.0, 1.0])
    unlabeled = [sm.MeasuredPoint(BASE, c, sm.predict(BASE, TRUTH, 0.0, c).tpot_s) for c in (1, 4)]
    assert [r.label for r in sm.fit_profile(unlabeled, TRUTH, ("overhead_s",)).residuals] == ["point 0", "point 1"]
