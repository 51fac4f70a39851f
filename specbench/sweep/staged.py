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

Tensor parallelism (``sweep.tensor_parallel_sizes``): a configuration carries its TP (``Config.tp``,
0 = the services' TP), a baseline at each TP is a candidate of its own, and a configuration's
speedup is against the baseline at its TP (the baseline's tokens/s per node there, with that TP's
servers per node, is what its cost scales from). The per-token acceptance a is pooled over every TP
(same target, draft and greedy verification); c is fitted per draft and TP. A TP whose baseline is
measured but none of whose speculative configurations is has no c of its own: the draft's per-step
cost may carry over from a measured TP as time (c scales with the target steps' ratio, the
baselines' TPOTs) or as a share of the target step (c unchanged), and which one holds cannot be
known from one TP, so the prediction takes c anywhere between the two (uniform over the range in
the bootstrap). Stage 1 measures every TP's baseline, so after it every configuration has a
prediction and a TP is pruned as a k is: when each of its configurations is ruled out. With units
of several sizes a stage is one wave of what fits the free capacity together (specbench/sweep/plan.py
``Packing``).

Pure functions, standard library only.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from specbench.analysis import theory
from specbench.analysis.cost import cost_per_million_tokens
from specbench.sweep.plan import Estimates, Packing, Unit
from specbench.sweep.plan import units as plan_units
from specbench.sweep.plan import waves as plan_waves
from specbench.sweep.points import BASELINE as POINT_BASELINE
from specbench.sweep.points import SweepVariant, tp_name

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
    """A configuration a service can be deployed with: the baseline (no draft) or draft and k, at
    the services' TP (0) or another."""

    draft: str = ""
    k: int = 0
    method: str = ""
    tp: int = 0

    @property
    def is_baseline(self) -> bool:
        return not self.draft

    @property
    def label(self) -> str:
        text = "baseline" if self.is_baseline else f"{self.draft} k={self.k}"
        return f"{text} tp={self.tp}" if self.tp else text

    @property
    def compile_key(self) -> tuple[object, ...]:
        """As specbench/sweep/points.py SweepVariant.compile_key."""
        return (self.draft, self.k, self.method, *((self.tp,) if self.tp else ()))


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
    configuration's per-class measures (its speedups against the baseline at its own TP)."""

    baseline: Mapping[str, Mapping[str, BaseClass]]  # load -> class -> baseline (the services' TP)
    measured: Mapping[str, Mapping[Config, Mapping[str, ClassMeasure]]]  # load -> config -> class -> measure
    tp_baseline: Mapping[str, Mapping[int, Mapping[str, BaseClass]]] = field(default_factory=dict)  # load -> tp -> class

    def configs(self) -> set[Config]:
        at_tps = {Config(tp=tp) for by_tp in self.tp_baseline.values() for tp in by_tp}
        return {c for by_config in self.measured.values() for c in by_config} | {BASELINE} | at_tps

    def base(self, load: str, tp: int = 0) -> Mapping[str, BaseClass]:
        """The baseline a configuration at ``tp`` is measured against (and costed from)."""
        return self.baseline.get(load, {}) if not tp else self.tp_baseline.get(load, {}).get(tp, {})


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

    def value(
        self, speedups: Mapping[str, float], base: Mapping[str, BaseClass], reference: Mapping[str, BaseClass] | None = None
    ) -> float | None:
        """Higher is better: the mix-weighted speedup, or minus the mix-weighted cost per million
        output tokens. None when a weighted class has no figure. ``base`` is the baseline the
        speedups are against (the configuration's TP); ``reference``, when another (the services'
        TP), makes a speedup one in tokens/s per node against it (the cost needs no reference: it
        scales from ``base``'s own tokens/s per node)."""
        total = 0.0
        for cls, w in self.normalised().items():
            s = speedups.get(cls)
            if s is None or not s > 0:
                return None
            if reference is not None and reference is not base and not self.price_per_node_hour:
                mine, ref = (
                    (base.get(cls) or BaseClass(None)).tokens_per_s_per_node,
                    (reference.get(cls) or BaseClass(None)).tokens_per_s_per_node,
                )
                if not mine or not ref:
                    return None
                s *= mine / ref
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
    a is a per-token figure: the model does not let it depend on k, load or TP)."""
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


def fit_draft(observations: Observations, draft: str, load: str, tp: int = 0) -> DraftFit | None:
    a = pooled_acceptance(observations, draft)
    rows = [
        (cls, config.k, m.speedup, m.se)
        for config, classes in observations.measured.get(load, {}).items()
        if config.draft == draft and config.tp == tp
        for cls, m in classes.items()
    ]
    c = fit_c({cls: v for cls, (v, _) in a.items()}, [(cls, k, s) for cls, k, s, _ in rows])
    if c is None:
        return None
    # The residual beyond the measurements' own noise: what the model leaves unexplained.
    excess = [((s - theory.expected_speedup(a[cls][0], k, c)) / s) ** 2 - (se / s) ** 2 for cls, k, s, se in rows if cls in a and s > 0]
    residual = math.sqrt(max(math.fsum(excess) / len(excess), 0.0)) if excess else 0.0
    return DraftFit(draft, load, a, c, residual)


def predict(fit: DraftFit, k: int, c_factor: float = 1.0) -> dict[str, float]:
    return {cls: theory.expected_speedup(a, k, fit.c * c_factor) for cls, (a, _) in fit.a.items()}


@dataclass(frozen=True)
class Transfer:
    """A draft's c at a TP without a speculative point of its own, from a TP that has one: c x a
    factor between ``low`` and ``high`` (1 and the target steps' ratio, module docstring)."""

    source_tp: int
    low: float
    high: float

    @property
    def middle(self) -> float:
        return (self.low + self.high) / 2


def step_ratio(source: Mapping[str, BaseClass], target: Mapping[str, BaseClass], classes: Iterable[str]) -> float | None:
    """The source TP's baseline step over the target TP's: the mean ratio of their median TPOTs."""
    ratios = [
        source[cls].tpot_s / target[cls].tpot_s  # type: ignore[operator]
        for cls in classes
        if cls in source and cls in target and source[cls].tpot_s and target[cls].tpot_s
    ]
    return math.fsum(ratios) / len(ratios) if ratios else None


def transfers(
    observations: Observations,
    load: str,
    groups: Iterable[tuple[str, int]],
    fits: Mapping[tuple[str, int], DraftFit | None],
    classes: Iterable[str],
) -> dict[tuple[str, int], Transfer]:
    """For every (draft, TP) without a fit but with a baseline at that TP: the range its c may take
    from the fitted TP whose baseline step is closest."""
    out = {}
    classes = list(classes)
    for draft, tp in groups:
        target = observations.base(load, tp)
        if fits.get((draft, tp)) is not None or not target:
            continue
        options = []
        for (d, source_tp), fit in fits.items():
            ratio = step_ratio(observations.base(load, source_tp), target, classes) if d == draft and fit is not None else None
            if ratio:
                options.append((abs(math.log(ratio)), source_tp, ratio))
        if options:
            _, source_tp, ratio = min(options)
            out[(draft, tp)] = Transfer(source_tp, min(1.0, ratio), max(1.0, ratio))
    return out


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
    reference = observations.baseline.get(load, {})
    measured = dict(observations.measured.get(load, {}))
    ones = {cls: ClassMeasure(1.0, 0.0) for cls in objective.normalised()}
    if reference:
        measured.setdefault(BASELINE, ones)
    for tp in sorted(observations.tp_baseline.get(load, {})):
        measured.setdefault(Config(tp=tp), ones)  # the baseline at another TP: speedup 1 against itself

    def base(config: Config) -> Mapping[str, BaseClass]:
        return observations.base(load, config.tp)

    def value(config: Config, speedups: Mapping[str, float]) -> float | None:
        return objective.value(speedups, base(config), reference if config.tp else None)

    all_configs = list(dict.fromkeys([BASELINE, *candidates]))
    groups = sorted({(c.draft, c.tp) for c in all_configs if not c.is_baseline})
    fits = {(draft, tp): fit_draft(observations, draft, load, tp) for draft, tp in groups}
    moved = transfers(observations, load, groups, fits, objective.normalised())
    rng = random.Random(seed)
    # Replicates: every measured speedup and acceptance redrawn from its standard error.
    replicate_values: dict[Config, list[float | None]] = {c: [] for c in all_configs}
    for _ in range(resamples):
        drawn = {
            config: {cls: max(m.speedup + rng.gauss(0.0, m.se), 1e-6) for cls, m in classes.items()} for config, classes in measured.items()
        }
        for config, speedups in drawn.items():
            if config in replicate_values:
                replicate_values[config].append(value(config, speedups))
        a_drawn: dict[str, dict[str, float]] = {}
        fitted: dict[tuple[str, int], tuple[float, float]] = {}  # (draft, tp) -> this replicate's c and model noise
        for (draft, tp), fit in fits.items():
            if fit is None:
                continue
            if draft not in a_drawn:  # one acceptance per draft and replicate: a is shared by every TP
                a_drawn[draft] = {cls: min(max(v + rng.gauss(0.0, se), 0.0), 0.9999) for cls, (v, se) in fit.a.items()}
            a = a_drawn[draft]
            rows = [
                (cls, config.k, s)
                for config, speedups in drawn.items()
                if config.draft == draft and config.tp == tp
                for cls, s in speedups.items()
            ]
            c = fit_c(a, rows)
            if c is None:
                continue
            noise = rng.gauss(0.0, fit.residual) if fit.residual else 0.0
            fitted[(draft, tp)] = (c, noise)
            for config in all_configs:
                if config.draft == draft and config.tp == tp and config not in measured:
                    predicted = {cls: theory.expected_speedup(v, config.k, c) * (1.0 + noise) for cls, v in a.items()}
                    replicate_values[config].append(value(config, predicted))
        for (draft, tp), transfer in moved.items():
            if (draft, transfer.source_tp) not in fitted:
                continue
            c_source, noise = fitted[(draft, transfer.source_tp)]
            c = c_source * (transfer.low + (transfer.high - transfer.low) * rng.random())
            for config in all_configs:
                if config.draft == draft and config.tp == tp and config not in measured:
                    predicted = {cls: theory.expected_speedup(v, config.k, c) * (1.0 + noise) for cls, v in a_drawn[draft].items()}
                    replicate_values[config].append(value(config, predicted))
    estimates: dict[Config, Estimate] = {}
    for config in all_configs:
        values = [v for v in replicate_values[config] if v is not None]
        if config in measured:
            per_class = {cls: m.speedup for cls, m in measured[config].items()}
            feasible = _feasible(objective, per_class, base(config), measured[config])
        else:
            fit = fits.get((config.draft, config.tp))
            transfer = moved.get((config.draft, config.tp))
            if fit is None and transfer is not None:
                fit, factor = fits.get((config.draft, transfer.source_tp)), transfer.middle
            else:
                factor = 1.0
            per_class = predict(fit, config.k, factor) if fit is not None and not config.is_baseline else {}
            feasible = _feasible(objective, per_class, base(config), {}) if per_class else True
        point = value(config, per_class) if per_class else None
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


def next_stage(decisions: Sequence[Decision], size: int, fits: Callable[[Sequence[Config]], bool] | None = None) -> list[Config]:
    """The next stage's configurations (at most ``size``; with ``fits``, those of the ranking that fit
    one wave together): per undecided load the model's predicted best, then its k neighbours (same
    draft and TP) the interval does not rule out, then the rest by upper bound."""
    open_decisions = [d for d in decisions if not d.made]
    ranked: list[Config] = []
    for d in open_decisions:
        by_point = sorted(d.undecided, key=lambda c: -(d.estimates[c].point if d.estimates[c].point is not None else math.inf))
        if by_point:
            top = by_point[0]
            ranked.append(top)
            ranked += [c for c in d.undecided if c.draft == top.draft and c.tp == top.tp and abs(c.k - top.k) == 1]
    for d in open_decisions:
        ranked += sorted(d.undecided, key=lambda c: -(d.estimates[c].high if d.estimates[c].high is not None else math.inf))
    if ranked:
        # A wave's node-hours are the same with a slot idle: fill it with the closest unmeasured
        # competitor (so every stage but the last is a full wave, and the worst case is bounded).
        for d in open_decisions:
            rest = [e for e in d.estimates.values() if not e.measured and e.config not in ranked]
            ranked += [e.config for e in sorted(rest, key=lambda e: -(e.point if e.point is not None else -math.inf))]
    ordered = list(dict.fromkeys(ranked))
    if fits is None:
        return ordered[: max(size, 1)]
    chosen: list[Config] = []
    for config in ordered:
        if fits([*chosen, config]):
            chosen.append(config)
    return chosen


# --- stage 1 --------------------------------------------------------------------------------------


def stage_one(candidates: Sequence[Config], precompiled: Iterable[Config] = ()) -> list[Config]:
    """Per draft the k nearest the middle of its allowed k values; a precompiled k within one of the
    middle wins (its graphs are in the bucket). The draft's k is taken at the services' TP when it is
    a candidate there, else at its first TP in the catalogue; then the baseline at every other TP
    (what that TP's speedups and cost scale from). The services' baseline is measured besides (not
    listed)."""
    done = set(precompiled)
    chosen = []
    for draft in dict.fromkeys(c.draft for c in candidates if not c.is_baseline):
        tps = [c.tp for c in candidates if c.draft == draft]
        tp = 0 if 0 in tps else tps[0]
        mine = sorted((c for c in candidates if c.draft == draft and c.tp == tp), key=lambda c: c.k)
        middle = (mine[0].k + mine[-1].k) / 2
        chosen.append(min(mine, key=lambda c: (c not in done or abs(c.k - middle) > 1, abs(c.k - middle), c.k)))
    chosen += [c for c in dict.fromkeys(candidates) if c.is_baseline and c.tp]
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
    baseline: Mapping[str, Mapping[str, BaseClass]],
    measured: Mapping[Config, Mapping[str, Mapping[str, ClassMeasure]]],
    tp_baseline: Mapping[int, Mapping[str, Mapping[str, BaseClass]]] | None = None,
) -> Observations:
    """Observations from per-configuration measurements (config -> load -> class -> measure) and
    the baselines at other TPs (tp -> load -> class -> baseline)."""
    by_load: dict[str, dict[Config, Mapping[str, ClassMeasure]]] = {load: {} for load in baseline}
    for config, loads in measured.items():
        for load, classes in loads.items():
            by_load.setdefault(load, {})[config] = classes
    at_tps: dict[str, dict[int, Mapping[str, BaseClass]]] = {}
    for tp, loads in (tp_baseline or {}).items():
        for load, classes in loads.items():
            at_tps.setdefault(load, {})[tp] = classes
    return Observations(baseline, by_load, at_tps)


def variant_of(config: Config) -> SweepVariant:
    if config.is_baseline:
        return SweepVariant(tp_name(POINT_BASELINE, config.tp), tp=config.tp)
    short = config.draft.rsplit("/", 1)[-1].lower().replace(".", "").replace("qwen3-", "q")
    return SweepVariant(tp_name(f"{short}-k{config.k}", config.tp), config.draft, config.k, config.method, config.tp)


def stage_units(
    stage: int, configs: Sequence[Config], compiled: Iterable[Config], variants: Mapping[Config, SweepVariant] | None = None
) -> tuple[Unit, ...]:
    """A stage's units: stage 1 the baseline, its configurations and the baseline again (the drift
    check, as a grid sweep's first and last wave); a later stage its configurations only."""
    named = [(variants or {}).get(c) or variant_of(c) for c in configs]
    keys = {c.compile_key for c in compiled}
    if stage == 1:
        return plan_units(named, keys)
    return tuple(Unit(i, v, False, v.compile_key in keys) for i, v in enumerate(named))


def stage_node_hours(units: tuple[Unit, ...], slots: int | Packing, loads: int, estimates: Estimates, nodes: int = 1) -> float:
    """A stage's node-hours: its waves (``slots`` units each, or what fits a ``Packing`` at once,
    whose own node count is used) x the nodes the sweep holds."""
    held = slots.nodes if isinstance(slots, Packing) else nodes
    return sum(w.minutes for w in plan_waves(units, slots, loads, estimates)) / 60 * held


def grid_node_hours(
    candidates: Sequence[Config], loads: int, slots: int | Packing, precompiled: Iterable[Config], estimates: Estimates, nodes: int = 1
) -> float:
    return stage_node_hours(stage_units(1, candidates, precompiled), slots, loads, estimates, nodes)


@dataclass(frozen=True)
class StagedCost:
    stage_one: float
    expected: float  # stage 1 and one more stage of ``slots`` compiled configurations
    worst: float  # stage 1, then one wave a stage until every candidate is measured
    grid: float


def staged_cost(
    candidates: Sequence[Config], loads: int, slots: int | Packing, precompiled: Sequence[Config], estimates: Estimates, nodes: int = 1
) -> StagedCost:
    first = stage_one(candidates, precompiled)
    one = stage_node_hours(stage_units(1, first, precompiled), slots, loads, estimates, nodes)
    rest = [c for c in candidates if c not in first and not c.is_baseline]
    compiled = [*precompiled, *first]
    held = slots.nodes if isinstance(slots, Packing) else nodes
    # One wave a stage: the rest's units in catalogue order, as many at once as the slots (or the packing) hold.
    later = [w.minutes / 60 * held for w in plan_waves(stage_units(2, rest, compiled), slots, loads, estimates)] if rest else []
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


def wave_fits(packing: Packing) -> Callable[[Sequence[Config]], bool]:
    """``next_stage``'s test: these configurations' units run at once on the free capacity."""
    return lambda configs: packing.fits([c.tp for c in configs])


def run_staged(
    candidates: Sequence[Config],
    measure: Callable[[Config], Mapping[str, Mapping[str, ClassMeasure]]],
    baseline: Mapping[str, Mapping[str, BaseClass]],
    objective: Objective,
    loads: Sequence[str],
    *,
    slots: int | Packing,
    precompiled: Sequence[Config] = (),
    estimates: Estimates = DEFAULT_ESTIMATES,
    nodes: int = 1,
    resamples: int = RESAMPLES,
    margin: float = 0.0,
    measure_baseline: Callable[[int], Mapping[str, Mapping[str, BaseClass]]] | None = None,
) -> StagedResult:
    """The whole staged sweep with ``measure`` standing in for a stage's Job (in-process truths; on
    the cluster ``specbench sweep next`` runs one step of this loop per stage). ``measure_baseline``
    measures the baseline at another TP (a candidate ``Config(tp=...)``)."""
    stages = [stage_one(candidates, precompiled)]
    measured: dict[Config, Mapping[str, Mapping[str, ClassMeasure]]] = {}
    at_tps: dict[int, Mapping[str, Mapping[str, BaseClass]]] = {}

    def run(config: Config) -> None:
        if config.is_baseline:
            if measure_baseline is None:
                raise ValueError(f"{config.label}: a baseline at another TP needs measure_baseline")
            at_tps[config.tp] = measure_baseline(config.tp)
        else:
            measured[config] = measure(config)

    for c in stages[0]:
        run(c)
    fits = wave_fits(slots) if isinstance(slots, Packing) else None
    size = slots.slots(0) if isinstance(slots, Packing) else slots
    hours = stage_node_hours(stage_units(1, stages[0], precompiled), slots, len(loads), estimates, nodes)
    decided_in: dict[str, int] = {}
    while True:
        observations = observe(baseline, measured, at_tps)
        decisions = {
            load: decide(observations, candidates, objective, load, resamples=resamples, seed=len(stages), margin=margin) for load in loads
        }
        for load, d in decisions.items():
            if d.made:
                decided_in.setdefault(load, len(stages))
        done = observations.configs()
        proposal = [c for c in next_stage(list(decisions.values()), size, fits) if c not in done]
        if not proposal:
            return StagedResult(stages, decisions, decided_in, observations, hours)
        compiled = [*precompiled, *done]
        hours += stage_node_hours(stage_units(len(stages) + 1, proposal, compiled), slots, len(loads), estimates, nodes)
        stages.append(proposal)
        for c in proposal:
            run(c)
