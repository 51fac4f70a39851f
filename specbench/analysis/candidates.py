"""Deployments as candidates: which (instance type, LNC, TP, servers per node, speculation) could
serve a model at all, and why the others cannot. Pure and standard library only (config/ passes in
what the catalog and the serving stacks say; nothing here imports config).

Three rules refuse a candidate, each with the numbers that broke it:

- **TP**: a service's devices must be a count the Neuron scheduler extension places on connected
  devices (``NodeRules.device_counts``: 1, 4, 8 or 16 of a 16-device Trainium node, "For all
  instance types, requesting one or all Neuron cores or devices is always valid"; Neuron docs,
  deploy/infrastructure/scheduler.rst; config/catalog.py ``schedulable_device_counts``). TP =
  devices x logical cores per device (8 physical cores / LNC): TP 4, 16, 32, 64 at LNC 2 on trn2.48xlarge.
- **Stack**: the serving stack that runs the method must be documented for the instance family
  (config/serving_stacks.py ``instance_families``).
- **HBM per rank** (``rank_memory``): what one logical core holds must fit its share of the device's
  HBM (HBM per device / logical cores per device: 24 GiB at LNC 2 on Trainium2):

      weights / TP (as NxD Inference shards them: query heads padded to a multiple of TP, KV heads
        replicated when TP > KV heads, embeddings and output layer split over TP, norms on every rank)
    + KV cache: 2 (K, V) x layers x KV heads per rank x head_dim x 2 bytes x max_num_seqs x max_model_len
    + the same two for the draft (fused speculation compiles draft and target onto the same ranks)
    + a reserve: the runtime's micro-code (96 MB per physical core, documented) and an assumed 2 GiB
      for scratchpad, DMA rings and collectives (``Reserve``; the compiler sizes scratchpad per graph)

KV heads per rank: NxD Inference's GQA sharding (neuronx-distributed-inference,
modules/attention/gqa.py ``get_shardable_head_counts``; the KV cache of kvcache/kv_cache_manager.py
is (batch, KV heads per rank, max_len, head_dim) per layer, allocated whole) keeps the KV heads when
TP divides them, replicates them to TP when TP is a multiple of them (REPLICATE_TO_TP_DEGREE: 8 KV
heads at TP 32 become 32, one per rank), and otherwise converts to MHA (as many KV heads as padded
query heads). vLLM does the same for TP >= KV heads (vllm/model_executor/layers/linear.py
QKVParallelLinear: ``num_kv_heads = 1``, ``num_kv_head_replicas = tp_size // total_num_kv_heads``).
So at TP 32 a rank holds 1 of Qwen3-32B's 8 KV heads, not 1/4 of one: the cache per rank stops
shrinking beyond TP 8, and the K/V projection weights are replicated likewise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from specbench.analysis import serving_model as sm

GIB = 1024**3
MIB = 1024**2
KV_BYTES = 2  # BF16 KV cache (NxD Inference allocates it in the model's dtype unless kv_cache_quant)

# Neuron docs, neuron-runtime/explore/device-memory.rst: "model code ... also includes a micro-code
# overhead of 96MB per physical Neuron Core". The rest of the runtime's share (shared scratchpad, allocated
# in 512 MB pages, sized per graph by the compiler; DMA rings; collectives) has no documented size: 2 GiB
# is this project's assumption, said so wherever a fit is printed.
MICROCODE_BYTES_PER_PHYSICAL_CORE = 96 * MIB
ASSUMED_SCRATCH_BYTES = 2 * GIB


@dataclass(frozen=True)
class Reserve:
    """HBM per rank that neither weights nor KV cache use."""

    microcode_per_physical_core: int = MICROCODE_BYTES_PER_PHYSICAL_CORE
    scratch: int = ASSUMED_SCRATCH_BYTES  # an assumption (see above)

    def bytes_per_rank(self, lnc: int) -> int:
        return self.microcode_per_physical_core * lnc + self.scratch

    def describe(self, lnc: int) -> str:
        return (
            f"reserve {self.bytes_per_rank(lnc) / GIB:.2f} GiB per rank: micro-code 96 MB per physical core x LNC {lnc} "
            f"(Neuron runtime docs) + {self.scratch / GIB:g} GiB for scratchpad, DMA rings and collectives (an assumption)"
        )


DEFAULT_RESERVE = Reserve()


@dataclass(frozen=True)
class NodeRules:
    """What one instance type offers a service: the LNC settings its chips take, the device counts the
    Neuron scheduler extension allocates as a connected set, and the serving stacks documented for it."""

    instance_type: str
    lnc_options: tuple[int, ...]
    device_counts: tuple[int, ...]
    stacks: tuple[str, ...]

    @property
    def hardware(self) -> sm.Hardware:
        try:
            return sm.HARDWARE[self.instance_type]
        except KeyError:
            known = ", ".join(sorted(sm.HARDWARE))
            raise ValueError(f"instance type {self.instance_type!r} has no chip figures in the serving model; known: {known}") from None

    def logical_cores_per_device(self, lnc: int) -> int:
        return self.hardware.physical_cores_per_device // lnc

    def allowed_tp(self, lnc: int) -> tuple[int, ...]:
        per_device = self.logical_cores_per_device(lnc)
        return tuple(n * per_device for n in self.device_counts if n <= self.hardware.devices_per_node)

    def hbm_per_rank(self, lnc: int) -> int:
        """HBM per logical core, bytes: the device's HBM over its logical cores."""
        return int(self.hardware.hbm_gib_per_device * GIB) // self.logical_cores_per_device(lnc)


@dataclass(frozen=True)
class Candidate:
    """One way to serve: a deployment (instance type, LNC, TP, speculation; servers per node follow
    from TP and the node's devices), the stack that serves it, and the context it is sized for."""

    deployment: sm.Deployment
    stack: str
    max_model_len: int

    @property
    def tp(self) -> int:
        return self.deployment.tensor_parallel_size

    @property
    def servers_per_node(self) -> int:
        return self.deployment.replicas_per_node

    @property
    def speculation(self) -> str:
        d = self.deployment
        return speculation_label(d.method, d.draft, d.k)

    @property
    def name(self) -> str:
        d = self.deployment
        return candidate_name(d.node_type, d.lnc, d.tensor_parallel_size, self.speculation)


def speculation_label(method: str, draft: str, k: int) -> str:
    return "baseline" if not method else f"{method} {draft.rpartition('/')[2] or '-'} k={k}"


def candidate_name(instance_type: str, lnc: int, tp: int, speculation: str) -> str:
    return f"{instance_type} LNC{lnc} TP{tp} {speculation}"


@dataclass(frozen=True)
class Refusal:
    """A candidate that cannot work and why: ``limit`` names the rule (tp, stack, hbm), ``reason`` its numbers."""

    name: str
    limit: str
    reason: str

    def describe(self) -> str:
        return f"{self.name}: {self.reason}"


# --- sharding arithmetic (NxD Inference's, cited in the module docstring) -------------------------


def extra_heads(heads: int, tp: int) -> int:
    """Heads NxD Inference pads so that TP divides them (neuronx_distributed parallel_layers/pad.py
    ``get_number_of_extra_heads``)."""
    return 0 if heads % tp == 0 else tp - heads % tp


def shardable_heads(shape: sm.ModelShape, tp: int) -> tuple[int, int]:
    """(query heads, KV heads) after padding and replication, summed over the TP ranks
    (gqa.py ``get_shardable_head_counts`` with the strategy ``determine_sharding_strategy`` picks)."""
    heads = shape.heads + extra_heads(shape.heads, tp)
    kv = shape.kv_heads
    if shape.heads == shape.kv_heads:  # MHA
        return heads, heads
    if kv < tp or kv % tp:
        kv = tp if tp % kv == 0 else heads  # REPLICATE_TO_TP_DEGREE, else CONVERT_TO_MHA
    return heads, kv


def kv_heads_per_rank(shape: sm.ModelShape, tp: int) -> int:
    return shardable_heads(shape, tp)[1] // tp


def kv_bytes_per_token(shape: sm.ModelShape) -> int:
    """KV cache per token of the whole model, unsharded: K and V, every layer, every KV head (BF16)."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * KV_BYTES


def kv_bytes_per_token_per_rank(shape: sm.ModelShape, tp: int) -> int:
    return 2 * shape.layers * kv_heads_per_rank(shape, tp) * shape.head_dim * KV_BYTES


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def weight_params_per_rank(shape: sm.ModelShape, tp: int) -> int:
    """Parameters one rank stores: each layer's attention with the padded and replicated heads of its
    share, its share of the MLP, the norms (on every rank), its share of the embeddings and of the
    output layer. A tied model stores the output layer too: NxD Inference clones the embedding into
    lm_head (``update_state_dict_for_tied_weights``, e.g. models/qwen2/modeling_qwen2.py). An EAGLE3
    head's extra parameters (fusion layer, wider query input) are taken as split over TP."""
    heads, kv = shardable_heads(shape, tp)
    q_rank, kv_rank = heads // tp, kv // tp
    attention = shape.hidden * (q_rank + 2 * kv_rank) * shape.head_dim + q_rank * shape.head_dim * shape.hidden
    mlp = 3 * shape.hidden * _ceil_div(shape.intermediate, tp)
    norms = 2 * shape.hidden + 2 * shape.head_dim
    embeddings = _ceil_div(shape.vocab, tp) * shape.hidden if shape.embeddings else 0
    lm_head = _ceil_div(shape.lm_head_vocab or shape.vocab, tp) * shape.hidden
    return shape.layers * (attention + mlp + norms) + embeddings + lm_head + _ceil_div(shape.extra_params, tp) + shape.hidden


def weight_bytes_per_rank(shape: sm.ModelShape, tp: int) -> int:
    return weight_params_per_rank(shape, tp) * sm.BYTES_PER_PARAM


@dataclass(frozen=True)
class RankMemory:
    """What one rank (logical core) of a candidate holds, bytes, against its share of the HBM."""

    target_weights: int
    target_kv: int
    draft_weights: int
    draft_kv: int
    reserve: int
    limit: int  # HBM per logical core
    kv_tokens: int  # max_num_seqs x max_model_len
    kv_heads_per_rank: int
    reserve_text: str = ""

    @property
    def total(self) -> int:
        return self.target_weights + self.target_kv + self.draft_weights + self.draft_kv + self.reserve

    @property
    def fits(self) -> bool:
        return self.total <= self.limit

    def describe(self) -> str:
        gib = lambda b: f"{b / GIB:.2f}"  # noqa: E731
        draft = f" + draft weights {gib(self.draft_weights)} + draft KV {gib(self.draft_kv)}" if self.draft_weights else ""
        return (
            f"weights {gib(self.target_weights)} + KV {gib(self.target_kv)} ({self.kv_tokens} tokens, "
            f"{self.kv_heads_per_rank} KV head(s) per rank){draft} + reserve {gib(self.reserve)} = {gib(self.total)} GiB "
            f"{'<=' if self.fits else '>'} {gib(self.limit)} GiB HBM per logical core"
        )


def rank_memory(candidate: Candidate, rules: NodeRules, reserve: Reserve = DEFAULT_RESERVE) -> RankMemory:
    dep, tp = candidate.deployment, candidate.tp
    tokens = dep.max_num_seqs * candidate.max_model_len
    target, draft = dep.target_shape, dep.draft_shape
    return RankMemory(
        weight_bytes_per_rank(target, tp),
        kv_bytes_per_token_per_rank(target, tp) * tokens,
        weight_bytes_per_rank(draft, tp) if draft else 0,
        kv_bytes_per_token_per_rank(draft, tp) * tokens if draft else 0,
        reserve.bytes_per_rank(dep.lnc),
        rules.hbm_per_rank(dep.lnc),
        tokens,
        kv_heads_per_rank(target, tp),
        reserve.describe(dep.lnc),
    )


# --- the rules -------------------------------------------------------------------------------------


def tp_problem(rules: NodeRules, lnc: int, tp: int) -> str:
    """Why TP ``tp`` at LNC ``lnc`` cannot be allocated on ``rules.instance_type`` ("" when it can)."""
    if lnc not in rules.lnc_options:
        return f"LNC {lnc} is not a setting of {rules.instance_type} (allowed: {', '.join(map(str, rules.lnc_options))})"
    per_device = rules.logical_cores_per_device(lnc)
    allowed = ", ".join(map(str, rules.allowed_tp(lnc)))
    if tp < 1 or tp % per_device:
        return f"TP {tp} is not a whole number of devices ({per_device} logical cores each at LNC {lnc}); allowed: TP {allowed}"
    devices = tp // per_device
    if tp not in rules.allowed_tp(lnc):
        counts = ", ".join(str(n) for n in rules.device_counts if n <= rules.hardware.devices_per_node)
        return (
            f"TP {tp} needs {devices} devices; the Neuron scheduler allocates {counts} connected device(s) on "
            f"{rules.instance_type} (TP {allowed} at LNC {lnc})"
        )
    return ""


def check(candidate: Candidate, rules: NodeRules, reserve: Reserve = DEFAULT_RESERVE) -> Refusal | None:
    """The first rule ``candidate`` breaks (TP, stack, HBM), or None when it can be served."""
    dep = candidate.deployment
    if dep.node_type != rules.instance_type:
        raise ValueError(f"candidate {candidate.name} checked against the rules of {rules.instance_type}")
    problem = tp_problem(rules, dep.lnc, dep.tensor_parallel_size)
    if problem:
        return Refusal(candidate.name, "tp", problem)
    if candidate.stack not in rules.stacks:
        stacks = ", ".join(rules.stacks) or "none"
        return Refusal(
            candidate.name, "stack", f"serving stack {candidate.stack} is not documented for {rules.instance_type} (stacks: {stacks})"
        )
    memory = rank_memory(candidate, rules, reserve)
    if not memory.fits:
        return Refusal(candidate.name, "hbm", f"does not fit HBM per rank: {memory.describe()}")
    return None


@dataclass(frozen=True)
class Speculation:
    """A speculation option: method ("" for none), draft (model or head id) and k."""

    method: str = ""
    draft: str = ""
    k: int = 0

    @property
    def is_baseline(self) -> bool:
        return not self.method


@dataclass(frozen=True)
class Space:
    """The candidates that can be served, and the refused ones with their reasons."""

    candidates: list[Candidate] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


def candidate_space(
    target: str,
    speculations: Sequence[Speculation],
    rules: Iterable[NodeRules],
    stack_methods: Mapping[str, Sequence[str]],
    max_num_seqs: int,
    max_model_len: int,
    lncs: Sequence[int] | None = None,
    tps: Sequence[int] | None = None,
    reserve: Reserve = DEFAULT_RESERVE,
    preferred_stacks: Sequence[str] = (),
) -> Space:
    """Every (instance type, LNC, TP, speculation) of ``rules``: TP each allocatable count (or those of
    ``tps``, refused where not allocatable), LNC each of the instance's (or of ``lncs``); each
    speculation served by the first stack of ``preferred_stacks`` (then of ``stack_methods``) that runs its
    method (every stack serves the baseline). ``stack_methods``: stack id -> its method ids."""
    if max_model_len < 1 or max_num_seqs < 1:
        raise ValueError(f"max_model_len {max_model_len} and max_num_seqs {max_num_seqs} must be at least 1")
    space = Space()
    order = list(dict.fromkeys([*preferred_stacks, *stack_methods]))
    for node in rules:
        for lnc in lncs or node.lnc_options:
            if lnc not in node.lnc_options:
                space.refused.append(Refusal(f"{node.instance_type} LNC{lnc}", "tp", tp_problem(node, lnc, 0)))
                continue
            for tp in tps or node.allowed_tp(lnc):
                for spec in speculations:
                    refusal, candidate = _candidate(node, lnc, tp, spec, order, stack_methods, target, max_num_seqs, max_model_len)
                    if candidate is not None:
                        refusal = check(candidate, node, reserve)
                    if refusal is None and candidate is not None:
                        space.candidates.append(candidate)
                    elif refusal is not None:
                        space.refused.append(refusal)
    return space


def _candidate(
    node: NodeRules,
    lnc: int,
    tp: int,
    spec: Speculation,
    order: Sequence[str],
    stack_methods: Mapping[str, Sequence[str]],
    target: str,
    max_num_seqs: int,
    max_model_len: int,
) -> tuple[Refusal | None, Candidate | None]:
    label = candidate_name(node.instance_type, lnc, tp, speculation_label(spec.method, spec.draft, spec.k))
    problem = tp_problem(node, lnc, tp)
    if problem:
        return Refusal(label, "tp", problem), None
    able = [s for s in order if spec.is_baseline or spec.method in stack_methods.get(s, ())]
    if not able:
        return Refusal(label, "stack", f"no serving stack runs method {spec.method}"), None
    stack = next((s for s in able if s in node.stacks), able[0])  # one not on this node: refused by check, named
    dep = sm.Deployment(
        target=target,
        method=spec.method,
        draft=spec.draft,
        k=spec.k,
        tensor_parallel_size=tp,
        lnc=lnc,
        max_num_seqs=max_num_seqs,
        node_type=node.instance_type,
    )
    return None, Candidate(dep, stack, max_model_len)
