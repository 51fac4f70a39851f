"""Known truths for a sweep over tensor parallelism and k (issue 37): the batching emulator's engine
serving each unit at its own TP, with a per-step overhead that depends on TP in a known way.

A ``TpTruth`` hides, per draft, every class's acceptance and the draft's per-step cost (as
specbench/emulator/sweep_truth.py), and the target's per-step overhead as a function of TP:
overhead(TP) = a + b x log2(TP) (collectives over more ranks cost more per step; the serving model
itself, specbench/analysis/serving_model.py, keeps the overhead fixed and says it cannot tell its
TP dependence from one TP). Every other term of a step comes from the serving model at the unit's
TP: the target's weights over that TP's devices' HBM bandwidth, its FLOPs over their peak, and the
draft's k steps on the same devices. So a TP 4 server (1 device at LNC 2) reads the 32B model's
weights from one chip: a slower step, but 16 of them fit a trn2.48xlarge.

The truth's own answer (``truth_costs``): per configuration the serving model's steady state
(``serving_model.predict``, closed loop at the load) on that TP with the truth's overhead, its
tokens/s per node (x servers per node), so its mix-weighted node-hours per million output tokens,
and its TPOT and TTFT against the SLOs. ``measure`` / ``points`` run a configuration on the
emulator's engine with a virtual clock (``server.simulate_closed_loop``, sampled acceptance), as the
sweep would measure it: the staged model's per-class measures, or the analysis's sweep points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from specbench.analysis import serving_model as sm
from specbench.analysis.sweep import CONCURRENCY, RATE, Load, Point, Variant
from specbench.emulator import server, sweep_truth
from specbench.results.records import RequestRecord
from specbench.sweep import staged
from specbench.sweep.plan import Estimates, Packing, Room

REFERENCE_TP = 32  # serving.tensor_parallel_size's default: a Config's tp 0
LNC = 2
DRAFT = "Qwen/Qwen3-1.7B"


@dataclass(frozen=True)
class TpTruth:
    name: str
    acceptance: Mapping[str, Mapping[str, float]]  # draft -> class -> per-token acceptance
    draft_overhead_s: Mapping[str, float]  # draft -> seconds per draft step
    overhead_a_s: float  # overhead(TP) = a + b log2(TP), seconds per target step
    overhead_b_s: float

    def overhead_s(self, tp: int) -> float:
        return self.overhead_a_s + self.overhead_b_s * math.log2(tp)

    def serving(self, tp: int, draft: str = "") -> sm.Profile:
        base = replace(sm.writeup_profile(), overhead_s=self.overhead_s(tp))
        return replace(base, draft_overhead_s=self.draft_overhead_s[draft]) if draft else base


@dataclass(frozen=True)
class TpShape:
    drafts: tuple[str, ...] = (DRAFT,)
    ks: tuple[int, ...] = (2, 4, 6, 8)
    tps: tuple[int, ...] = (4, 16)  # besides the reference TP (32)
    loads: tuple[str, ...] = ("c1",)
    classes: tuple[str, ...] = ("code", "qa")
    requests: int = 8
    max_tokens: int = 300
    max_num_seqs: int = 4
    precompiled: tuple[staged.Config, ...] = (staged.BASELINE, staged.Config(DRAFT, 7, "draft"))
    estimates: Estimates = Estimates(120.0, 15.0, 15.0)

    def tp_of(self, config: staged.Config) -> int:
        return config.tp or REFERENCE_TP

    def candidates(self) -> list[staged.Config]:
        """The catalogue: the reference TP's variants, then per other TP its baseline and variants."""
        out = [staged.Config(d, k, "draft") for d in self.drafts for k in self.ks]
        for tp in self.tps:
            out += [staged.Config(tp=tp), *(staged.Config(d, k, "draft", tp) for d in self.drafts for k in self.ks)]
        return out


def servers_per_node(tp: int) -> int:
    """trn2.48xlarge at LNC 2: 64 logical cores // TP (specbench/analysis/cost.py servers_per_node)."""
    return sm.TRN2_48XLARGE.devices_per_node * sm.TRN2_48XLARGE.physical_cores_per_device // LNC // tp


def deployment(shape: TpShape, config: staged.Config) -> sm.Deployment:
    dep = sm.Deployment(tensor_parallel_size=shape.tp_of(config), lnc=LNC, max_num_seqs=shape.max_num_seqs)
    return dep if config.is_baseline else replace(dep, method="draft", draft=config.draft, k=config.k)


def profile(truth: TpTruth, shape: TpShape, config: staged.Config, seed: int) -> server.EmulatorProfile:
    """The emulator serving ``config`` at its TP with the truth's step times."""
    acceptance = tuple((f"[{cls}]", a) for cls, a in (truth.acceptance.get(config.draft) or {}).items())
    return server.EmulatorProfile(
        num_speculative_tokens=config.k,
        acceptance=acceptance,
        max_num_seqs=shape.max_num_seqs,
        deployment=deployment(shape, config),
        serving_profile=truth.serving(shape.tp_of(config), config.draft),
        seed=seed,
    )


def simulate(truth: TpTruth, config: staged.Config, shape: TpShape) -> sweep_truth.Measurement:
    """One unit: the configuration at every load, class after class, on the engine's virtual clock."""
    per_load: dict[str, dict[str, list[server.TruthRecord]]] = {}
    for load in shape.loads:
        seed = sweep_truth._seed(truth.name, config.label, load)
        emulated = profile(truth, shape, config, seed)
        clients = int(float(load[1:].replace("p", ".")))
        per_load[load] = {}
        for cls in shape.classes:
            prompts = [sweep_truth._prompt(cls, i) for i in range(shape.requests)]
            per_load[load][cls], _ = server.simulate_closed_loop(emulated, prompts, clients, shape.requests, shape.max_tokens)
    return sweep_truth.Measurement(per_load)


def baseline_figures(base: sweep_truth.Measurement, tp: int) -> dict[str, dict[str, staged.BaseClass]]:
    """sweep_truth's baseline figures with tokens/s per node: x the servers of that TP per node."""
    out = {}
    for load, classes in sweep_truth.baseline_figures(base).items():
        scale = servers_per_node(tp)
        out[load] = {cls: replace(b, tokens_per_s_per_node=(b.tokens_per_s_per_node or 0.0) * scale or None) for cls, b in classes.items()}
    return out


# --- the analysis's points --------------------------------------------------------------------------


def variant(config: staged.Config) -> Variant:
    named = staged.variant_of(config)
    if config.is_baseline:
        return Variant(named.name, tp=config.tp or None)
    return Variant(named.name, config.draft, config.k, config.method, config.tp or None)


def points(truth: TpTruth, config: staged.Config, shape: TpShape, measured: sweep_truth.Measurement | None = None) -> list[Point]:
    """The configuration's sweep points as ``specbench run`` would store them: per load one point, its
    classes run one after another (each class's records after the last one's end), the /metrics
    position-0 acceptance per class."""
    measured = measured or simulate(truth, config, shape)
    out = []
    v = variant(config)
    for load_label, classes in measured.per_load.items():
        kind, value = (CONCURRENCY if load_label.startswith("c") else RATE), float(load_label[1:].replace("p", "."))
        records, acceptance, clock = [], {}, 1_700_000_000.0
        for cls, truths in classes.items():
            for t in truths:
                record = RequestRecord(f"{v.name}-{load_label}", v.name, f"{cls}-case", cls, "native", t.ordinal, clock + t.arrival_s)
                record.ttft_s, record.end_to_end_latency_s = t.ttft_s, t.e2e_s
                record.time_per_output_token_s, record.output_tokens = t.time_per_output_token_s, t.output_tokens
                record.output_throughput_tps = t.output_tokens / t.e2e_s if t.e2e_s else None
                records.append(record)
            clock += max(t.arrival_s + (t.e2e_s or 0.0) for t in truths)
            steps = [n for t in truths for n in t.accepted_per_step]
            if steps:
                acceptance[cls] = sum(1 for n in steps if n >= 1) / len(steps)
        out.append(Point(f"{v.name}-{load_label}", v, Load(kind, value), 0, tuple(records), acceptance, "emulated"))
    return out


# --- the truth's answer -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TrueCost:
    config: staged.Config
    node_hours_per_million: float  # mix-weighted
    tpot_s: dict[str, float]
    ttft_s: dict[str, float]
    within_slo: bool


def truth_costs(
    truth: TpTruth, shape: TpShape, load: str, weights: Mapping[str, float], slo_tpot_s: float | None, slo_ttft_s: float | None
) -> list[TrueCost]:
    """Every candidate (and the reference baseline) by the serving model's steady state with the
    truth's parameters: within the SLOs cheapest first, then the rest."""
    clients = int(float(load[1:].replace("p", ".")))
    total = math.fsum(weights.values())
    out = []
    for config in [staged.BASELINE, *shape.candidates()]:
        tp = shape.tp_of(config)
        nh, tpot, ttft = 0.0, {}, {}
        for cls, w in weights.items():
            a = truth.acceptance.get(config.draft, {}).get(cls, 0.0)
            prompt_tokens = server.count_tokens(sweep_truth._prompt(cls, 0))
            workload = sm.Workload(prompt_tokens, shape.max_tokens)
            found = sm.predict(deployment(shape, config), truth.serving(tp, config.draft), a, clients, workload)
            nh += w / total * 1e6 / (found.tokens_per_s_per_node * 3600)
            tpot[cls], ttft[cls] = found.tpot_s, found.ttft_s
        ok = all((slo_tpot_s is None or t <= slo_tpot_s) for t in tpot.values()) and all(
            (slo_ttft_s is None or t <= slo_ttft_s) for t in ttft.values()
        )
        out.append(TrueCost(config, nh, tpot, ttft, ok))
    return sorted(out, key=lambda c: (not c.within_slo, c.node_hours_per_million))


def packing(shape: TpShape, free: Sequence[Room], demand: Mapping[int, Room]) -> Packing:
    return Packing(tuple(free), tuple(sorted(demand.items())), sm.TRN2_48XLARGE.devices_per_node)
