"""A sweep's answer: per prompt class and load, which draft and k to use, how sure we are, what the
standard model says, and up to which load speculation still pays.

Input: one ``Point`` per sweep point (a variant at a load level, its records and its measured
per-token acceptance per prompt class). ``points_from_runs`` builds them from the stored runs of a
sweep (run.json's ``sweep`` object, see specbench run --sweep-point) or from a multi-level run of
the long-running services (records carry their ``load_level``). Everything else is pure.

Statistics (specbench.stats): a speedup is median(baseline) / median(variant) at the same load,
with a seeded percentile bootstrap CI, each group resampled independently. "Statistically
indistinguishable from the best" is decided by a bootstrap of the DIFFERENCE of the two speedups
(baseline, best and other resampled together in each replicate, so the shared baseline is not
counted twice): a point is indistinguishable when that difference's CI contains 0, or cannot be
estimated (too few requests to tell). Points whose own CI lies wholly below the best's are told
apart without it (non-overlapping intervals imply a difference; the converse does not hold).

The model (specbench.theory, Leviathan et al. 2023): S(a, k, c) = E(a, k) / (k c + 1). Per class,
load and draft, a is the mean of the draft's measured per-token acceptance over its points, and
the draft cost c is fitted by least squares to the measured TPOT speedups (golden-section search
on [0, C_MAX] after a grid, the squared error being smooth in c).

Standard library only, like the rest of the analysis (the aggregation Lambda may ship it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from specbench.analysis import cost, stats, stream_acceptance, sweep_mix, theory
from specbench.results.records import RequestRecord

BASELINE = "baseline"
CONCURRENCY, RATE = "concurrency", "rate"
LINEAR, LOG = "linear", "log"  # the load scale a crossover is interpolated on
TPOT, E2E, TTFT = "time_per_output_token_s", "end_to_end_latency_s", "ttft_s"
METRIC_TITLES = {TPOT: "time per output token", E2E: "end-to-end latency", TTFT: "time to first token"}
C_MAX = 2.0  # a draft step costing twice a target step: far beyond any useful draft


# --- inputs --------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Load:
    kind: str  # "concurrency" (closed loop: requests in flight) | "rate" (open loop: Poisson requests/s)
    value: float

    @property
    def label(self) -> str:
        """``c4`` / ``r2p5``: the point-id suffix (sweep-common contract: format(g), "." -> "p")."""
        return ("c" if self.kind == CONCURRENCY else "r") + format(self.value, "g").replace(".", "p")

    def describe(self) -> str:
        if self.kind == CONCURRENCY:
            return f"{format(self.value, 'g')} in flight"
        return f"{format(self.value, 'g')} requests/s (Poisson)"

    @classmethod
    def parse(cls, label: str) -> Load:
        """The inverse of ``label``; ValueError naming the allowed forms."""
        kind = {"c": CONCURRENCY, "r": RATE}.get(label[:1])
        try:
            value = float(label[1:].replace("p", "."))
        except ValueError:
            value = -1.0
        if kind is None or not value > 0:
            raise ValueError(f"load level {label!r}: expected c<concurrency> or r<requests per second>, e.g. c4 or r2p5")
        return cls(kind, value)


@dataclass(frozen=True)
class Variant:
    name: str
    draft_model: str | None = None
    k: int | None = None
    method: str | None = None
    tp: int | None = None  # a TP variant's tensor parallelism; None or 0: the services' (sweep.tensor_parallel_sizes)

    @property
    def is_baseline(self) -> bool:
        return not self.k

    def describe(self) -> str:
        if self.is_baseline:
            return "baseline (no speculation)"
        return f"{self.draft_model or self.name}, k = {self.k}"


@dataclass(frozen=True)
class Point:
    point_id: str
    variant: Variant
    load: Load
    wave: int
    records: tuple[RequestRecord, ...]
    acceptance: Mapping[str, float] = field(default_factory=dict)  # prompt class -> per-token acceptance a
    source: str = ""  # where the run is stored


@dataclass(frozen=True)
class Slo:
    ttft_ms: float | None = None
    tpot_ms: float | None = None


# --- outputs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CurvePoint:
    variant: str
    k: int
    tpot: stats.Interval  # speedup of the time per output token against the baseline at this load
    e2e: stats.Interval  # end-to-end speedup
    predicted: float | None  # the model's TPOT speedup with the fitted c
    requests: int


@dataclass(frozen=True)
class DraftCurve:
    draft_model: str
    a: float | None  # measured per-token acceptance (mean over the draft's points)
    c: float | None  # fitted draft cost
    points: list[CurvePoint]
    model_optimum: tuple[int, float] | None  # (k, predicted speedup) over 1..k_max
    a_source: str = ""  # where a comes from: "metrics" (/metrics counters), "stream" (tokens per chunk), both, or ""


@dataclass(frozen=True)
class Recommendation:
    variant: str  # "baseline" when no variant is faster
    draft_model: str | None
    k: int | None
    speedup: stats.Interval
    metric: str
    indistinguishable: list[str]  # other variants whose speedup cannot be told from the best's
    model_optimum: dict[str, tuple[int, float]]  # draft -> the model's (k, speedup)
    text: str
    cost: str = ""  # "$X -> $Y per M tokens (-Z%, CI ...)" at this load; "" without a price


@dataclass(frozen=True)
class LoadPoint:
    variant: str
    load: Load
    requests: int
    errors: int
    tokens_per_s_per_user: float | None  # median of output tokens / end-to-end per request
    tokens_per_s_per_node: float | None  # output tokens / busy seconds x servers per node (analysis.cost), pooled over the points
    ttft: stats.Distribution
    tpot: stats.Distribution
    goodput: float | None  # share of requests (failed ones count as missed) within the SLO
    speedup: stats.Interval | None  # against the baseline at this load (None for the baseline)
    # With their bootstrap CIs (analysis.cost): tokens/s per node while busy and USD per million output tokens.
    per_node: stats.Interval = field(default_factory=lambda: stats.Interval(None))
    cost_per_million: stats.Interval = field(default_factory=lambda: stats.Interval(None))
    # The cost of a million tokens of requests within the SLOs (busy time of every request); None without an SLO.
    goodput_cost_per_million: stats.Interval | None = None


@dataclass(frozen=True)
class Crossover:
    kind: str
    last_paying: float | None  # the highest load at which speculation still pays (CI above 1)
    first_not_paying: float | None  # None: pays at every measured load of this kind
    interpolated: float | None  # where the point estimate crosses 1 between the two, on ``scale``
    text: str
    scale: str = LINEAR  # the load scale of the interpolation: log for doubling (geometric) levels


@dataclass(frozen=True)
class Drift:
    load: Load
    first_wave: int
    last_wave: int
    ratio: stats.Interval  # median TPOT first wave / last wave: > 1 means the baseline got faster
    text: str


@dataclass(frozen=True)
class ClassAnalysis:
    prompt_class: str
    curves: dict[str, list[DraftCurve]]  # load label -> one curve per draft
    recommendations: dict[str, Recommendation]  # load label -> recommendation
    best_variant: str  # the recommendation at the lowest load: followed across loads
    load_points: list[LoadPoint]  # baseline and best variant at each load
    pareto: list[LoadPoint]  # non-dominated in (tokens/s per user, tokens/s per node)
    crossovers: list[Crossover]
    drift: list[Drift]
    tensor_parallel_size: int = 0  # the points' TP (0: the services'): speedups against the baseline at it

    @property
    def title(self) -> str:
        """``code`` or, for a TP group of the sweep, ``code (TP 4)``."""
        return titled(self.prompt_class, self.tensor_parallel_size)


def titled(prompt_class: str, tp: int) -> str:
    return f"{prompt_class} (TP {tp})" if tp else prompt_class


@dataclass(frozen=True)
class SweepAnalysis:
    sweep_id: str
    loads: list[Load]
    classes: list[ClassAnalysis]
    table: list[str]  # the recommendation table, one line a class and load
    summary: list[str]  # the same, consecutive loads with the same recommendation merged ("up to 4 in flight")
    notes: list[str]
    metric: str
    confidence: float
    resamples: int
    servers_per_node: int
    price: cost.NodePrice = field(default_factory=lambda: cost.NodePrice(None))
    # Per load, every measured configuration (TP, method, draft, k) by its mix-weighted cost
    # (specbench/analysis/sweep_mix.py): the cheapest within the SLOs is the recommendation for the mix.
    mix: list[sweep_mix.MixRanking] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return stats.json_safe(asdict(self))


# --- pure pieces ---------------------------------------------------------------------------------


def fit_draft_cost(a: float, measured: Sequence[tuple[int, float]], c_max: float = C_MAX) -> float | None:
    """The c >= 0 minimising sum (s_k - S(a, k, c))^2 over measured (k, TPOT speedup) points."""
    points = [(k, s) for k, s in measured if k and s is not None and math.isfinite(s)]
    if not points:
        return None

    def error(c: float) -> float:
        return math.fsum((s - theory.expected_speedup(a, k, c)) ** 2 for k, s in points)

    grid = [c_max * i / 200 for i in range(201)]
    best = min(range(len(grid)), key=lambda i: error(grid[i]))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        if error(left) <= error(right):
            high = right
        else:
            low = left
    return (low + high) / 2


def speedup_difference(statistic: stats.Statistic = stats.median) -> Callable[..., float | None]:
    """s(best) - s(other), both against the same baseline resample."""

    def difference(baseline: Sequence[float], best: Sequence[float], other: Sequence[float]) -> float | None:
        below_best, below_other = statistic(best), statistic(other)
        if below_best == 0 or below_other == 0:
            return None
        reference = statistic(baseline)
        return reference / below_best - reference / below_other

    return difference


def indistinguishable(difference: stats.Interval) -> bool:
    """The best and the other cannot be told apart: the difference's CI holds 0, or is unknown."""
    if not difference.known:
        return True
    assert difference.low is not None and difference.high is not None
    return difference.low <= 0.0 <= difference.high


def pareto_front(points: Sequence[LoadPoint]) -> list[LoadPoint]:
    """Points no other beats on both tokens/s per user and tokens/s per node (ties kept)."""
    known = [p for p in points if p.tokens_per_s_per_user is not None and p.tokens_per_s_per_node is not None]

    def dominated(p: LoadPoint) -> bool:
        return any(
            q.tokens_per_s_per_user >= p.tokens_per_s_per_user  # type: ignore[operator]
            and q.tokens_per_s_per_node >= p.tokens_per_s_per_node  # type: ignore[operator]
            and (q.tokens_per_s_per_user, q.tokens_per_s_per_node) != (p.tokens_per_s_per_user, p.tokens_per_s_per_node)
            for q in known
        )

    return sorted((p for p in known if not dominated(p)), key=lambda p: -p.tokens_per_s_per_user)  # type: ignore[operator]


def pays(interval: stats.Interval | None) -> bool:
    """Speculation pays: the speedup's CI lies above 1 (its point, when there is no CI)."""
    if interval is None or interval.point is None:
        return False
    return interval.low > 1.0 if interval.known else interval.point > 1.0  # type: ignore[operator]


def interpolation_scale(loads: Sequence[float]) -> str:
    """The scale the loads were chosen on: log when they grow geometrically (every level the last
    times one factor >= 1.5, within 10 %: doubling levels), else linear. A speedup curve is convex in
    the load, so a straight line between doubling levels overstates the crossing; on log load it is
    close to straight (issue 26: 8 % too high on a batching server with a known crossover)."""
    values = sorted({v for v in loads if v > 0})
    if len(values) < 2:
        return LINEAR
    ratios = [b / a for a, b in zip(values, values[1:], strict=False)]
    if min(ratios) >= 1.5 and max(ratios) <= 1.1 * min(ratios):
        return LOG
    return LINEAR


def interpolate_crossing(before: tuple[float, float], after: tuple[float, float], scale: str) -> float:
    """Where a speedup going from before = (load, s > 1) to after = (load, s <= 1) crosses 1."""
    (x0, s0), (x1, s1) = before, after
    share = (s0 - 1.0) / (s0 - s1)
    if scale == LOG:
        return math.exp(math.log(x0) + share * (math.log(x1) - math.log(x0)))
    return x0 + share * (x1 - x0)


def crossover(kind: str, speedups: Sequence[tuple[float, stats.Interval | None]]) -> Crossover:
    """The load (of one kind, ascending) from which speculation no longer pays; the point estimate's
    crossing interpolated on the loads' own scale (``interpolation_scale``)."""
    ordered = sorted(speedups, key=lambda pair: pair[0])
    scale = interpolation_scale([value for value, _ in ordered])
    unit = "in flight" if kind == CONCURRENCY else "requests/s"
    last = None
    for index, (value, interval) in enumerate(ordered):
        if pays(interval):
            last = value
            continue
        interpolated = None
        if index and ordered[index - 1][1] is not None and interval is not None and interval.point is not None:
            before_value, before = ordered[index - 1]
            if before.point is not None and before.point > 1.0 >= interval.point:  # type: ignore[union-attr]
                interpolated = interpolate_crossing((before_value, before.point), (value, interval.point), scale)  # type: ignore[union-attr]
        if last is None:
            text = f"does not pay at the lowest measured load ({format(value, 'g')} {unit})"
        else:
            where = f" (point estimate crosses 1 at ~{interpolated:.3g}, interpolated on {scale} load)" if interpolated is not None else ""
            text = f"pays up to {format(last, 'g')} {unit}, not at {format(value, 'g')}{where}"
        return Crossover(kind, last, value, interpolated, text, scale)
    if last is None:
        return Crossover(kind, None, None, None, "no measured load")
    return Crossover(kind, last, None, None, f"pays at every measured load (up to {format(last, 'g')} {unit})", scale)


def goodput(records: Sequence[RequestRecord], slo: Slo) -> float | None:
    """Share of requests within both SLO limits; failed requests are outside. None without an SLO."""
    if not records or (slo.ttft_ms is None and slo.tpot_ms is None):
        return None
    return sum(1 for r in records if cost.within_slo(r, slo.ttft_ms, slo.tpot_ms)) / len(records)


def node_throughput(records: Sequence[RequestRecord], servers_per_node: int = 1) -> float | None:
    """Output tokens per second the server delivered while busy, x servers per node: busy as
    ``specbench.analysis.cost`` defines it for every figure (the union of the request windows)."""
    return cost.records_throughput(records, servers_per_node)


def recommendation_text(prompt_class: str, load: Load, rec_variant: Variant | None, speedup: stats.Interval, others: Sequence[str]) -> str:
    """``structured prompts at 4 in flight: Qwen3-1.7B, k = 9, 3.1x [2.9-3.3] (also: k = 7)``."""
    head = f"{prompt_class} prompts at {load.describe()}: "
    if rec_variant is None:
        return head + "no speculation (no variant is faster than the baseline)"
    text = head + rec_variant.describe()
    if speedup.point is not None:
        text += f", {speedup.point:.2f}x"
        if speedup.known:
            text += f" [{speedup.low:.2f}-{speedup.high:.2f}]"
    if others:
        text += f" (indistinguishable: {', '.join(others)})"
    return text


# --- the whole analysis --------------------------------------------------------------------------


class _Context:
    def __init__(
        self,
        resamples: int,
        confidence: float,
        price: cost.NodePrice | None = None,
        servers: int = 1,
        points: Sequence[Point] = (),
        slo: Slo | None = None,
    ) -> None:
        self.options = {"resamples": resamples, "confidence": confidence}
        self.price, self.servers = price or cost.NodePrice(None), servers
        self.slo = slo or Slo()
        # Every request's busy share, per point (one server's run) over all of its records.
        self.share_of: dict[int, cost.Share] = {}
        for point in points:
            timed = [r for r in point.records if cost.window(r) is not None]
            found = cost.shares(timed, self.slo.ttft_ms, self.slo.tpot_ms)
            self.share_of.update((id(r), share) for r, share in zip(timed, found, strict=True))

    def items(self, records: Iterable[RequestRecord]) -> list[cost.Share]:
        return [self.share_of[id(r)] for r in records if id(r) in self.share_of]

    def throughput(self, name: str, records: Sequence[RequestRecord], *seed: str) -> cost.Throughput:
        has_slo = self.slo.ttft_ms is not None or self.slo.tpot_ms is not None
        items = self.items(records)
        return cost.throughput(name, "", items, self.servers, self.price, slo=has_slo, seed=stats.seed_for(*seed, "cost"), **self.options)

    def cost_text(self, base: Sequence[RequestRecord], spec: Sequence[RequestRecord] | None, *seed: str) -> str:
        """``$X -> $Y per M tokens, saving +$Z (+P%; 95% CI ...)``; the baseline's cost alone when ``spec`` is None."""
        if not self.price.known:
            return ""
        b = self.throughput("baseline", base, *seed, "baseline").cost_per_million
        if spec is None:
            return f"{cost.describe_cost(b, self.price)} per M tokens" if b.point is not None else ""
        s = self.throughput("variant", spec, *seed, "variant").cost_per_million
        saving = cost.saving(
            "", "", self.items(base), self.items(spec), self.servers, self.servers, self.price, seed=stats.seed_for(*seed), **self.options
        )
        if b.point is None or s.point is None or saving is None or saving.percent.point is None:
            return ""
        # The saving as everywhere (cost.describe_saving): baseline - speculative, positive: cheaper.
        return f"${b.point:.2f} -> ${s.point:.2f} per M tokens, saving {cost.describe_saving(saving, self.price)}"

    def speedup(self, base: Sequence[RequestRecord], spec: Sequence[RequestRecord], metric: str, *seed: str) -> stats.Interval:
        return stats.speedup(_values(base, metric), _values(spec, metric), seed=stats.seed_for(*seed, metric), **self.options)


def analyze_sweep(
    points: Sequence[Point],
    *,
    sweep_id: str = "",
    metric: str = E2E,
    slo: Slo | None = None,
    resamples: int = 2000,
    confidence: float = 0.95,
    k_max: int = 15,
    servers_per_node: int = 1,
    drift_tolerance: float = 0.02,
    price: cost.NodePrice | None = None,
    weights: Mapping[str, float] | None = None,
    servers_by_tp: Mapping[int, int] | None = None,
    reference_tp: int | None = None,
) -> SweepAnalysis:
    """Every figure of the sweep's report. ``metric`` picks the recommendation (end-to-end: what a
    user waits for; or TPOT: what the model predicts). Points at other TPs (``variant.tp``) are
    analysed as groups of their own, against the baseline at their TP, with that TP's servers per
    node (``servers_by_tp``); ``weights`` is the traffic mix (default: equal weights over the measured
    classes) the cheapest configuration is recommended for, over every TP (``mix``);
    ``reference_tp`` is the services' TP, to name it."""
    if metric not in METRIC_TITLES:
        raise ValueError(f"metric {metric!r}: allowed {', '.join(METRIC_TITLES)}")
    slo = slo or Slo()
    price = price or cost.NodePrice(None)
    loads = sorted({p.load for p in points})
    classes = sorted({r.prompt_class for p in points for r in p.records})  # stable whatever order the points are read in
    notes: list[str] = []
    baselines = [p for p in points if p.variant.is_baseline]
    if not baselines:
        notes.append("no baseline point: no speedup can be computed")
    tps = sorted({int(p.variant.tp or 0) for p in points})
    servers = {0: servers_per_node, **{tp: n for tp, n in (servers_by_tp or {}).items() if tp}}
    missing = [tp for tp in tps if tp not in servers]
    if missing:
        raise ValueError(f"points at TP {', '.join(map(str, missing))}: no servers per node for that TP (servers_by_tp)")
    analyses = []
    for tp in tps:
        group = [p for p in points if int(p.variant.tp or 0) == tp]
        context = _Context(resamples, confidence, price, servers[tp], group, slo)
        for prompt_class in classes:
            analyses.append(
                _analyze_class(prompt_class, group, loads, metric, slo, context, k_max, servers[tp], notes, drift_tolerance, tp)
            )
    table = [rec.text for analysis in analyses for rec in analysis.recommendations.values()]
    summary = [line for analysis in analyses for line in summary_lines(analysis, loads, {p.variant.name: p.variant for p in points})]
    mix = sweep_mix.rank_configurations(
        points,
        weights or dict.fromkeys(classes, 1.0),
        slo.ttft_ms,
        slo.tpot_ms,
        price,
        servers,
        reference_tp=reference_tp,
        resamples=resamples,
        confidence=confidence,
    )
    return SweepAnalysis(sweep_id, loads, analyses, table, summary, notes, metric, confidence, resamples, servers_per_node, price, mix)


def summary_lines(cls: ClassAnalysis, loads: Sequence[Load], variants: Mapping[str, Variant]) -> list[str]:
    """The table's headline form: per load kind, consecutive levels recommending the same variant
    merge into one line, quoting the speedup at the highest of them (the least favourable):
    ``structured prompts up to 4 in flight: Qwen3-1.7B, k = 9, 3.10x [2.90-3.30] (at 4 in flight)``."""
    lines = []
    for kind in (CONCURRENCY, RATE):
        levels = sorted(load for load in loads if load.kind == kind and load.label in cls.recommendations)
        runs: list[list[Load]] = []
        for load in levels:
            if runs and cls.recommendations[runs[-1][-1].label].variant == cls.recommendations[load.label].variant:
                runs[-1].append(load)
            else:
                runs.append([load])
        for run in runs:
            first, last = run[0], run[-1]
            unit = "in flight" if kind == CONCURRENCY else "requests/s"
            if len(run) == 1:
                where = f"at {last.describe()}"
            elif first == levels[0]:
                where = f"up to {format(last.value, 'g')} {unit}"
            else:
                where = f"from {format(first.value, 'g')} to {format(last.value, 'g')} {unit}"
            rec = cls.recommendations[last.label]
            variant = variants.get(rec.variant) if rec.variant != BASELINE else None
            text = recommendation_text(cls.title, last, variant, rec.speedup, []).split(": ", 1)[1]
            text += f", {rec.cost}" if rec.cost else ""
            lines.append(f"{cls.title} prompts {where}: {text}" + (f" (at {last.describe()})" if len(run) > 1 else ""))
    return lines


def _analyze_class(
    prompt_class: str,
    points: Sequence[Point],
    loads: Sequence[Load],
    metric: str,
    slo: Slo,
    context: _Context,
    k_max: int,
    servers_per_node: int,
    notes: list[str],
    drift_tolerance: float,
    tp: int = 0,
) -> ClassAnalysis:
    """One class over ``points`` of one TP (its baseline is the reference of every speedup)."""
    title = titled(prompt_class, tp)
    mine = {p.point_id: [r for r in p.records if r.prompt_class == prompt_class] for p in points}
    variants = {p.variant.name: p.variant for p in points}
    curves: dict[str, list[DraftCurve]] = {}
    recommendations: dict[str, Recommendation] = {}
    speedups_at: dict[tuple[str, Load], stats.Interval] = {}
    for load in loads:
        at_load = [p for p in points if p.load == load]
        base = [r for p in at_load if p.variant.is_baseline for r in mine[p.point_id] if r.ok]
        spec = [p for p in at_load if not p.variant.is_baseline]
        if not base or not spec:
            continue
        good = {p.variant.name: [r for r in mine[p.point_id] if r.ok] for p in spec}
        acceptance = {p.variant.name: point_acceptance(p, prompt_class, base, good[p.variant.name], notes) for p in spec}
        curve_points: dict[str, list[CurvePoint]] = {}
        for p in sorted(spec, key=lambda p: (p.variant.draft_model or "", p.variant.k or 0)):
            seed = (prompt_class, load.label, p.variant.name)
            tpot, e2e = context.speedup(base, good[p.variant.name], TPOT, *seed), context.speedup(base, good[p.variant.name], E2E, *seed)
            speedups_at[(p.variant.name, load)] = tpot if metric == TPOT else e2e
            cp = CurvePoint(p.variant.name, int(p.variant.k or 0), tpot, e2e, None, len(mine[p.point_id]))
            curve_points.setdefault(p.variant.draft_model or p.variant.name, []).append(cp)
        drafts = []
        for draft, cps in curve_points.items():
            measured = [acceptance[cp.variant] for cp in cps if acceptance[cp.variant][0] is not None]
            a = math.fsum(value for value, _ in measured) / len(measured) if measured else None  # type: ignore[misc]
            a_source = "+".join(sorted({source for _, source in measured}))
            c = fit_draft_cost(a, [(cp.k, cp.tpot.point) for cp in cps]) if a is not None else None  # type: ignore[misc]
            if a is not None and c is not None:
                cps = [CurvePoint(cp.variant, cp.k, cp.tpot, cp.e2e, theory.expected_speedup(a, cp.k, c), cp.requests) for cp in cps]
                optimum = theory.best_k(a, c, k_max)
                optimum = optimum if optimum[0] else None
            else:
                optimum = None
            drafts.append(DraftCurve(draft, a, c, cps, optimum, a_source))
        curves[load.label] = drafts
        rec = _recommend(prompt_class, load, base, good, variants, drafts, metric, context, title)
        # Cost beside the recommendation, over every request of the two points (failed ones took busy time too).
        all_base = [r for p in at_load if p.variant.is_baseline for r in mine[p.point_id]]
        chosen = [r for p in spec if p.variant.name == rec.variant for r in mine[p.point_id]] if rec.variant != BASELINE else None
        money = context.cost_text(all_base, chosen, prompt_class, load.label)
        recommendations[load.label] = dataclasses.replace(rec, text=rec.text + (f"; {money}" if money else ""), cost=money)
    best = next((r.variant for r in recommendations.values()), BASELINE)
    load_points = []
    for load in loads:
        at_load = [p for p in points if p.load == load]
        for name in _unique([BASELINE, best]):
            # Per point (the baseline has one in the first and one in the last wave): a node's
            # throughput is measured over one point's busy time, never across the waves' gap.
            chosen = [mine[p.point_id] for p in at_load if (p.variant.is_baseline if name == BASELINE else p.variant.name == name)]
            if any(chosen):
                speedup = None if name == BASELINE else speedups_at.get((name, load))
                load_points.append(_load_point(name, load, chosen, slo, servers_per_node, speedup, context, prompt_class))
    crossovers = []
    if best != BASELINE:
        for kind in (CONCURRENCY, RATE):
            # Only loads where the speedup was measured (a baseline at that load): a gap is not "stops paying".
            pairs = [(lp.load.value, lp.speedup) for lp in load_points if lp.variant == best and lp.load.kind == kind and lp.speedup]
            if pairs:
                crossovers.append(crossover(kind, pairs))
    drift = _drift(prompt_class, points, mine, loads, context, notes, drift_tolerance, title)
    return ClassAnalysis(prompt_class, curves, recommendations, best, load_points, pareto_front(load_points), crossovers, drift, tp)


def _recommend(
    prompt_class: str,
    load: Load,
    base: Sequence[RequestRecord],
    good: Mapping[str, Sequence[RequestRecord]],
    variants: Mapping[str, Variant],
    drafts: Sequence[DraftCurve],
    metric: str,
    context: _Context,
    title: str = "",
) -> Recommendation:
    measured = {cp.variant: (cp.tpot if metric == TPOT else cp.e2e) for d in drafts for cp in d.points}
    ranked = sorted((name for name in measured if measured[name].point is not None), key=lambda n: -measured[n].point)  # type: ignore[operator]
    optimum = {d.draft_model: d.model_optimum for d in drafts if d.model_optimum}
    if not ranked or measured[ranked[0]].point <= 1.0:  # type: ignore[operator]
        text = recommendation_text(title or prompt_class, load, None, stats.Interval(None), [])
        return Recommendation(BASELINE, None, None, stats.Interval(1.0), metric, [], optimum, text)  # type: ignore[arg-type]
    best = ranked[0]
    tied = []
    for other in ranked[1:]:
        if _apart(measured[best], measured[other]):
            continue  # CIs that do not overlap: the difference's CI excludes 0 too; no bootstrap needed
        difference = stats.bootstrap_ci(
            (_values(base, metric), _values(good[best], metric), _values(good[other], metric)),
            speedup_difference(),
            seed=stats.seed_for(prompt_class, load.label, best, other, "difference"),
            **context.options,
        )
        if indistinguishable(difference):
            tied.append(other)
    variant = variants[best]
    others = [variants[o].describe() if variants[o].draft_model != variant.draft_model else f"k = {variants[o].k}" for o in tied]
    text = recommendation_text(title or prompt_class, load, variant, measured[best], others)
    if variant.draft_model in optimum:
        k, s = optimum[variant.draft_model]  # type: ignore[index]
        text += f"; model optimum k = {k} ({s:.2f}x)"
    return Recommendation(best, variant.draft_model, variant.k, measured[best], metric, tied, optimum, text)  # type: ignore[arg-type]


def _apart(best: stats.Interval, other: stats.Interval) -> bool:
    """The other's CI lies wholly below the best's. Then the two differ (non-overlapping CIs are the
    stricter test), so the bootstrap of the difference is skipped: it is most of the analysis time."""
    return best.known and other.known and other.high < best.low  # type: ignore[operator]


def _load_point(
    name: str,
    load: Load,
    groups: Sequence[Sequence[RequestRecord]],
    slo: Slo,
    servers_per_node: int,
    speedup: stats.Interval | None,
    context: _Context | None = None,
    prompt_class: str = "",
) -> LoadPoint:
    records = [r for group in groups for r in group]
    good = [r for r in records if r.ok]
    per_user = stats.clean([r.output_throughput_tps for r in good])
    per_node = [t for t in (node_throughput(group, servers_per_node) for group in groups) if t is not None]
    figures = context.throughput(name, records, prompt_class, load.label, name) if context else None
    return LoadPoint(
        variant=name,
        load=load,
        requests=len(records),
        errors=len(records) - len(good),
        tokens_per_s_per_user=stats.median(per_user) if per_user else None,
        # One figure: the pooled ratio (tokens over busy seconds of every point), as its interval is.
        tokens_per_s_per_node=figures.per_node.point if figures else (math.fsum(per_node) / len(per_node) if per_node else None),
        ttft=stats.distribution([r.ttft_s for r in good]),
        tpot=stats.distribution([r.time_per_output_token_s for r in good]),
        goodput=goodput(records, slo),
        speedup=speedup,
        per_node=figures.per_node if figures else stats.Interval(None),
        cost_per_million=figures.cost_per_million if figures else stats.Interval(None),
        goodput_cost_per_million=figures.goodput_cost_per_million if figures else None,
    )


def _drift(
    prompt_class: str,
    points: Sequence[Point],
    mine: Mapping[str, Sequence[RequestRecord]],
    loads: Sequence[Load],
    context: _Context,
    notes: list[str],
    tolerance: float,
    title: str = "",
) -> list[Drift]:
    """The baseline's TPOT in the first wave against the last, per load (the sweep re-measures it).
    Flagged when the ratio's CI excludes 1 and the point is more than ``tolerance`` away from it
    (with tight CIs a 0.5 % difference is "significant" but changes no recommendation)."""
    drifts = []
    for load in loads:
        waves = sorted({p.wave for p in points if p.variant.is_baseline and p.load == load})
        if len(waves) < 2:
            continue
        first, last = (
            [r for p in points if p.variant.is_baseline and p.load == load and p.wave == w for r in mine[p.point_id] if r.ok]
            for w in (waves[0], waves[-1])
        )
        ratio = context.speedup(last, first, TPOT, prompt_class, load.label, "drift")
        outside = ratio.known and not (ratio.low <= 1.0 <= ratio.high)  # type: ignore[operator]
        clear = outside and abs(ratio.point - 1.0) > tolerance  # type: ignore[operator]
        text = (
            f"{title or prompt_class}, {load.describe()}: baseline TPOT wave {waves[0]} / wave {waves[-1]} = {stats.format_interval(ratio)}"
            + (" - DRIFT: the waves differ" if clear else "")
        )
        if clear:
            notes.append(text)
        drifts.append(Drift(load, waves[0], waves[-1], ratio, text))
    return drifts


# --- reading stored runs -------------------------------------------------------------------------


def configured_slo(run: Mapping[str, Any], ttft_ms: float | None = None, tpot_ms: float | None = None) -> Slo:
    """The goodput limits: those given, else the deployment's ``sweep.slo_*`` as the run's settings
    snapshot recorded them (``plan.deployment.sweep.slo``), else none."""
    configured = (((run.get("plan") or {}).get("deployment") or {}).get("sweep") or {}).get("slo") or {}
    return Slo(ttft_ms if ttft_ms is not None else configured.get("ttft_ms"), tpot_ms if tpot_ms is not None else configured.get("tpot_ms"))


@dataclass(frozen=True)
class RecordedMix:
    """What the mix recommendation takes from a point's settings snapshot (``plan.deployment``)."""

    weights: dict[str, float] | None  # sweep.class_weights as synth resolved it; None: equal weights
    servers_by_tp: dict[int, int]  # servers per node at each other TP the points ran at
    reference_tp: int | None  # serving.tensor_parallel_size


def recorded_mix(run: Mapping[str, Any], points: Sequence[Point]) -> RecordedMix:
    """The traffic mix, each TP's servers per node (the recorded logical cores per node // TP) and
    the services' TP from a sweep point's run.json; ValueError when points ran at a TP whose servers
    per node the run cannot tell."""
    deployment = (run.get("plan") or {}).get("deployment") or {}
    weights = ((deployment.get("sweep") or {}).get("class_weights")) if isinstance(deployment.get("sweep"), dict) else None
    ok = isinstance(weights, dict) and weights and all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights.values())
    tps = {int(p.variant.tp or 0) for p in points} - {0}
    reference = (deployment.get("serving") or {}).get("tensor_parallel_size") if isinstance(deployment.get("serving"), dict) else None
    return RecordedMix(
        dict(weights) if ok else None,
        cost.servers_by_tp(deployment, tps) if tps else {},
        reference if isinstance(reference, int) and not isinstance(reference, bool) else None,
    )


def load_of_record(record: RequestRecord, default: Load) -> Load:
    level = getattr(record, "load_level", "")
    return Load.parse(level) if level else default


def points_from_run(
    run: Mapping[str, Any],
    records: Sequence[RequestRecord],
    acceptance: Mapping[str, Any],
    source: str = "",
    given_roles: Mapping[str, Any] | None = None,
) -> list[Point]:
    """A stored run as sweep points. A sweep point's run.json carries ``sweep``: its variant, load and
    wave. A multi-level run of the long-running services gives one point per service and level, each
    endpoint's role from specbench/results/roles.py (``given_roles``: a ``--role`` of the command;
    RolesUnknown when an endpoint's role cannot be told)."""
    from specbench.results.roles import run_roles

    plan = run.get("plan") or {}
    class_of = {c.get("name"): c.get("prompt_class") for c in (plan.get("suite") or {}).get("test_cases", []) if isinstance(c, dict)}
    for record in records:
        class_of.setdefault(record.test_case, record.prompt_class)
    sweep = run.get("sweep")
    if isinstance(sweep, dict):
        v, lo = sweep.get("variant") or {}, sweep.get("load") or {}
        variant = Variant(str(v.get("name", BASELINE)), v.get("draft_model"), v.get("k"), v.get("method"), v.get("tp"))
        load = Load(str(lo.get("kind", CONCURRENCY)), float(lo.get("value", 1)))
        a = _class_acceptance(acceptance, None, variant.k, class_of, None)
        return [Point(str(sweep.get("point_id", "")), variant, load, int(sweep.get("wave", 0)), tuple(records), a, source)]
    # A run of the long-running services: every endpoint is a variant; its role and k as recorded (issue 33).
    roles = run_roles(run, acceptance, (r.variant for r in records), given_roles)
    default = Load(CONCURRENCY, float((plan.get("load") or {}).get("concurrency", 1)))
    grouped: dict[tuple[str, Load], list[RequestRecord]] = {}
    for record in records:
        grouped.setdefault((record.variant, load_of_record(record, default)), []).append(record)
    points = []
    for (name, load), mine in sorted(grouped.items(), key=lambda item: (item[0][0], item[0][1])):
        role = roles[name]
        k = role.k if role.speculative else None
        variant = Variant(BASELINE if not k else name, role.draft_model or None, k, role.method or None)
        a = _class_acceptance(acceptance, name, k, class_of, load.label)
        points.append(Point(f"{variant.name}-{load.label}", variant, load, 0, tuple(mine), a, source))
    return points


def point_acceptance(
    point: Point, prompt_class: str, baseline: Sequence[RequestRecord], records: Sequence[RequestRecord], notes: list[str]
) -> tuple[float | None, str]:
    """The per-token acceptance a of one speculative point for one class, and its source: the
    /metrics counters where the server has them, else the stream's tokens per chunk (mean acceptance
    length L, a solved from E(a, k) = L), used only when the self-check passes (the baseline streams
    1 token per chunk, the point at most k + 1); a failed check is noted with its reason."""
    a = point.acceptance.get(prompt_class)
    if a is not None:
        return a, stream_acceptance.SOURCE_METRICS
    k = point.variant.k
    check = stream_acceptance.self_check(baseline, records, k)
    if not check.ok:
        notes.append(f"{prompt_class}, {point.point_id}: no acceptance from /metrics, and the stream's is unreliable: {check.reason}")
        return None, ""
    lengths = [f.length for r in records if (f := stream_acceptance.per_request(r, k)) is not None]
    mean_length = math.fsum(lengths) / len(lengths)  # self_check passed: at least one request has a figure
    return theory.acceptance_from_tokens_per_step(mean_length, int(k or 0)), stream_acceptance.SOURCE_STREAM


def _class_acceptance(
    acceptance: Mapping[str, Any], endpoint: str | None, k: int | None, class_of: Mapping[str, str], level: str | None = ""
) -> dict[str, float]:
    """Per class, the mean per-token acceptance a of its test cases from /metrics figures (where there
    are none, ``point_acceptance`` takes the stream's). ``acceptance`` is test case (with
    ``@level`` in a multi-level run) -> endpoint -> figures; a sweep point has one endpoint and one
    load (``level`` None: whatever level its files name)."""
    per_class: dict[str, list[float]] = {}
    for key, by_endpoint in acceptance.items():
        case, _, key_level = key.partition("@")
        if (level is not None and key_level != level) or not isinstance(by_endpoint, dict):
            continue
        figures = by_endpoint.get(endpoint) if endpoint else next(iter(by_endpoint.values()), None)
        estimate = theory.estimate_acceptance(figures, k)
        if estimate.a is not None and case in class_of:
            per_class.setdefault(class_of[case], []).append(estimate.a)
    return {name: math.fsum(values) / len(values) for name, values in per_class.items()}


# --- helpers -------------------------------------------------------------------------------------


def _values(records: Iterable[RequestRecord], metric: str) -> list[float]:
    return stats.clean([getattr(r, metric) for r in records])


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
