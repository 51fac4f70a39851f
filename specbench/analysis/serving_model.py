"""A serving model with a physical basis: how long one engine step of a vLLM deployment takes, and so
what a deployment measures (TPOT, E2E, tokens/s per node) at each load, with and without speculation.

One decode step of a continuous-batching engine with B running sequences, each verifying n = k + 1
positions (n = 1 without speculation), costs

    target step = W / (HBM bandwidth x e_bw)          the target's weights, read once per step
                + B x n x F / (dense BF16 peak x e_fl)  the tokens the step processes
                + overhead                              launch, collectives, sampling: per step
    draft steps = k x (W_d / (bw x e_bw) + B x F_d / (peak x e_fl) + draft overhead)

with W the weight bytes (BF16) and F = 2 x params the FLOPs per token (Kaplan et al.'s 2N); the
draft-model method runs its k steps on the same devices (NxD Inference's fused speculation), EAGLE3's
head likewise (one decoder layer of the target's geometry). A prefill step processes every prompt
token of the sequences it admits (vLLM V0 and the Neuron schedulers run prefill steps apart from
decode steps, see specbench/emulator/server.py). Tokens per decode step follow Leviathan et al.:
E = (1 - a^(k+1)) / (1 - a) (specbench/analysis/theory.py).

The step time is linear in the free parameters (overhead, 1 / e_bw, 1 / e_fl, draft overhead), so
``fit_profile`` is a linear least-squares fit (standard library). Everything here is pure.

What the model leaves out (stated in ``ASSUMPTIONS``): attention's KV-cache reads (short contexts:
the write-up's 64 in / 600 out), collective-communication time apart from the fixed overhead, and
compile-time bucketing (a Neuron graph runs at a compiled batch size: padding makes a step's cost
that of its bucket). Stdlib only: the emulator, the CLI and the sweep stage all use it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from specbench.analysis import theory

BYTES_PER_PARAM = 2  # BF16 weights


# --- small helpers ---------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check(ok: bool, name: str, allowed: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"serving model: {name} must be {allowed}; got {value!r}")


# --- hardware --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hardware:
    """One node type. Figures per device (chip)."""

    node_type: str
    devices_per_node: int
    physical_cores_per_device: int
    hbm_gib_per_device: float
    hbm_bytes_per_s_per_device: float
    dense_bf16_flops_per_device: float


# Trainium2 (AWS Neuron architecture guide, "Trainium2 Architecture",
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trainium2.html:
# eight NeuronCore-v3 per chip, 667 dense BF16/FP16/TF32 TFLOPS; the NKI Trainium2 architecture guide,
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/arch/trainium2_arch.html: 4 HBM stacks,
# 96 GiB at 2.9 TB/s per device; v2.29 of that guide says 3 TB/s, the lower figure is kept).
# trn2.48xlarge has 16 chips; LNC=2 (the default) makes 4 logical cores per chip (REFERENCE.md section 6).
TRN2_48XLARGE = Hardware("trn2.48xlarge", 16, 8, 96.0, 2.9e12, 667e12)
# trn2.3xlarge: one Trainium2 chip of the same figures (8 NeuronCore-v3, 96 GiB): REFERENCE.md section 7
# and config/catalog.py's entry (1 device of 8 physical cores; the stored Neuron architecture pages list
# only the 48xlarge sizes, so the chip count is the EC2 page's as the project recorded it);
# tests/test_candidates.py checks both entries against config/catalog.py.
TRN2_3XLARGE = Hardware("trn2.3xlarge", 1, 8, 96.0, 2.9e12, 667e12)
# Trainium3 is left out: the Neuron docs list Trn3 only as UltraServers (Gen1: 64 chips, Gen2: 36 servers
# of 4 chips; about-neuron/arch/neuron-hardware/trn3-arch.rst) with no EC2 instance type a node group
# could name, no Neuron scheduler rule for it and no price; the chip (8 NeuronCore-v4, 144 GiB at
# 4.9 TB/s, 671 dense BF16 TFLOPS: trainium3.rst) runs on the vllm-neuron plugin ("relevant for Trn2,
# Trn3") but the reference image (vLLM 0.9.1, SDK 2.26.1) is not documented for it (docs/serving-model.md).
HARDWARE = {h.node_type: h for h in (TRN2_48XLARGE, TRN2_3XLARGE)}


# --- models ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    """A dense decoder's geometry (a Hugging Face config.json's fields) and its parameter count."""

    name: str
    layers: int  # num_hidden_layers
    hidden: int  # hidden_size
    intermediate: int  # intermediate_size
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads
    head_dim: int
    vocab: int  # vocab_size
    tied_embeddings: bool  # tie_word_embeddings
    extra_params: int = 0  # parameters outside the decoder blocks and embeddings (an EAGLE3 head's fusion layer)
    lm_head_vocab: int = 0  # 0: the vocabulary; an EAGLE3 head's draft vocabulary otherwise
    embeddings: bool = True  # False: the module borrows the target's embeddings (an EAGLE3 head)

    @property
    def layer_params(self) -> int:
        attention = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate  # gate, up, down (SwiGLU)
        norms = 2 * self.hidden + 2 * self.head_dim  # input and post-attention RMSNorm, Qwen3's q/k norms
        return attention + mlp + norms

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden if self.embeddings else 0

    @property
    def lm_head_params(self) -> int:
        if self.tied_embeddings and self.embeddings and not self.lm_head_vocab:
            return 0  # the embedding matrix is the output layer
        return (self.lm_head_vocab or self.vocab) * self.hidden

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_params + self.lm_head_params + self.extra_params + self.hidden

    @property
    def streamed_params(self) -> int:
        """Parameters a decode step reads in full: all but an untied input embedding (a lookup of B rows)."""
        untied_lookup = self.embedding_params if self.lm_head_params else 0
        return self.params - untied_lookup

    @property
    def weight_bytes(self) -> int:
        return self.streamed_params * BYTES_PER_PARAM

    @property
    def flops_per_token(self) -> int:
        return 2 * self.streamed_params


# The models' config.json on the Hugging Face hub (Qwen/Qwen3-32B, Qwen/Qwen3-1.7B, Qwen/Qwen3-0.6B, main):
# 32B: 64 layers, hidden 5120, intermediate 25600, 64 heads / 8 KV x 128, vocab 151936, untied;
# 1.7B: 28 layers, hidden 2048, intermediate 6144, 16 / 8 x 128, tied; 0.6B: 28 layers, hidden 1024,
# intermediate 3072, 16 / 8 x 128, tied. The counts come out at the model cards' 32.8B, 1.7B (1.4B
# without embeddings) and 0.6B (0.44B without embeddings); tests/test_serving_model.py pins them.
QWEN3_32B = ModelShape("Qwen/Qwen3-32B", 64, 5120, 25600, 64, 8, 128, 151_936, False)
QWEN3_1_7B = ModelShape("Qwen/Qwen3-1.7B", 28, 2048, 6144, 16, 8, 128, 151_936, True)
QWEN3_0_6B = ModelShape("Qwen/Qwen3-0.6B", 28, 1024, 3072, 16, 8, 128, 151_936, True)
# Their config.json (main) as a public copy keeps them verbatim (citsjtu2020/LLM-Prof sglang/Model_Config.md):
# 14B: 40 layers, hidden 5120, intermediate 17408, 40 heads / 8 KV x 128, untied; 8B: 36 layers, hidden
# 4096, intermediate 12288, 32 / 8 x 128, untied; 4B: 36 layers, hidden 2560, intermediate 9728, 32 / 8 x
# 128, tied; all vocab 151936. The counts come out at the model cards' 14.8B (13.2B without embeddings),
# 8.2B (6.95B) and 4.0B (3.6B); tests/test_serving_model.py pins them.
QWEN3_14B = ModelShape("Qwen/Qwen3-14B", 40, 5120, 17408, 40, 8, 128, 151_936, False)
QWEN3_8B = ModelShape("Qwen/Qwen3-8B", 36, 4096, 12288, 32, 8, 128, 151_936, False)
QWEN3_4B = ModelShape("Qwen/Qwen3-4B", 36, 2560, 9728, 32, 8, 128, 151_936, True)
MODELS = {m.name: m for m in (QWEN3_32B, QWEN3_14B, QWEN3_8B, QWEN3_4B, QWEN3_1_7B, QWEN3_0_6B)}
EAGLE3_DRAFT_VOCAB = 32_000  # EAGLE3 heads' usual draft_vocab_size (unverified per head: read its config.json)


def eagle3_head(target: ModelShape, name: str = "eagle3-head") -> ModelShape:
    """An EAGLE3 head for ``target``: one decoder layer of the target's geometry (its attention takes
    twice the hidden size: token embedding and fused features), a fusion layer of three hidden states
    into one, an output layer over a draft vocabulary; the target's embeddings are borrowed."""
    fusion = 3 * target.hidden * target.hidden + target.hidden * target.heads * target.head_dim  # fc, wider q input
    return ModelShape(
        name,
        1,
        target.hidden,
        target.intermediate,
        target.heads,
        target.kv_heads,
        target.head_dim,
        target.vocab,
        False,
        extra_params=fusion,
        lm_head_vocab=EAGLE3_DRAFT_VOCAB,
        embeddings=False,
    )


def model_shape(model_id: str) -> ModelShape:
    try:
        return MODELS[model_id]
    except KeyError:
        raise ValueError(f"model {model_id!r} has no recorded geometry; known: {', '.join(sorted(MODELS))}") from None


# --- deployment and the free parameters ------------------------------------------------------------

METHODS = ("", "draft", "eagle3")


@dataclass(frozen=True)
class Deployment:
    """What is served where: the serving.* settings a prediction needs."""

    target: str = QWEN3_32B.name
    method: str = ""  # "": no speculation; "draft": a draft model; "eagle3": a trained head
    draft: str = ""  # the draft model's id (method draft) or the head's (eagle3; geometry from the target)
    k: int = 0
    tensor_parallel_size: int = 32  # logical NeuronCores
    lnc: int = 2  # physical cores per logical core
    max_num_seqs: int = 4
    node_type: str = TRN2_48XLARGE.node_type

    def __post_init__(self) -> None:
        _check(self.method in METHODS, "method", "one of '', draft, eagle3", self.method)
        _check(_is_int(self.k) and self.k >= 0, "k", "an integer >= 0", self.k)
        _check(self.method != "" or self.k == 0, "k", "0 without a speculation method", self.k)
        _check(self.method == "" or self.k >= 1, "k", "an integer >= 1 with a speculation method", self.k)
        _check(_is_int(self.max_num_seqs) and self.max_num_seqs >= 1, "max_num_seqs", "an integer >= 1", self.max_num_seqs)
        _check(self.lnc in (1, 2), "lnc", "1 or 2", self.lnc)
        _check(self.node_type in HARDWARE, "node_type", f"one of {', '.join(HARDWARE)}", self.node_type)
        hw = HARDWARE[self.node_type]
        per_device = hw.physical_cores_per_device // self.lnc
        ok = _is_int(self.tensor_parallel_size) and self.tensor_parallel_size >= 1 and self.tensor_parallel_size % per_device == 0
        _check(
            ok,
            "tensor_parallel_size",
            f"a multiple of {per_device} (logical cores per device at LNC {self.lnc})",
            self.tensor_parallel_size,
        )
        _check(
            self.devices <= hw.devices_per_node,
            "tensor_parallel_size",
            f"at most {hw.devices_per_node} devices of a node",
            self.tensor_parallel_size,
        )
        model_shape(self.target)
        if self.method == "draft":
            model_shape(self.draft)

    @property
    def hardware(self) -> Hardware:
        return HARDWARE[self.node_type]

    @property
    def devices(self) -> int:
        return self.tensor_parallel_size * self.lnc // self.hardware.physical_cores_per_device

    @property
    def replicas_per_node(self) -> int:
        return self.hardware.devices_per_node // self.devices

    @property
    def target_shape(self) -> ModelShape:
        return model_shape(self.target)

    @property
    def draft_shape(self) -> ModelShape | None:
        if self.method == "draft":
            return model_shape(self.draft)
        if self.method == "eagle3":
            return eagle3_head(self.target_shape, self.draft or "eagle3-head")
        return None

    def with_k(self, k: int) -> Deployment:
        """Another speculation length (0: the same deployment without speculation)."""
        if k == 0:
            return replace(self, method="", draft="", k=0)
        return replace(self, k=k)


@dataclass(frozen=True)
class Profile:
    """The free parameters: what the hardware figures leave to measurement. Efficiencies are shares of
    the peak (0 < e <= 1; None leaves the term out, as a batch-independent emulator profile does)."""

    overhead_s: float = 0.0  # per target step (decode or prefill)
    bandwidth_efficiency: float | None = 0.7
    compute_efficiency: float | None = 0.5
    draft_overhead_s: float = 0.0  # per draft step

    def __post_init__(self) -> None:
        for name in ("overhead_s", "draft_overhead_s"):
            value = getattr(self, name)
            _check(_is_number(value) and math.isfinite(value) and value >= 0, name, "a number >= 0 (seconds)", value)
        for name in ("bandwidth_efficiency", "compute_efficiency"):
            value = getattr(self, name)
            ok = value is None or (_is_number(value) and math.isfinite(value) and value > 0)
            _check(ok, name, "a number > 0 (a share of the peak), or null to leave the term out", value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base: Profile | None = None) -> Profile:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"profile: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        return replace(base or cls(), **dict(data))


# Free parameters fitted on the write-up's figures (docs/serving-model.md): Qwen3-32B on trn2 TP 32 at
# max_num_seqs 4, baseline 45 ms per step; Qwen3-1.7B draft, k 7, structured prompts 15 ms per token.
# The efficiencies keep their defaults (two figures fix two parameters): see ``writeup_profile``.
DEFAULT_PROFILE = Profile()


# --- step times ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepTime:
    """One engine step, by term (seconds)."""

    weights_s: float  # the target's weights read once
    compute_s: float  # the target's tokens
    overhead_s: float
    draft_s: float  # the draft's (or head's) k steps, all terms
    tokens: int  # positions the target processed (B x (k + 1), or the prompt tokens of a prefill)

    @property
    def total_s(self) -> float:
        return self.weights_s + self.compute_s + self.overhead_s + self.draft_s


def _bandwidth(dep: Deployment) -> float:
    return dep.devices * dep.hardware.hbm_bytes_per_s_per_device


def _peak(dep: Deployment) -> float:
    return dep.devices * dep.hardware.dense_bf16_flops_per_device


def _term(amount: float, rate: float, efficiency: float | None) -> float:
    return 0.0 if efficiency is None else amount / (rate * efficiency)


def weight_bound_s(dep: Deployment) -> float:
    """The floor of a plain decode step: the target's weights over the TP group's full HBM bandwidth."""
    return dep.target_shape.weight_bytes / _bandwidth(dep)


def draft_step_s(dep: Deployment, profile: Profile, batch: int) -> float:
    """One step of the draft (or head) for ``batch`` sequences, one position each."""
    shape = dep.draft_shape
    if shape is None:
        return 0.0
    weights = _term(shape.weight_bytes, _bandwidth(dep), profile.bandwidth_efficiency)
    return weights + _term(batch * shape.flops_per_token, _peak(dep), profile.compute_efficiency) + profile.draft_overhead_s


def decode_step(dep: Deployment, profile: Profile, batch: int) -> StepTime:
    """One decode step with ``batch`` running sequences: k draft steps, then the target verifies k + 1
    positions per sequence (one without speculation)."""
    _check(_is_int(batch) and batch >= 1, "batch", "an integer >= 1", batch)
    target, tokens = dep.target_shape, batch * (dep.k + 1)
    return StepTime(
        _term(target.weight_bytes, _bandwidth(dep), profile.bandwidth_efficiency),
        _term(tokens * target.flops_per_token, _peak(dep), profile.compute_efficiency),
        profile.overhead_s,
        dep.k * draft_step_s(dep, profile, batch),
        tokens,
    )


def prefill_step(dep: Deployment, profile: Profile, prompt_tokens: Sequence[int]) -> StepTime:
    """One prefill step over the prompts it admits (the draft prefills its copy too)."""
    total = sum(prompt_tokens)
    _check(total >= 1 and all(_is_int(n) and n >= 1 for n in prompt_tokens), "prompt_tokens", "integers >= 1", list(prompt_tokens))
    target = dep.target_shape
    draft = dep.draft_shape
    draft_s = 0.0
    if draft is not None:
        draft_s = _term(draft.weight_bytes, _bandwidth(dep), profile.bandwidth_efficiency)
        draft_s += _term(total * draft.flops_per_token, _peak(dep), profile.compute_efficiency) + profile.draft_overhead_s
    return StepTime(
        _term(target.weight_bytes, _bandwidth(dep), profile.bandwidth_efficiency),
        _term(total * target.flops_per_token, _peak(dep), profile.compute_efficiency),
        profile.overhead_s,
        draft_s,
        total,
    )


# --- admission: which waiting requests a prefill step takes ----------------------------------------
# Per serving stack (config/serving_stacks.py ``max_prefills_per_batch``, where each value's source is
# cited): None on vLLM 0.9.1 V0 with NxD Inference (its default scheduler prioritises prefills and
# takes every waiting request that fits), 1 on the vllm-neuron plugin (NeuronScheduler's
# ``max_prefills_per_batch = 1``). The emulator's Engine admits by the same function.


def admitted(waiting: int, free_slots: int, max_prefills_per_batch: int | None = None) -> int:
    """How many waiting requests the next prefill step admits: as many as fit the free slots, at most
    ``max_prefills_per_batch`` (None: no limit of its own)."""
    _check(_is_int(waiting) and waiting >= 0, "waiting", "an integer >= 0", waiting)
    _check(_is_int(free_slots) and free_slots >= 0, "free_slots", "an integer >= 0", free_slots)
    cap = max_prefills_per_batch
    _check(cap is None or (_is_int(cap) and cap >= 1), "max_prefills_per_batch", "None (no limit) or an integer >= 1", cap)
    fits = min(waiting, free_slots)
    return fits if cap is None else min(fits, cap)


def prefill_batches(waiting: int, free_slots: int, max_prefills_per_batch: int | None = None) -> list[int]:
    """The sizes of the back-to-back prefill steps that admit ``waiting`` requests into ``free_slots``
    (prefills come first on both stacks, so no decode step runs between them): 5 arrivals into 8 free
    slots take one step of 5 without a limit, five steps of 1 at a limit of 1. Requests beyond the
    free slots wait for a running sequence to end and are not admitted here."""
    sizes: list[int] = []
    while (n := admitted(waiting, free_slots, max_prefills_per_batch)) > 0:
        sizes.append(n)
        waiting, free_slots = waiting - n, free_slots - n
    return sizes


def burst_ttft_s(
    dep: Deployment, profile: Profile, prompt_tokens: Sequence[int], free_slots: int, max_prefills_per_batch: int | None = None
) -> list[float]:
    """Time to first token of each request of a burst that reaches an idle replica at once (in arrival
    order, the requests the free slots admit): the end of the prefill step that admits it, whose token
    is its first."""
    ttft: list[float] = []
    clock, start = 0.0, 0
    for size in prefill_batches(len(prompt_tokens), free_slots, max_prefills_per_batch):
        clock += prefill_step(dep, profile, prompt_tokens[start : start + size]).total_s
        ttft += [clock] * size
        start += size
    return ttft


# --- what a client measures ------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    prompt_tokens: int = 64  # the write-up's llmperf arguments (REFERENCE.md section 2)
    output_tokens: int = 600


DEFAULT_WORKLOAD = Workload()


@dataclass(frozen=True)
class Prediction:
    concurrency: int
    batch: int  # sequences a decode step runs: min(concurrency, max_num_seqs)
    tokens_per_step: float  # E(a, k)
    step_s: float  # one decode step
    prefill_s: float  # one prefill step of one prompt
    ttft_s: float
    tpot_s: float
    e2e_s: float
    tokens_per_s_per_node: float


def predict(dep: Deployment, profile: Profile, a: float, concurrency: int, workload: Workload = Workload()) -> Prediction:
    """Steady state of a closed loop of ``concurrency`` clients (each sends its next request when the
    last ends), on one replica; per node, every replica the node holds runs the same.

    A request's decode takes N - 1 tokens / E steps of a batch of B = min(concurrency, max_num_seqs);
    prefill steps of the other B - 1 sequences (one each per request lifetime, run apart from decode
    steps) interrupt it: exact where a step admits one prefill (vllm-neuron, ``admitted``), an upper
    bound where requests arriving together share one (vLLM V0). Beyond max_num_seqs the surplus clients queue: TTFT grows by the wait for a
    slot (Little's law over the replica's request rate)."""
    _check(_is_int(concurrency) and concurrency >= 1, "concurrency", "an integer >= 1", concurrency)
    batch = min(concurrency, dep.max_num_seqs)
    tokens = theory.expected_tokens_per_step(a, dep.k) if dep.k else 1.0
    step = decode_step(dep, profile, batch).total_s
    prefill = prefill_step(dep, profile, [workload.prompt_tokens]).total_s
    decode_steps = max(workload.output_tokens - 1, 0) / tokens
    decode_s = decode_steps * step + (batch - 1) * prefill
    tpot = decode_s / (workload.output_tokens - 1) if workload.output_tokens > 1 else 0.0
    served_s = prefill + decode_s  # a request's time in a slot
    rate = batch / served_s  # requests per second through the replica
    queued = max(concurrency / rate - served_s, 0.0) if concurrency > batch else 0.0
    ttft = queued + prefill
    e2e = ttft + decode_s
    return Prediction(concurrency, batch, tokens, step, prefill, ttft, tpot, e2e, rate * workload.output_tokens * dep.replicas_per_node)


def speedup(dep: Deployment, profile: Profile, a: float, concurrency: int, workload: Workload = Workload()) -> float:
    """Baseline TPOT / speculative TPOT at one load (same target, devices and max_num_seqs)."""
    base = predict(dep.with_k(0), profile, a, concurrency, workload)
    return base.tpot_s / predict(dep, profile, a, concurrency, workload).tpot_s


def best_k(
    dep: Deployment, profile: Profile, a: float, concurrency: int, k_max: int = 15, workload: Workload = Workload()
) -> tuple[int, float]:
    """The speculation length in 1..k_max with the lowest TPOT at this load, and its speedup."""
    if not dep.method:
        raise ValueError("best_k needs a speculation method (draft or eagle3)")
    scored = [(k, speedup(dep.with_k(k), profile, a, concurrency, workload)) for k in range(1, k_max + 1)]
    return max(scored, key=lambda pair: (pair[1], -pair[0]))


def crossover_concurrency(dep: Deployment, profile: Profile, a: float, workload: Workload = Workload(), limit: int = 4096) -> float | None:
    """The smallest load (clients in flight, continuous: the batch interpolated) at which speculation
    stops paying; None if it pays up to ``limit``. Speedup falls with the batch; beyond max_num_seqs
    TPOT no longer changes, so the answer is at most max_num_seqs."""

    def gain(c: int) -> float:
        return speedup(dep, profile, a, c, workload) - 1.0

    top = min(limit, dep.max_num_seqs)
    if gain(1) <= 0:
        return 1.0
    previous = 1
    for c in range(2, top + 1):
        if gain(c) <= 0:
            g0, g1 = gain(previous), gain(c)
            return previous + g0 / (g0 - g1) * (c - previous)
        previous = c
    return None


# --- calibration: linear least squares -------------------------------------------------------------

FREE = ("overhead_s", "inverse_bandwidth_efficiency", "inverse_compute_efficiency", "draft_overhead_s")


@dataclass(frozen=True)
class MeasuredPoint:
    """One measurement of a deployment at a load: its decode step time (``metric`` "step", e.g. the
    median gap between a request's chunks) or its TPOT (``metric`` "tpot", (e2e - ttft) / (tokens - 1),
    which includes the prefill steps that interrupt a request's decode) at ``concurrency`` clients."""

    deployment: Deployment
    concurrency: int
    value_s: float
    a: float = 0.0  # acceptance of the prompt class (ignored without speculation)
    label: str = ""
    metric: str = "tpot"
    workload: Workload = Workload()

    def __post_init__(self) -> None:
        _check(self.metric in ("step", "tpot"), "metric", "step or tpot", self.metric)
        _check(_is_int(self.concurrency) and self.concurrency >= 1, "concurrency", "an integer >= 1", self.concurrency)
        _check(_is_number(self.value_s) and self.value_s > 0, "value_s", "a number > 0 (seconds)", self.value_s)

    def model_s(self, profile: Profile) -> float:
        if self.metric == "step":
            return decode_step(self.deployment, profile, min(self.concurrency, self.deployment.max_num_seqs)).total_s
        return predict(self.deployment, profile, self.a, self.concurrency, self.workload).tpot_s


def _decode_row(dep: Deployment, batch: int) -> tuple[float, float, float, float]:
    bw, peak, target, draft = _bandwidth(dep), _peak(dep), dep.target_shape, dep.draft_shape
    tokens = batch * (dep.k + 1)
    weights = target.weight_bytes / bw + (dep.k * draft.weight_bytes / bw if draft else 0.0)
    compute = tokens * target.flops_per_token / peak + (dep.k * batch * draft.flops_per_token / peak if draft else 0.0)
    return (1.0, weights, compute, float(dep.k if draft else 0))


def _prefill_row(dep: Deployment, prompt_tokens: int) -> tuple[float, float, float, float]:
    bw, peak, target, draft = _bandwidth(dep), _peak(dep), dep.target_shape, dep.draft_shape
    weights = (target.weight_bytes + (draft.weight_bytes if draft else 0)) / bw
    compute = prompt_tokens * (target.flops_per_token + (draft.flops_per_token if draft else 0)) / peak
    return (1.0, weights, compute, 1.0 if draft else 0.0)


def design_row(point: MeasuredPoint) -> tuple[float, ...]:
    """The measured quantity's coefficients of (overhead, 1/e_bw, 1/e_fl, draft overhead): the model
    says value = row . x (``predict`` and ``decode_step`` are linear in those four)."""
    dep = point.deployment
    batch = min(point.concurrency, dep.max_num_seqs)
    decode = _decode_row(dep, batch)
    if point.metric == "step":
        return decode
    n = point.workload.output_tokens
    if n < 2:
        raise ValueError("serving model: a TPOT needs output_tokens >= 2")
    tokens = theory.expected_tokens_per_step(point.a, dep.k) if dep.k else 1.0
    prefill = _prefill_row(dep, point.workload.prompt_tokens)
    return tuple(((n - 1) / tokens * d + (batch - 1) * p) / (n - 1) for d, p in zip(decode, prefill, strict=True))


def profile_vector(profile: Profile) -> tuple[float, float, float, float]:
    inv = lambda e: 0.0 if e is None else 1.0 / e  # noqa: E731
    return (profile.overhead_s, inv(profile.bandwidth_efficiency), inv(profile.compute_efficiency), profile.draft_overhead_s)


def vector_profile(x: Sequence[float]) -> Profile:
    eff = lambda inv: None if inv <= 0 else 1.0 / inv  # noqa: E731
    return Profile(max(x[0], 0.0), eff(x[1]), eff(x[2]), max(x[3], 0.0))


@dataclass(frozen=True)
class Residual:
    label: str
    measured_s: float
    fitted_s: float

    @property
    def relative(self) -> float:
        return (self.fitted_s - self.measured_s) / self.measured_s if self.measured_s else math.inf


@dataclass(frozen=True)
class Fit:
    profile: Profile
    fitted: tuple[str, ...]  # the parameters fitted; the others kept from the starting profile
    residuals: list[Residual] = field(default_factory=list)

    @property
    def rms_relative(self) -> float:
        return math.sqrt(math.fsum(r.relative**2 for r in self.residuals) / len(self.residuals)) if self.residuals else 0.0


IDENTIFIABLE_SHARE = 0.05  # a column must keep 5% of its length once the accepted ones are projected out


def identifiable(points: Iterable[MeasuredPoint]) -> tuple[str, ...]:
    """The free parameters the points can tell apart, tried in the order overhead, draft overhead,
    compute, bandwidth (a run at one load tells baseline from speculative steps before batch sizes):
    each is kept if its column (of the relative-error design matrix) is not nearly a combination of
    those kept before it (Gram-Schmidt). Within one target, draft and TP the
    bandwidth term moves with the overhead and draft overhead, so it needs points of two TP sizes or
    two drafts; otherwise it stays at the starting profile's value."""
    points = list(points)
    columns = {name: [design_row(p)[FREE.index(name)] / p.value_s for p in points] for name in FREE}
    kept: list[tuple[str, list[float]]] = []
    for name in ("overhead_s", "draft_overhead_s", "inverse_compute_efficiency", "inverse_bandwidth_efficiency"):
        column = columns[name]
        norm = math.sqrt(math.fsum(v * v for v in column))
        if norm == 0:
            continue
        residual = list(column)
        for _, basis in kept:
            dot = math.fsum(r * b for r, b in zip(residual, basis, strict=True))
            residual = [r - dot * b for r, b in zip(residual, basis, strict=True)]
        left = math.sqrt(math.fsum(v * v for v in residual))
        if left > IDENTIFIABLE_SHARE * norm:
            kept.append((name, [v / left for v in residual]))
    names = {name for name, _ in kept}
    return tuple(n for n in FREE if n in names)


def fit_profile(points: Sequence[MeasuredPoint], start: Profile = DEFAULT_PROFILE, free: Sequence[str] | None = None) -> Fit:
    """Least squares on relative errors: minimise sum ((model - measured) / measured)^2 over the free
    parameters (the others held at ``start``). The step time is linear in them, so this is one solve of
    the normal equations (columns scaled; Gaussian elimination with partial pivoting)."""
    if not points:
        raise ValueError("calibration needs at least one measured point")
    names = tuple(identifiable(points) if free is None else free)
    unknown = [n for n in names if n not in FREE]
    if unknown:
        raise ValueError(f"free parameter(s) {', '.join(unknown)} unknown; allowed: {', '.join(FREE)}")
    x0 = list(profile_vector(start))
    index = [FREE.index(n) for n in names]
    rows, targets = [], []
    for p in points:
        row = design_row(p)
        fixed = math.fsum(row[j] * x0[j] for j in range(len(FREE)) if j not in index)
        rows.append([row[j] / p.value_s for j in index])
        targets.append((p.value_s - fixed) / p.value_s)
    solution = _least_squares(rows, targets)
    x = list(x0)
    for j, value in zip(index, solution, strict=True):
        x[j] = value
    profile = vector_profile(x)
    residuals = [Residual(p.label or f"point {i}", p.value_s, p.model_s(profile)) for i, p in enumerate(points)]
    return Fit(profile, names, residuals)


def _least_squares(rows: Sequence[Sequence[float]], targets: Sequence[float]) -> list[float]:
    n = len(rows[0]) if rows else 0
    if n == 0:
        return []
    if len(rows) < n:
        raise ValueError(f"calibration: {len(rows)} point(s) cannot fix {n} parameters")
    scale = [math.sqrt(math.fsum(r[j] ** 2 for r in rows)) or 1.0 for j in range(n)]
    a = [[math.fsum(r[i] * r[j] for r in rows) / (scale[i] * scale[j]) for j in range(n)] for i in range(n)]
    b = [math.fsum(r[i] * t for r, t in zip(rows, targets, strict=True)) / scale[i] for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-12:
            raise ValueError("calibration: the points cannot tell the free parameters apart (vary the batch, k or the method)")
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        for r in range(col + 1, n):
            factor = a[r][col] / a[col][col]
            a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
            b[r] -= factor * b[col]
    solution = [0.0] * n
    for i in reversed(range(n)):
        solution[i] = (b[i] - math.fsum(a[i][j] * solution[j] for j in range(i + 1, n))) / a[i][i]
    return [s / scale[i] for i, s in enumerate(solution)]


# --- the write-up's anchor -------------------------------------------------------------------------

WRITEUP_BASELINE_STEP_S = 0.045  # Qwen3-32B, trn2, TP 32, max_num_seqs 4, 4 clients
WRITEUP_SPECULATIVE_TPOT_S = 0.015  # Qwen3-1.7B draft, k 7, structured prompts
WRITEUP_STRUCTURED_ACCEPTANCE = 0.9  # the emulator's structured test cases (an assumption: the write-up gives none)
WRITEUP_DEPLOYMENT = Deployment(method="draft", draft=QWEN3_1_7B.name, k=7)


def writeup_points() -> list[MeasuredPoint]:
    """The write-up's two figures as measured TPOTs at its load (4 clients, 64 in / 600 out). llmperf's
    inter-token latency is a request's summed chunk gaps over its output tokens (ray-project/llmperf
    token_benchmark_ray.py divides INTER_TOKEN_LAT by num_output_tokens, counted with its Llama-2
    tokenizer), so both are per token: the baseline's 45 ms is its step, the speculative step takes
    15 ms x E(a, 7). Read per chunk instead, a speculative step (7 draft steps and a wider verify) would
    be 3x cheaper than a plain one, which no single profile of one target on the same devices fits."""
    base = WRITEUP_DEPLOYMENT.with_k(0)
    structured = WRITEUP_STRUCTURED_ACCEPTANCE
    return [
        MeasuredPoint(base, 4, WRITEUP_BASELINE_STEP_S, 0.0, "write-up baseline, 45 ms per token"),
        MeasuredPoint(WRITEUP_DEPLOYMENT, 4, WRITEUP_SPECULATIVE_TPOT_S, structured, "write-up structured, draft k=7, 15 ms per token"),
    ]


@functools.lru_cache(maxsize=1)
def writeup_profile() -> Profile:
    """The free parameters fitted on the write-up's figures (overhead and draft overhead)."""
    return fit_profile(writeup_points(), DEFAULT_PROFILE, ("overhead_s", "draft_overhead_s")).profile


ASSUMPTIONS = (
    "a decode step reads the target's BF16 weights once (HBM bandwidth x efficiency) and computes 2 x params FLOPs "
    "per processed token (dense BF16 peak x efficiency), plus a fixed overhead per step",
    "speculation: k draft (or EAGLE3 head) steps on the same devices, then the target verifies k + 1 positions per sequence",
    "tokens per step E = (1 - a^(k+1)) / (1 - a) (Leviathan et al.); a per prompt class, constant over the output",
    "prefill runs in its own steps (vLLM V0, Neuron schedulers); a closed loop of clients; at most max_num_seqs run, the rest queue",
    "left out: KV-cache reads of attention (short contexts), collectives beyond the overhead, compiled-bucket padding",
)


# --- the profile file (predict --calibrate writes it; predict --profile and emulate --profile read it)

PROFILE_FORMAT = "specbench-serving-profile/1"


def profile_document(profile: Profile, deployment: Deployment | None = None, fit: Fit | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {"format": PROFILE_FORMAT, "profile": profile.to_dict()}
    if deployment is not None:
        document["deployment"] = asdict(deployment)
    if fit is not None:
        document["fitted"] = list(fit.fitted)
        document["residuals"] = [{"label": r.label, "measured_s": r.measured_s, "fitted_s": r.fitted_s} for r in fit.residuals]
    return document


def _stored_fractions(profile: Profile) -> Profile:
    """A stored profile's efficiencies are shares of the peak, at most 1: 1e6 would predict a step a
    million times faster than the hardware figures allow (a damaged or hand-edited file)."""
    for name in ("bandwidth_efficiency", "compute_efficiency"):
        value = getattr(profile, name)
        _check(value is None or value <= 1, name, "a share of the peak in (0, 1], or null", value)
    return profile


def read_profile_document(data: Any, base: Profile = DEFAULT_PROFILE) -> tuple[Profile, Deployment | None]:
    """A profile file's contents: the profile, and the deployment it was fitted on (if recorded).
    A bare object of Profile fields is accepted too (overrides on ``base``)."""
    if not isinstance(data, Mapping):
        raise ValueError("profile file: expected a JSON object")
    if "profile" not in data:
        return _stored_fractions(Profile.from_dict(data, base)), None
    if data.get("format") not in (None, PROFILE_FORMAT):
        raise ValueError(f"profile file: format {data.get('format')!r} unknown; expected {PROFILE_FORMAT}")
    profile = _stored_fractions(Profile.from_dict(data["profile"], base))
    raw = data.get("deployment")
    if raw is None:
        return profile, None
    if not isinstance(raw, Mapping):
        raise ValueError("profile file: deployment must be an object")
    known = {f.name for f in fields(Deployment)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"profile file: deployment has unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
    return profile, Deployment(**raw)
