"""Deployments as candidates (specbench/analysis/candidates.py): the fit per rank on the models' and
chips' sourced figures, with every expected number worked out by hand below; KV heads replicated past
TP = KV heads as NxD Inference and vLLM do; the TP counts the Neuron scheduler allocates; the stacks
documented per instance; the chip figures against config/catalog.py."""

from __future__ import annotations

import pytest

from config import catalog, serving_stacks
from specbench.analysis import candidates as cand
from specbench.analysis import serving_model as sm

GIB = 1024**3
STACKS = ("nxdi-draft", "vllm-neuron")
R48 = cand.NodeRules("trn2.48xlarge", (1, 2), (1, 4, 8, 16), STACKS)
R3 = cand.NodeRules("trn2.3xlarge", (1, 2), (1,), STACKS)
METHODS = {"nxdi-draft": ("draft",), "vllm-neuron": ("eagle3",)}
BASE = cand.Speculation()
DRAFT = cand.Speculation("draft", "Qwen/Qwen3-1.7B", 7)


def candidate(tp: int, spec: cand.Speculation = BASE, node: str = "trn2.48xlarge", seqs: int = 4, length: int = 1024, lnc: int = 2):
    dep = sm.Deployment(method=spec.method, draft=spec.draft, k=spec.k, tensor_parallel_size=tp, lnc=lnc, max_num_seqs=seqs, node_type=node)
    return cand.Candidate(dep, "nxdi-draft", length)


def test_chip_figures_agree_with_the_catalog():
    # Each serving-model node type is a catalog entry with the same devices and cores (config/catalog.py
    # is what synth checks TP against); HBM per logical core at LNC 2 is 96 GiB / 4 = 24 GiB.
    for name, hw in sm.HARDWARE.items():
        entry = catalog.TRAINIUM_INSTANCES[name]
        assert (entry.neuron_devices, entry.physical_cores_per_device) == (hw.devices_per_node, hw.physical_cores_per_device)
        assert hw.hbm_gib_per_device == 96.0
    assert R48.hbm_per_rank(2) == 24 * GIB and R48.hbm_per_rank(1) == 12 * GIB


def test_kv_bytes_per_token_and_heads_per_rank():
    # Qwen3-32B: 2 (K, V) x 64 layers x 8 KV heads x 128 x 2 bytes = 262,144 bytes per token, whole model.
    assert cand.kv_bytes_per_token(sm.QWEN3_32B) == 262_144
    # TP 4 divides the 8 KV heads: 2 per rank, 65,536 bytes per token per rank (a quarter).
    assert cand.kv_heads_per_rank(sm.QWEN3_32B, 4) == 2 and cand.kv_bytes_per_token_per_rank(sm.QWEN3_32B, 4) == 65_536
    # TP 16, 32, 64 replicate them (REPLICATE_TO_TP_DEGREE): one head per rank, 32,768 bytes, not 262,144 / TP.
    for tp in (16, 32, 64):
        assert cand.shardable_heads(sm.QWEN3_32B, tp) == (64 if tp <= 64 else tp, tp)
        assert cand.kv_bytes_per_token_per_rank(sm.QWEN3_32B, tp) == 32_768
    # Qwen3-14B's 40 query heads are padded to a multiple of TP: 48 at TP 16, 64 at TP 32 (pad.py).
    assert cand.shardable_heads(sm.QWEN3_14B, 16) == (48, 16) and cand.shardable_heads(sm.QWEN3_14B, 32) == (64, 32)
    assert cand.shardable_heads(sm.QWEN3_14B, 8) == (40, 8)
    # TP 12 neither divides nor is a multiple of 8 KV heads: CONVERT_TO_MHA, as many KV heads as padded
    # query heads (64 -> 72), 6 per rank.
    odd = sm.ModelShape("odd", 2, 512, 1024, 64, 8, 8, 1000, False)
    assert cand.shardable_heads(odd, 12) == (72, 72) and cand.kv_heads_per_rank(odd, 12) == 6
    # Qwen3-8B's KV cache: 2 x 36 x 8 x 128 x 2 = 147,456 bytes per token.
    assert cand.kv_bytes_per_token(sm.QWEN3_8B) == 147_456


def test_weights_per_rank_by_hand():
    # Qwen3-32B at TP 4: 16 query and 2 KV heads per rank.
    #   attention 5120 x (16 + 2 x 2) x 128 + 16 x 128 x 5120 = 13,107,200 + 10,485,760 = 23,592,960
    #   SwiGLU    3 x 5120 x 25600 / 4                         = 98,304,000
    #   norms     2 x 5120 + 2 x 128 (on every rank)            = 10,496
    #   64 layers x 121,907,456 = 7,802,077,184; embedding and output layer 151936 / 4 x 5120 = 194,478,080
    #   each; the final norm 5120: 8,191,038,464 parameters, 16,382,076,928 bytes (15.26 GiB).
    assert cand.weight_params_per_rank(sm.QWEN3_32B, 4) == 64 * 121_907_456 + 2 * 194_478_080 + 5120 == 8_191_038_464
    assert cand.weight_bytes_per_rank(sm.QWEN3_32B, 4) == 16_382_076_928
    # A quarter of the whole model's 32,762,123,264 parameters, up to the norms every rank keeps.
    assert cand.weight_params_per_rank(sm.QWEN3_32B, 4) - sm.QWEN3_32B.params / 4 == pytest.approx(3 * (64 * 10_496 + 5120) / 4)
    # At TP 64 the K/V projections are replicated: attention 5120 x (1 + 2) x 128 + 128 x 5120 = 2,621,440,
    # SwiGLU 3 x 5120 x 400 = 6,144,000, norms 10,496; embeddings 2374 x 5120 = 12,154,880 twice.
    assert cand.weight_params_per_rank(sm.QWEN3_32B, 64) == 64 * (2_621_440 + 6_144_000 + 10_496) + 2 * 12_154_880 + 5120
    # Qwen3-1.7B (tied) at TP 4: NxD Inference clones the embedding into lm_head, so both are stored:
    #   28 x (2048 x (4 + 4) x 128 + 4 x 128 x 2048 + 3 x 2048 x 1536 + 4352) = 28 x 12,587,264 = 352,443,392
    #   + 2 x 37,984 x 2048 = 155,582,464 + 2048 = 508,027,904 parameters, 1,016,055,808 bytes.
    assert cand.weight_bytes_per_rank(sm.QWEN3_1_7B, 4) == 2 * 508_027_904 == 1_016_055_808


def test_qwen3_32b_fits_one_chip_at_tp_4_with_its_draft():
    # Per rank: weights 16,382,076,928 + KV 65,536 x 4 x 1024 = 268,435,456 + draft weights 1,016,055,808
    # + draft KV 2 x 28 x 2 x 128 x 2 = 28,672 x 4096 = 117,440,512 + reserve 2 x 96 MiB + 2 GiB = 2,348,810,240
    # = 20,132,818,944 bytes (18.75 GiB) <= 24 GiB: 65.5 GB of weights over one chip's 96 GiB fits.
    memory = cand.rank_memory(candidate(4, DRAFT, "trn2.3xlarge"), R3)
    assert (memory.target_weights, memory.target_kv, memory.draft_weights, memory.draft_kv) == (
        16_382_076_928,
        268_435_456,
        1_016_055_808,
        117_440_512,
    )
    assert memory.reserve == 2_348_810_240 and memory.total == 20_132_818_944 and memory.limit == 24 * GIB and memory.fits
    assert "= 18.75 GiB <= 24.00 GiB HBM per logical core" in memory.describe()
    assert cand.check(candidate(4, DRAFT, "trn2.3xlarge"), R3) is None


def test_a_kv_cache_too_large_is_refused_with_its_numbers():
    # 64 sequences x 2048 tokens at TP 4: KV 65,536 x 131,072 = 8 GiB; with the weights and the reserve
    # 16,382,076,928 + 8,589,934,592 + 2,348,810,240 = 27,320,821,760 bytes = 25.44 GiB > 24 GiB.
    refusal = cand.check(candidate(4, seqs=64, length=2048), R48)
    assert refusal is not None and refusal.limit == "hbm"
    assert refusal.name == "trn2.48xlarge LNC2 TP4 baseline"
    assert "KV 8.00 (131072 tokens, 2 KV head(s) per rank)" in refusal.reason and "= 25.44 GiB > 24.00 GiB" in refusal.reason
    # The same cache at TP 16 holds one replicated head per rank: 4 GiB, and it fits.
    assert cand.check(candidate(16, seqs=64, length=2048), R48) is None
    # A smaller reserve is the user's to assume; the numbers move with it.
    assert cand.check(candidate(4, seqs=64, length=2048), R48, cand.Reserve(scratch=0)) is None


def test_tp_counts_the_scheduler_allocates():
    # 1, 4, 8 or 16 connected devices on a trn2.48xlarge: TP 4, 16, 32, 64 at LNC 2, 8, 32, 64, 128 at LNC 1;
    # one device on a trn2.3xlarge.
    assert R48.allowed_tp(2) == (4, 16, 32, 64) and R48.allowed_tp(1) == (8, 32, 64, 128)
    assert R3.allowed_tp(2) == (4,) and R3.allowed_tp(1) == (8,)
    assert cand.tp_problem(R48, 2, 32) == ""
    assert cand.tp_problem(R48, 2, 8) == (
        "TP 8 needs 2 devices; the Neuron scheduler allocates 1, 4, 8, 16 connected device(s) on trn2.48xlarge (TP 4, 16, 32, 64 at LNC 2)"
    )
    assert cand.tp_problem(R48, 2, 6).startswith("TP 6 is not a whole number of devices (4 logical cores each at LNC 2)")
    assert "TP 16 needs 4 devices" in cand.tp_problem(R3, 2, 16)
    assert cand.tp_problem(R48, 3, 4).startswith("LNC 3 is not a setting of trn2.48xlarge")


def test_the_space_on_the_reference_settings():
    space = cand.candidate_space("Qwen/Qwen3-32B", [BASE, DRAFT], [R48, R3], METHODS, 4, 1024, lncs=[2])
    assert [(c.deployment.node_type, c.tp, c.servers_per_node, c.speculation) for c in space.candidates] == [
        (node, tp, servers, spec)
        for node, tp, servers in (
            ("trn2.48xlarge", 4, 16),
            ("trn2.48xlarge", 16, 4),
            ("trn2.48xlarge", 32, 2),
            ("trn2.48xlarge", 64, 1),
            ("trn2.3xlarge", 4, 1),
        )
        for spec in ("baseline", "draft Qwen3-1.7B k=7")
    ]
    assert space.refused == [] and {c.stack for c in space.candidates} == {"nxdi-draft"}
    # A TP asked for that the scheduler cannot place is refused, named, the others kept.
    space = cand.candidate_space("Qwen/Qwen3-32B", [BASE], [R48], METHODS, 4, 1024, lncs=[2], tps=[8, 16])
    assert [c.tp for c in space.candidates] == [16]
    assert [(r.name, r.limit) for r in space.refused] == [("trn2.48xlarge LNC2 TP8 baseline", "tp")]


def test_a_stack_not_documented_for_the_instance_refuses_it():
    # The stacks' own documentation: NxD Inference on Inf2, Trn1/Trn1n, Trn2; the vllm-neuron plugin on Trn2, Trn3.
    assert serving_stacks.STACKS["nxdi-draft"].runs_on("trn1.32xlarge") and serving_stacks.STACKS["nxdi-draft"].runs_on("trn2.3xlarge")
    assert not serving_stacks.STACKS["vllm-neuron"].runs_on("trn1.32xlarge")
    assert serving_stacks.STACKS["vllm-neuron"].runs_on("trn2.48xlarge")
    only_plugin = cand.NodeRules("trn2.48xlarge", (2,), (1, 4, 8, 16), ("vllm-neuron",))
    space = cand.candidate_space("Qwen/Qwen3-32B", [DRAFT], [only_plugin], METHODS, 4, 1024, tps=[32])
    assert space.candidates == []
    (refusal,) = space.refused
    assert (
        refusal.limit == "stack" and refusal.reason == "serving stack nxdi-draft is not documented for trn2.48xlarge (stacks: vllm-neuron)"
    )
    space = cand.candidate_space("Qwen/Qwen3-32B", [cand.Speculation("medusa", "x/y", 2)], [R48], METHODS, 4, 1024, tps=[32])
    assert space.refused[0].reason == "no serving stack runs method medusa"


def test_bad_inputs_name_what_is_wrong():
    with pytest.raises(ValueError, match="no chip figures in the serving model; known: trn2.3xlarge, trn2.48xlarge"):
        cand.NodeRules("trn1.32xlarge", (1,), (1, 4, 8, 16), STACKS).hbm_per_rank(1)
    with pytest.raises(ValueError, match="max_model_len 0 and max_num_seqs 4 must be at least 1"):
        cand.candidate_space("Qwen/Qwen3-32B", [BASE], [R48], METHODS, 4, 0)
    with pytest.raises(ValueError, match="checked against the rules of trn2.3xlarge"):
        cand.check(candidate(4), R3)
