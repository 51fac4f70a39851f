"""The staged sweep (``sweep.strategy=staged``): measure a few configurations, let the standard model
pick the next ones, stop when the decision at every load is made.

What is decided: one configuration (method, draft, k; or no speculation) per load level for the
user's traffic mix, since k is compiled into a service. The objective is the mix-weighted cost per
million output tokens with a node price, else the mix-weighted speedup; a configuration whose
median TPOT (or TTFT) breaks an SLO for a weighted class is out. Per-class optima are diagnostics.

Stage 1 (``stage_one``): the baseline and, per draft (or head), the k nearest the middle of the k
values the sweep allows, preferring one whose graphs are in the bucket (a start, not a compilation).
Why one k and not the range's ends: under the model the per-token acceptance a does not depend on
k (it is measured from the /metrics counters or the stream, as today), so one point per draft gives
every class's a, and its speedups fix the draft cost c; the middle is nearest to any optimum, and
the edges are measured only when the model points there. Every later stage brackets the predicted
optimum with its neighbours.

The model (specbench.analysis.theory): S(a, k, c) = E(a, k) / (k c + 1), per (draft, load): a per
class pooled over the draft's points (inverse-variance), c fitted by least squares on the linear
form E / S - 1 = k c over every measured class and k. Its interval: a parametric bootstrap over the
fitted parameters (each replicate redraws every measured speedup and acceptance from its standard
error, refits c, and predicts every candidate), widened by the fit's unexplained relative residual.

The stop rule (``decide``), per load: the best measured configuration b is decided when every
unmeasured candidate u is ruled out, either because the bootstrap difference objective(b) -
objective(u) excludes 0 (lies above it), or because u's predicted upper bound does not beat b's
measured objective. Measured configurations that cannot be told from b are its ties. The next
stage (``next_stage``): per undecided load the candidate the model predicts best, then its k
neighbours the interval does not rule out, then the rest by upper bound; a stage is one wave of
``size`` units (the slots), its spare slots filled with the closest ruled-out competitors (an idle
slot costs the same node-hours), never one already measured (its points are in the bucket and
reused). So every stage but the last is a full wave, and the worst case (every candidate
measured) is stage 1 and ceil(rest / slots) waves.

Pure functions, standard library only.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from specbench.analysis import theory
from specbench.analysis.cost import cost_per_million_tokens
from specbench.sweep.plan import Estimates, Unit
from specbench.sweep.plan import units as plan_units
from specbench.sweep.plan import waves as plan_waves
from specbench.sweep.points import BASELINE as POINT_BASELINE
from specbench.sweep.points import SweepVariant

GRID, STAGED = "grid", "staged"
STRATEGIES = (GRID, STAGED)
SPEEDUP, COST = "speedup", "cost"
Z = 1.959964  # two-sided 95 %
RESAMPLES = 400
# Ruling a candidate out is a one-sided question (could it beat the best?): its bounds are the 5th
# and 95th percentiles of the replicates. Ties among measured points stay two-sided (2.5 / 97.5 %),
# as in specbench/analysis/sweep.py.
ONE_SIDED = 0.05
DEFAULT_ESTIMATES = Estimates(120.0, 15.0, 15.0)  # config/model.py's sweep.*_minutes defaults


@dataclass(frozen=True, order=True)
class Config:
    """A configuration a service can be deployed with: the baseline (no draft) or draft and k."""

    draft: str = ""
    k: int = 0
    method: str = ""

    @property
    def is_baseline(self) -> bool:
        return not self.draft

    @property
    def label(self) -> str:
        return "baseline" if self.is_baseline else f"{self.draft} k={self.k}"


BASELINE = Config()


@dataclass(frozen=True)
class ClassMeasure:
    """One configuration at one load for one prompt class, against the baseline at that load."""

    speedup: float  # the metric's speedup (median baseline / median configuration)
    se: float  # its standard error
    a: float | None = None  # per-token acceptance (metrics or stream); None for the baseline
    a_se: float = 0.0
    tpot_s: float | None = None  # median TPOT (the SLO check)
    ttft_s: float | None = None  # median TTFT


@dataclass(frozen=True)
class BaseClass:
    """The baseline at one load for one class: what cost and the SLOs scale from."""

    tokens_per_s_per_node: float | None
    tpot_s: float | None = None
    ttft_s: float | None = None


@dataclass(frozen=True)
class Observations:
    """Everything measured so far: per load, the baseline's per-class figures and each measured
    configuration's per-class measures."""

    baseline: Mapping[str, Mapping[str, BaseClass]]  # load -> class -> baseline
    measured: Mapping[str, Mapping[Config, Mapping[str, ClassMeasure]]]  # load -> config -> class -> measure

    def configs(self) -> set[Config]:
        return {c for by_config in self.measured.values() for c in by_config} | {BASELINE}


@dataclass(frozen=True)
class Objective:
    weights: Mapping[str, float]  # prompt class -> share of the traffic (normalised here)
    price_per_node_hour: float | None = None  # None: the mix-weighted speedup
    slo_tpot_s: float | None = None
    slo_ttft_s: float | None = None

    @property
    def kind(self) -> str:
        return COST if self.price_per_node_hour else SPEEDUP

    def normalised(self) -> dict[str, float]:
        total = math.fsum(w for w in self.weights.values() if w > 0)
        return {c: w / total for c, w in self.weights.items() if w > 0}

    def value(self, speedups: Mapping[str, float], base: Mapping[str, BaseClass]) -> float | None:
        """Higher is better: the mix-weighted speedup, or minus the mix-weighted cost per million
        output tokens. None when a weighted class has no figure."""
        total = 0.0
        for cls, w in self.normalised().items():
            s = speedups.get(cls)
            if s is None or not s > 0:
                return None
            if self.price_per_node_hour:
                tps = (base.get(cls) or BaseClass(None)).tokens_per_s_per_node
                if not tps:
                    return None
                cost = cost_per_million_tokens(self.price_per_node_hour, tps * s)
                if cost is None:
                    return None
                total -= w * cost
            else:
                total += w * s
        return total

    def display(self, value: float | None) -> str:
        if value is None:
            return "n/a"
        return f"${-value:.2f}/M tokens" if self.kind == COST else f"{value:.3f}x"

    def display_interval(self, low: float | None, high: float | None) -> str:
        """``[low - high]`` as shown, low to high: a cost is minus the objective, so its bounds swap."""
        shown = (high, low) if self.kind == COST else (low, high)
        return f"[{self.display(shown[0])} - {self.display(shown[1])}]"


# --- the model -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftFit:
    draft: str
    load: str
    a: Mapping[str, tuple[float, float]]  # class -> (a, se)
    c: float
    residual: float  # unexplained relative residual of the fit (added to the prediction's spread)


def pooled_acceptance(observations: Observations, draft: str) -> dict[str, tuple[float, float]]:
    """Per class, the draft's acceptance pooled over every measured point (inverse-variance mean;
    a is a per-token figure: the model does not let it depend on k or load)."""
    sums: dict[str, list[float]] = {}
    for by_config in observations.measured.values():
        for config, classes in by_config.items():
            if config.draft != draft:
                continue
            for cls, m in classes.items():
                if m.a is None:
                    continue
                w = 1.0 / max(m.a_se, 1e-4) ** 2
                acc = sums.setdefault(cls, [0.0, 0.0])
                acc[0] += w * m.a
                acc[1] += w
    return {cls: (total / w, 1.0 / math.sqrt(w)) for cls, (total, w) in sums.items()}


def fit_c(a: Mapping[str, float], measured: Iterable[tuple[str, int, float]]) -> float | None:
    """Least squares of E(a, k) / S - 1 = k c over (class, k, speedup); c >= 0."""
    num = den = 0.0
    for cls, k, s in measured:
        if cls not in a or not k or not s > 0:
            continue
        num += k * (theory.expected_tokens_per_step(a[cls], k) / s - 1.0)
        den += k * k
    return max(num / den, 0.0) if den else None


def fit_draft(observations: Observations, draft: str, load: str) -> DraftFit | None:
    a = pooled_acceptance(observations, draft)
    rows = [
        (cls, config.k, m.speedup, m.se)
        for config, classes in observations.measured.get(load, {}).items()
        if config.draft == draft
        for cls, m in classes.items()
    ]
    c = fit_c({cls: v for cls, (v, _) in a.items()}, [(cls, k, s) for cls, k, s, _ in rows])
    if c is None:
        return None
    # The residual beyond the measurements' own noise: what the model leaves unexplained.
    excess = [((s - theory.expected_speedup(a[cls][0], k, c)) / s) ** 2 - (se / s) ** 2 for cls, k, s, se in rows if cls in a and s > 0]
    residual = math.sqrt(max(math.fsum(excess) / len(excess), 0.0)) if excess else 0.0
    return DraftFit(draft, load, a, c, residual)


def predict(fit: DraftFit, k: int) -> dict[str, float]:
    return {cls: theory.expected_speedup(a, k, fit.c) for cls, (a, _) in fit.a.items()}


# --- the decision ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    config: Config
    measured: bool
    point: float | None  # the objective (measured, or the model's prediction)
    low: float | None
    high: float | None
    feasible: bool = True  # within the SLOs
    per_class: Mapping[str, float] = field(default_factory=dict)  # the class speedups behind ``point``


@dataclass(frozen=True)
class Decision:
    load: str
    best: Config | None  # None: no measured configuration is feasible
    best_value: float | None
    ties: tuple[Config, ...]  # measured, indistinguishable from the best
    undecided: tuple[Config, ...]  # unmeasured and not ruled out
    ruled_out: Mapping[Config, str]  # unmeasured -> why (the prediction)
    estimates: Mapping[Config, Estimate]

    @property
    def made(self) -> bool:
        return self.best is not None and not self.undecided


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _feasible(
    objective: Objective, per_class: Mapping[str, float], base: Mapping[str, BaseClass], measures: Mapping[str, ClassMeasure]
) -> bool:
    for cls in objective.normalised():
        b = base.get(cls) or BaseClass(None)
        m = measures.get(cls)
        tpot = (
            m.tpot_s if m is not None and m.tpot_s is not None else (b.tpot_s / per_class[cls] if b.tpot_s and per_class.get(cls) else None)
        )
        ttft = m.ttft_s if m is not None and m.ttft_s is not None else b.ttft_s
        if objective.slo_tpot_s is not None and tpot is not None and tpot > objective.slo_tpot_s:
            return False
        if objective.slo_ttft_s is not None and ttft is not None and ttft > objective.slo_ttft_s:
            return False
    return True


def decide(
    observations: Observations,
    candidates: Sequence[Config],
    objective: Objective,
    load: str,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    margin: float = 0.0,
) -> Decision:
    """The stop rule at one load (module docstring). ``candidates`` are the configurations the sweep
    allows (the baseline is always one). ``margin`` (a share of the best's objective, e.g. 0.02):
    a candidate whose predicted upper bound beats the best measured by less is not worth a
    compilation (0: the rule as stated; sweep.decision_margin)."""
    base = observations.baseline.get(load, {})
    measured = dict(observations.measured.get(load, {}))
    ones = {cls: ClassMeasure(1.0, 0.0) for cls in objective.normalised()}
    if base:
        measured.setdefault(BASELINE, ones)
    all_configs = list(dict.fromkeys([BASELINE, *candidates]))
    drafts = sorted({c.draft for c in all_configs if not c.is_baseline})
    fits = {d: fit_draft(observations, d, load) for d in drafts}
    rng = random.Random(seed)
    # Replicates: every measured speedup and acceptance redrawn from its standard error.
    replicate_values: dict[Config, list[float | None]] = {c: [] for c in all_configs}
    for _ in range(resamples):
        drawn = {
            config: {cls: max(m.speedup + rng.gauss(0.0, m.se), 1e-6) for cls, m in classes.items()} for config, classes in measured.items()
        }
        for config, speedups in drawn.items():
            if config in replicate_values:
                replicate_values[config].append(objective.value(speedups, base))
        for draft, fit in fits.items():
            if fit is None:
                continue
            a = {cls: min(max(v + rng.gauss(0.0, se), 0.0), 0.9999) for cls, (v, se) in fit.a.items()}
            rows = [(cls, config.k, s) for config, speedups in drawn.items() if config.draft == draft for cls, s in speedups.items()]
            c = fit_c(a, rows)
            if c is None:
                continue
            noise = rng.gauss(0.0, fit.residual) if fit.residual else 0.0
            for config in all_configs:
                if config.draft == draft and config not in measured:
                    predicted = {cls: theory.expected_speedup(v, config.k, c) * (1.0 + noise) for cls, v in a.items()}
                    replicate_values[config].append(objective.value(predicted, base))
    estimates: dict[Config, Estimate] = {}
    for config in all_configs:
        values = [v for v in replicate_values[config] if v is not None]
        if config in measured:
            per_class = {cls: m.speedup for cls, m in measured[config].items()}
            feasible = _feasible(objective, per_class, base, measured[config])
        else:
            fit = fits.get(config.draft)
            per_class = predict(fit, config.k) if fit is not None else {}
            feasible = _feasible(objective, per_class, base, {}) if per_class else True
        point = objective.value(per_class, base) if per_class else None
        low, high = (_percentile(values, ONE_SIDED), _percentile(values, 1.0 - ONE_SIDED)) if len(values) >= 10 else (None, None)
        estimates[config] = Estimate(config, config in measured, point, low, high, feasible, per_class)
    contenders = [e for e in estimates.values() if e.measured and e.feasible and e.point is not None]
    if not contenders:
        return Decision(load, None, None, (), tuple(c for c in all_configs if c not in measured), {}, estimates)
    best = max(contenders, key=lambda e: (e.point, e.config.is_baseline, -e.config.k))
    best_replicates = replicate_values[best.config]
    threshold = best.point + margin * abs(best.point)
    ties, undecided, ruled_out = [], [], {}
    for config, estimate in estimates.items():
        if config == best.config:
            continue
        if estimate.measured:
            if not estimate.feasible or estimate.point is None:
                continue
            diff = _differences(best_replicates, replicate_values[config])
            if not diff or _percentile(diff, 0.025) <= 0.0:
                ties.append(config)
            continue
        if estimate.point is not None and not estimate.feasible:
            ruled_out[config] = f"predicted outside the SLOs ({objective.display(estimate.point)})"
            continue
        if estimate.high is None:
            undecided.append(config)  # the model cannot predict it yet (no point of its draft)
            continue
        diff = _differences(best_replicates, replicate_values[config])
        interval = f"{objective.display(estimate.point)} {objective.display_interval(estimate.low, estimate.high)}"
        if diff and _percentile(diff, ONE_SIDED) > 0.0:
            ruled_out[config] = f"predicted {interval}: below the best measured {objective.display(best.point)}, difference CI above 0"
        elif estimate.high <= threshold:
            within = f" + {margin:.0%}" if margin else ""
            ruled_out[config] = f"predicted {interval}: upper bound below the best measured {objective.display(best.point)}{within}"
        else:
            undecided.append(config)
    return Decision(load, best.config, best.point, tuple(sorted(ties)), tuple(sorted(undecided)), ruled_out, estimates)


def _differences(best: Sequence[float | None], other: Sequence[float | None]) -> list[float]:
    return [b - o for b, o in zip(best, other, strict=False) if b is not None and o is not None]


def next_stage(decisions: Sequence[Decision], size: int) -> list[Config]:
    """The next stage's configurations (at most ``size``): per undecided load the model's predicted
    best, then its k neighbours the interval does not rule out, then the rest by upper bound."""
    open_decisions = [d for d in decisions if not d.made]
    ranked: list[Config] = []
    for d in open_decisions:
        by_point = sorted(d.undecided, key=lambda c: -(d.estimates[c].point if d.estimates[c].point is not None else math.inf))
        if by_point:
            top = by_point[0]
            ranked.append(top)
            ranked += [c for c in d.undecided if c.draft == top.draft and abs(c.k - top.k) == 1]
    for d in open_decisions:
        ranked += sorted(d.undecided, key=lambda c: -(d.estimates[c].high if d.estimates[c].high is not None else math.inf))
    if ranked:
        # A wave's node-hours are the same with a slot idle: fill it with the closest unmeasured
        # competitor (so every stage but the last is a full wave, and the worst case is bounded).
        for d in open_decisions:
            rest = [e for e in d.estimates.values() if not e.measured and e.config not in ranked]
            ranked += [e.config for e in sorted(rest, key=lambda e: -(e.point if e.point is not None else -math.inf))]
    return list(dict.fromkeys(ranked))[: max(size, 1)]


# --- stage 1 --------------------------------------------------------------------------------------


def stage_one(candidates: Sequence[Config], precompiled: Iterable[Config] = ()) -> list[Config]:
    """Per draft the k nearest the middle of its allowed k values; a precompiled k within one of the
    middle wins (its graphs are in the bucket). The baseline is measured besides (not listed)."""
    done = set(precompiled)
    chosen = []
    for draft in dict.fromkeys(c.draft for c in candidates if not c.is_baseline):
        mine = sorted((c for c in candidates if c.draft == draft), key=lambda c: c.k)
        middle = (mine[0].k + mine[-1].k) / 2
        chosen.append(min(mine, key=lambda c: (c not in done or abs(c.k - middle) > 1, abs(c.k - middle), c.k)))
    return chosen


# --- per-class diagnostics ------------------------------------------------------------------------


def class_optima(observations: Observations, load: str) -> dict[str, tuple[Config, float]]:
    """Per class, the measured configuration with the highest speedup (the baseline at 1.0)."""
    out: dict[str, tuple[Config, float]] = {}
    for config, classes in observations.measured.get(load, {}).items():
        for cls, m in classes.items():
            if m.speedup > out.get(cls, (BASELINE, 1.0))[1]:
                out[cls] = (config, m.speedup)
    for cls in observations.baseline.get(load, {}):
        out.setdefault(cls, (BASELINE, 1.0))
    return out


def parse_weights(text: Iterable[str]) -> dict[str, float]:
    """``CLASS:WEIGHT`` items -> weights; ValueError names the item and the allowed form."""
    weights: dict[str, float] = {}
    for item in text:
        name, _, value = item.partition(":")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"{item!r} is not CLASS:WEIGHT with a number") from None
        if not name or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"{item!r}: expected CLASS:WEIGHT with a weight >= 0")
        if name in weights:
            raise ValueError(f"{item!r}: class {name} given twice")
        weights[name] = weight
    if weights and not any(w > 0 for w in weights.values()):
        raise ValueError("every weight is 0: at least one class needs a weight > 0")
    return weights


# --- stages and their cost ------------------------------------------------------------------------


def observe(
    baseline: Mapping[str, Mapping[str, BaseClass]], measured: Mapping[Config, Mapping[str, Mapping[str, ClassMeasure]]]
) -> Observations:
    """Observations from per-configuration measurements (config -> load -> class -> measure)."""
    by_load: dict[str, dict[Config, Mapping[str, ClassMeasure]]] = {load: {} for load in baseline}
    for config, loads in measured.items():
        for load, classes in loads.items():
            by_load.setdefault(load, {})[config] = classes
    return Observations(baseline, by_load)


def variant_of(config: Config) -> SweepVariant:
    if config.is_baseline:
        return SweepVariant(POINT_BASELINE)
    short = config.draft.rsplit("/", 1)[-1].lower().replace(".", "").replace("qwen3-", "q")
    return SweepVariant(f"{short}-k{config.k}", config.draft, config.k, config.method)


def stage_units(
    stage: int, configs: Sequence[Config], compiled: Iterable[Config], variants: Mapping[Config, SweepVariant] | None = None
) -> tuple[Unit, ...]:
    """A stage's units: stage 1 the baseline, its configurations and the baseline again (the drift
    check, as a grid sweep's first and last wave); a later stage its configurations only."""
    named = [(variants or {}).get(c) or variant_of(c) for c in configs]
    keys = {(c.draft, c.k, c.method) for c in compiled}
    if stage == 1:
        return plan_units(named, keys)
    return tuple(Unit(i, v, False, v.compile_key in keys) for i, v in enumerate(named))


def stage_node_hours(units: tuple[Unit, ...], slots: int, loads: int, estimates: Estimates, nodes: int = 1) -> float:
    return sum(w.minutes for w in plan_waves(units, slots, loads, estimates)) / 60 * nodes


def grid_node_hours(
    candidates: Sequence[Config], loads: int, slots: int, precompiled: Iterable[Config], estimates: Estimates, nodes: int = 1
) -> float:
    return stage_node_hours(stage_units(1, candidates, precompiled), slots, loads, estimates, nodes)


@dataclass(frozen=True)
class StagedCost:
    stage_one: float
    expected: float  # stage 1 and one more stage of ``slots`` compiled configurations
    worst: float  # stage 1, then one wave a stage until every candidate is measured
    grid: float


def staged_cost(
    candidates: Sequence[Config], loads: int, slots: int, precompiled: Sequence[Config], estimates: Estimates, nodes: int = 1
) -> StagedCost:
    first = stage_one(candidates, precompiled)
    one = stage_node_hours(stage_units(1, first, precompiled), slots, loads, estimates, nodes)
    rest = [c for c in candidates if c not in first and not c.is_baseline]
    compiled = [*precompiled, *first]
    waves = [rest[i : i + slots] for i in range(0, len(rest), slots)]
    later = [stage_node_hours(stage_units(2, w, compiled), slots, loads, estimates, nodes) for w in waves]
    expected = one + (max(later) if later else 0.0)
    return StagedCost(one, expected, one + math.fsum(later), grid_node_hours(candidates, loads, slots, precompiled, estimates, nodes))


@dataclass(frozen=True)
class StagedResult:
    stages: list[list[Config]]
    decisions: dict[str, Decision]
    decided_in: dict[str, int]  # load -> the stage after which its decision was made
    observations: Observations
    node_hours: float

    @property
    def measured(self) -> set[Config]:
        return {c for stage in self.stages for c in stage} | {BASELINE}


def run_staged(
    candidates: Sequence[Config],
    measure: Callable[[Config], Mapping[str, Mapping[str, ClassMeasure]]],
    baseline: Mapping[str, Mapping[str, BaseClass]],
    objective: Objective,
    loads: Sequence[str],
    *,
    slots: int,
    precompiled: Sequence[Config] = (),
    estimates: Estimates = DEFAULT_ESTIMATES,
    nodes: int = 1,
    resamples: int = RESAMPLES,
    margin: float = 0.0,
) -> StagedResult:
    """The whole staged sweep with ``measure`` standing in for a stage's Job (in-process truths; on
    the cluster ``specbench sweep next`` runs one step of this loop per stage)."""
    stages = [stage_one(candidates, precompiled)]
    measured: dict[Config, Mapping[str, Mapping[str, ClassMeasure]]] = {c: measure(c) for c in stages[0]}
    hours = stage_node_hours(stage_units(1, stages[0], precompiled), slots, len(loads), estimates, nodes)
    decided_in: dict[str, int] = {}
    while True:
        observations = observe(baseline, measured)
        decisions = {
            load: decide(observations, candidates, objective, load, resamples=resamples, seed=len(stages), margin=margin) for load in loads
        }
        for load, d in decisions.items():
            if d.made:
                decided_in.setdefault(load, len(stages))
        proposal = [c for c in next_stage(list(decisions.values()), slots) if c not in measured]
        if not proposal:
            return StagedResult(stages, decisions, decided_in, observations, hours)
        hours += stage_node_hours(stage_units(len(stages) + 1, proposal, [*precompiled, *measured]), slots, len(loads), estimates, nodes)
        stages.append(proposal)
        for c in proposal:
            measured[c] = measure(c)
