"""The cheapest configuration for the traffic mix, per load: every measured configuration of a sweep
(its TP, method, draft and k, or no speculation) ranked by the mix-weighted cost of a million output
tokens, the SLOs checked per class (issue 37).

A configuration's cost is its own: output tokens per second of its server while busy (the union of
its request windows, specbench/analysis/cost.py), times the servers of its TP one node holds
(logical cores per node // TP: a server is charged its share of the node's devices), gives tokens/s
per node; a million tokens then take 10^6 / (tokens/s per node x 3600) node-hours, times the node
price in dollars. The mix is weighted per prompt class (``sweep.class_weights``): sum of w_c x
cost_c over the weighted classes, the weights normalised. Its interval is a percentile bootstrap of
that sum, each class's requests resampled on their own (specbench.analysis.stats ``bootstrap_ci``);
configurations the bootstrap of the difference cannot tell from the cheapest (its CI holds 0) are its
ties. A configuration is within the SLOs when, for every weighted class, its median TPOT and median
TTFT are within ``sweep.slo_tpot_ms`` and ``sweep.slo_ttft_ms`` (the staged decision's test,
specbench/sweep/staged.py); one that breaks them is ranked after those that do, with what it broke.

Loads are per server, as the sweep measures them: a TP 4 server at 4 in flight beside a TP 32
server at 4 in flight. Pure, standard library only; the points are duck-typed (``Point`` of
specbench/analysis/sweep.py), so this module imports nothing of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specbench.analysis import cost, stats

SECONDS_PER_HOUR = 3600.0
TOKENS = 1_000_000.0


@dataclass(frozen=True)
class ConfigCost:
    """One configuration at one load: its mix cost and what the SLO check saw."""

    variant: str  # the sweep variant's name (its points' prefix)
    tp: int  # the configuration's TP (the services' when the points recorded none)
    draft_model: str
    k: int
    method: str
    servers_per_node: int
    node_hours_per_million: stats.Interval  # mix-weighted node-hours per million output tokens
    dollars_per_million: stats.Interval  # the same in USD at the node price (point None without one)
    per_class: dict[str, float | None]  # node-hours per million output tokens, per weighted class
    tpot_s: dict[str, float | None]  # median TPOT per weighted class
    ttft_s: dict[str, float | None]
    requests: int
    within_slo: bool
    broken: str = ""  # what breaks the SLOs ("" within them)

    @property
    def label(self) -> str:
        what = "no speculation" if not self.k else f"{self.method or 'draft'} {self.draft_model}, k = {self.k}"
        return f"TP {self.tp}, {what}" if self.tp else what


@dataclass(frozen=True)
class MixRanking:
    load: str  # the load label (c4, r0p5)
    load_text: str  # "4 in flight"
    weights: dict[str, float]  # normalised
    ranked: list[ConfigCost]  # within the SLOs cheapest first, then those that break them
    best: str | None  # the cheapest within the SLOs (variant name); None: none is
    ties: list[str] = field(default_factory=list)  # variants whose cost the bootstrap cannot tell from the best's
    unranked: list[str] = field(default_factory=list)  # "<variant>: <why>" (a weighted class not measured)
    text: str = ""


def _mix(weights: Mapping[str, float], servers: int) -> Any:
    """The bootstrap's statistic: sum over classes of w_c x node-hours per million tokens."""

    def estimate(*groups: Sequence[cost.Share]) -> float | None:
        total = 0.0
        for w, items in zip(weights.values(), groups, strict=True):
            rate = cost.tokens_per_second(items)
            if not rate:
                return None
            total += w * TOKENS / (rate * servers * SECONDS_PER_HOUR)
        return total

    return estimate


def _difference(weights: Mapping[str, float], servers: tuple[int, int]) -> Any:
    n = len(weights)
    first, second = _mix(weights, servers[0]), _mix(weights, servers[1])

    def estimate(*groups: Sequence[cost.Share]) -> float | None:
        a, b = first(*groups[:n]), second(*groups[n:])
        return None if a is None or b is None else b - a

    return estimate


def _median(values: Sequence[float | None]) -> float | None:
    clean = stats.clean(values)
    return stats.median(clean) if clean else None


def _scaled(interval: stats.Interval, price: cost.NodePrice) -> stats.Interval:
    if not price.known or interval.point is None:
        return stats.Interval(None, confidence=interval.confidence)
    per = float(price.per_hour)  # type: ignore[arg-type]
    low, high = (interval.low * per, interval.high * per) if interval.known else (None, None)  # type: ignore[operator]
    return stats.Interval(interval.point * per, low, high, interval.confidence, interval.resamples)


def _slo_break(tpot: Mapping[str, float | None], ttft: Mapping[str, float | None], ttft_ms: float | None, tpot_ms: float | None) -> str:
    broken = []
    for cls in tpot:
        if tpot_ms is not None and tpot[cls] is not None and tpot[cls] * 1000 > tpot_ms:  # type: ignore[operator]
            broken.append(f"{cls} median TPOT {tpot[cls] * 1000:.1f} ms > {tpot_ms:g}")  # type: ignore[operator]
        if ttft_ms is not None and ttft[cls] is not None and ttft[cls] * 1000 > ttft_ms:  # type: ignore[operator]
            broken.append(f"{cls} median TTFT {ttft[cls] * 1000:.0f} ms > {ttft_ms:g}")  # type: ignore[operator]
    return "; ".join(broken)


def rank_configurations(
    points: Sequence[Any],
    weights: Mapping[str, float],
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    price: cost.NodePrice,
    servers_by_tp: Mapping[int, int],
    *,
    reference_tp: int | None = None,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> list[MixRanking]:
    """Per load, the configurations measured there, ranked (module docstring). ``servers_by_tp``:
    servers per node at each TP (0: the services' TP, ``reference_tp`` when known, for the labels)."""
    total = math.fsum(w for w in weights.values() if w > 0)
    if not total:
        return []
    mix = {cls: w / total for cls, w in sorted(weights.items()) if w > 0}
    out = []
    for load in sorted({p.load for p in points}):
        at = [p for p in points if p.load == load]
        groups: dict[str, list[Any]] = {}
        for p in at:
            groups.setdefault(p.variant.name, []).append(p)
        costs, unranked, shares = [], [], {}
        for name, mine in sorted(groups.items()):
            v = mine[0].variant
            tp = int(v.tp or 0)
            servers = servers_by_tp.get(tp)
            if servers is None:
                unranked.append(f"{name}: no servers per node for TP {tp}")
                continue
            by_class: dict[str, list[cost.Share]] = {cls: [] for cls in mix}
            tpot: dict[str, list[float | None]] = {cls: [] for cls in mix}
            ttft: dict[str, list[float | None]] = {cls: [] for cls in mix}
            for p in mine:  # busy shares over each point's whole run (one server), as every cost figure
                timed = [r for r in p.records if cost.window(r) is not None]
                for record, share in zip(timed, cost.shares(timed), strict=True):
                    if record.prompt_class in by_class:
                        by_class[record.prompt_class].append(share)
                for record in p.records:
                    if record.ok and record.prompt_class in tpot:
                        tpot[record.prompt_class].append(record.time_per_output_token_s)
                        ttft[record.prompt_class].append(record.ttft_s)
            missing = [cls for cls, items in by_class.items() if not items]
            if missing:
                unranked.append(f"{name}: no measured request of weighted class(es) {', '.join(missing)}")
                continue
            seed = stats.seed_for("mix", load.label, name)
            groups_ = tuple(by_class.values())
            nh = stats.bootstrap_ci(groups_, _mix(mix, servers), resamples=resamples, confidence=confidence, seed=seed)
            if nh.point is None:
                unranked.append(f"{name}: no throughput (no busy time)")
                continue
            per_class = {cls: _mix({cls: 1.0}, servers)(items) for cls, items in by_class.items()}
            medians = {cls: _median(values) for cls, values in tpot.items()}
            first = {cls: _median(values) for cls, values in ttft.items()}
            broken = _slo_break(medians, first, slo_ttft_ms, slo_tpot_ms)
            shown_tp = tp or (reference_tp or 0)
            costs.append(
                ConfigCost(
                    name,
                    shown_tp,
                    v.draft_model or "",
                    int(v.k or 0),
                    v.method or "",
                    servers,
                    nh,
                    _scaled(nh, price),
                    per_class,
                    medians,
                    first,
                    sum(len(p.records) for p in mine),
                    not broken,
                    broken,
                )
            )
            shares[name] = (groups_, servers)
        ranked = sorted(costs, key=lambda c: (not c.within_slo, c.node_hours_per_million.point, c.variant))
        best = ranked[0] if ranked and ranked[0].within_slo else None
        ties = []
        if best is not None:
            for other in ranked[1:]:
                if not other.within_slo:
                    continue
                a, b = best.node_hours_per_million, other.node_hours_per_million
                if a.known and b.known and b.low > a.high:  # type: ignore[operator]
                    continue  # intervals apart: the difference's excludes 0 too (the costly bootstrap skipped)
                (g_best, s_best), (g_other, s_other) = shares[best.variant], shares[other.variant]
                diff = stats.bootstrap_ci(
                    (*g_best, *g_other),
                    _difference(mix, (s_best, s_other)),
                    resamples=resamples,
                    confidence=confidence,
                    seed=stats.seed_for("mix", load.label, best.variant, other.variant),
                )
                if not diff.known or diff.low <= 0.0:  # type: ignore[operator]
                    ties.append(other.variant)
        describe = at[0].load.describe() if hasattr(at[0].load, "describe") else load.label
        ranking = MixRanking(load.label, describe, mix, ranked, best.variant if best else None, ties, unranked)
        out.append(MixRanking(**{**ranking.__dict__, "text": mix_text(ranking, price)}))
    return out


def describe_cost(c: ConfigCost, price: cost.NodePrice) -> str:
    """``$8.28 (7.90-8.70) per M output tokens`` with a price, else in node-hours."""
    if price.known and c.dollars_per_million.point is not None:
        return f"${stats.format_interval(c.dollars_per_million, unit='', digits=2)} per M output tokens"
    return f"{stats.format_interval(c.node_hours_per_million, unit='', digits=3)} node-hours per M output tokens"


def mix_text(ranking: MixRanking, price: cost.NodePrice) -> str:
    """``at 4 in flight, for the mix (code 0.75, qa 0.25): TP 4, draft Qwen/Qwen3-1.7B, k = 5, ...``."""
    weights = ", ".join(f"{cls} {w:.2f}" for cls, w in ranking.weights.items())
    head = f"at {ranking.load_text}, for the mix ({weights}): "
    by_name = {c.variant: c for c in ranking.ranked}
    if ranking.best is None:
        return head + "no measured configuration is within the SLOs" + (f" (cheapest: {ranking.ranked[0].label})" if ranking.ranked else "")
    best = by_name[ranking.best]
    text = head + f"{best.label}, {describe_cost(best, price)} ({best.servers_per_node} per node)"
    if ranking.ties:
        text += f" (indistinguishable: {', '.join(by_name[t].label for t in ranking.ties)})"
    return text
