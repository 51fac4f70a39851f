"""Rank serving candidates by cost per million output tokens at each load, mark the SLOs each breaks,
and find the cost-latency Pareto front. Pure and standard library only.

The input is generic (``Figures``): per candidate and load a TPOT, a TTFT and tokens/s per node, each a
range (low, high), with where they came from: a prediction of the serving model over the TP range of
its per-step overhead (specbench/analysis/tp_range.py), or a measurement (a range of one point, or a
confidence interval). Ranges carry through: cost = price per node-hour / tokens per node-hour, so its
low end is the price over the high end of the throughput.

- SLO per figure: "meets" when the whole range is within the limit, "breaks" when all of it is
  beyond, "may break" otherwise; a row takes the worst of TPOT and TTFT.
- Order within a load: priced rows by the high end of their cost (what they cost at worst), then the
  low end, then TPOT; rows without a price after them.
- Pareto front of (cost, TPOT), lower is better on both: ``pareto_front`` on points; with ranges
  (``pareto_marks``) a row is "yes" when no other row could dominate it whatever values the ranges
  take, "no" when another dominates it whatever they take, "maybe" otherwise. Conservative: the ranges
  of two rows are treated as independent even where one assumption moves both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from specbench.analysis.candidates import Candidate
from specbench.analysis.cost import cost_per_million_tokens

MEETS, MAY_BREAK, BREAKS = "meets", "may break", "breaks"
ON_FRONT, MAYBE_ON_FRONT, OFF_FRONT, UNPRICED = "yes", "maybe", "no", "-"
PREDICTED, MEASURED = "predicted", "measured"


@dataclass(frozen=True)
class Range:
    """A figure known to lie in [lo, hi] (lo == hi: a point)."""

    lo: float
    hi: float

    def __post_init__(self) -> None:
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (self.lo, self.hi))
        if not ok or self.lo > self.hi:
            raise ValueError(f"range: expected finite lo <= hi; got {self.lo!r}, {self.hi!r}")

    @classmethod
    def point(cls, value: float) -> Range:
        return cls(value, value)

    @classmethod
    def spanning(cls, values: Sequence[float]) -> Range:
        return cls(min(values), max(values))

    @property
    def is_point(self) -> bool:
        return self.lo == self.hi


@dataclass(frozen=True)
class Figures:
    """What a candidate serves at one load (clients in flight per server), predicted or measured."""

    candidate: Candidate
    concurrency: int
    tpot_s: Range
    ttft_s: Range
    tokens_per_s_per_node: Range
    source: str  # PREDICTED or MEASURED
    provenance: str  # where the figures' inputs came from (a profile's origin, a run)
    assumptions: tuple[str, ...] = ()  # what this row assumes beyond what all rows share
    # Consistent settings of what the ranges leave open (a prediction's beta, ``tp_range``): per
    # scenario label (TPOT s, TTFT s, tokens/s per node). Every row takes the same scenario at once, so
    # the Pareto front is judged per scenario; a row without them is the same in every scenario.
    scenarios: tuple[tuple[str, float, float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.source not in (PREDICTED, MEASURED):
            raise ValueError(f"figures: source must be {PREDICTED} or {MEASURED}; got {self.source!r}")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"figures: concurrency must be an integer >= 1; got {self.concurrency!r}")
        if self.tokens_per_s_per_node.lo <= 0 or self.tpot_s.lo < 0 or self.ttft_s.lo < 0:
            raise ValueError(f"figures of {self.candidate.name}: tokens/s must be > 0 and latencies >= 0")


@dataclass(frozen=True)
class Price:
    """USD per node-hour (None: no price, cost not computed) and where it came from."""

    per_hour: float | None
    source: str


@dataclass(frozen=True)
class Slo:
    """Limits per request (seconds); None: no limit."""

    tpot_s: float | None = None
    ttft_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("tpot_s", "ttft_s"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"slo: {name} must be a number > 0 (seconds) or None; got {value!r}")

    def describe(self) -> str:
        part = lambda name, v: f"{name} <= {v * 1e3:g} ms" if v is not None else f"no {name} limit"  # noqa: E731
        return f"{part('TPOT', self.tpot_s)}, {part('TTFT', self.ttft_s)}"


def slo_status(value: Range, limit: float | None) -> str:
    if limit is None or value.hi <= limit:
        return MEETS
    return BREAKS if value.lo > limit else MAY_BREAK


_SEVERITY = {MEETS: 0, MAY_BREAK: 1, BREAKS: 2}


def row_slo(figures: Figures, slo: Slo) -> tuple[str, str]:
    """The row's status (the worst of TPOT and TTFT) and which figure sets it ("" when it meets both)."""
    found = {"TPOT": slo_status(figures.tpot_s, slo.tpot_s), "TTFT": slo_status(figures.ttft_s, slo.ttft_s)}
    worst = max(found.values(), key=_SEVERITY.__getitem__)
    return worst, "" if worst == MEETS else "+".join(name for name, s in found.items() if s == worst)


def cost_range(price: Price, throughput: Range) -> Range | None:
    """USD per million output tokens over the throughput's range; None without a price."""
    lo = cost_per_million_tokens(price.per_hour, throughput.hi)
    hi = cost_per_million_tokens(price.per_hour, throughput.lo)
    return None if lo is None or hi is None else Range(lo, hi)


# --- the Pareto front --------------------------------------------------------------------------------


def _dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[0] and a[1] <= b[1] and (a[0] < b[0] or a[1] < b[1])


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For each (cost, latency) point, whether no other point is at least as good on both and better
    on one (equal points are all on the front)."""
    return [not any(_dominates(q, p) for j, q in enumerate(points) if j != i) for i, p in enumerate(points)]


def pareto_marks(boxes: Sequence[tuple[Range, Range]]) -> list[str]:
    """For each (cost range, latency range): ON_FRONT when no other box's best corner dominates its
    worst corner, OFF_FRONT when another's worst corner dominates its best corner, else MAYBE_ON_FRONT.
    On points it is ``pareto_front``."""
    marks = []
    for i, (cost, latency) in enumerate(boxes):
        others = [b for j, b in enumerate(boxes) if j != i]
        if any(_dominates((c.hi, t.hi), (cost.lo, latency.lo)) for c, t in others):
            marks.append(OFF_FRONT)
        elif any(_dominates((c.lo, t.lo), (cost.hi, latency.hi)) for c, t in others):
            marks.append(MAYBE_ON_FRONT)
        else:
            marks.append(ON_FRONT)
    return marks


def scenario_marks(fronts: Sequence[Sequence[bool]]) -> list[str]:
    """Per row: ON_FRONT when on the front in every scenario, OFF_FRONT in none, else MAYBE_ON_FRONT."""
    return [ON_FRONT if all(f) else OFF_FRONT if not any(f) else MAYBE_ON_FRONT for f in zip(*fronts, strict=True)]


# --- ranking -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankedRow:
    rank: int  # 1 = cheapest at this load (priced rows first)
    figures: Figures
    price: Price
    cost: Range | None  # USD per million output tokens
    slo: str  # MEETS, MAY_BREAK, BREAKS
    slo_detail: str  # which figure sets it: TPOT, TTFT, TPOT+TTFT, "" when it meets both
    pareto: str  # ON_FRONT, MAYBE_ON_FRONT, OFF_FRONT; UNPRICED without a cost


@dataclass(frozen=True)
class LoadRanking:
    concurrency: int
    rows: list[RankedRow] = field(default_factory=list)

    def cheapest_meeting(self) -> RankedRow | None:
        """The cheapest priced row that meets the SLOs over its whole range, if any."""
        return next((r for r in self.rows if r.cost is not None and r.slo == MEETS), None)


def _order(row: RankedRow) -> tuple:
    if row.cost is None:
        return (1, 0.0, 0.0, row.figures.tpot_s.hi, row.figures.candidate.name)
    return (0, row.cost.hi, row.cost.lo, row.figures.tpot_s.hi, row.figures.candidate.name)


def rank(figures: Sequence[Figures], prices: Mapping[str, Price], slo: Slo) -> list[LoadRanking]:
    """Per load (ascending), the rows ordered as the module docstring says, each with its SLO status
    and Pareto mark. ``prices``: instance type -> Price (a type not there has no price)."""
    by_load: dict[int, list[Figures]] = {}
    for f in figures:
        by_load.setdefault(f.concurrency, []).append(f)
    rankings = []
    for concurrency in sorted(by_load):
        rows = []
        for f in by_load[concurrency]:
            price = prices.get(f.candidate.deployment.node_type) or Price(None, f"no price for {f.candidate.deployment.node_type}")
            status, detail = row_slo(f, slo)
            rows.append(RankedRow(0, f, price, cost_range(price, f.tokens_per_s_per_node), status, detail, UNPRICED))
        priced = [i for i, r in enumerate(rows) if r.cost is not None]
        marks = front_marks([rows[i] for i in priced])
        for i, mark in zip(priced, marks, strict=True):
            rows[i] = _with(rows[i], pareto=mark)
        rows.sort(key=_order)
        rankings.append(LoadRanking(concurrency, [_with(r, rank=n) for n, r in enumerate(rows, 1)]))
    return rankings


def _with(row: RankedRow, **changes: object) -> RankedRow:
    return replace(row, **changes)  # type: ignore[arg-type]


def _scenario_point(row: RankedRow, label: str) -> tuple[float, float] | None:
    """(cost, TPOT) of a priced row in one scenario; a row without scenarios is its point (None when
    its figures are ranges: it cannot be placed in a scenario)."""
    f = row.figures
    for name, tpot, _ttft, thr in f.scenarios:
        if name == label:
            cost = cost_per_million_tokens(row.price.per_hour, thr)
            return None if cost is None else (cost, tpot)
    if f.scenarios or not (f.tpot_s.is_point and f.tokens_per_s_per_node.is_point) or row.cost is None:
        return None
    return row.cost.lo, f.tpot_s.lo


def front_marks(rows: Sequence[RankedRow]) -> list[str]:
    """Pareto marks of priced rows: per scenario where every row can be placed in each (``Figures.scenarios``),
    else by their ranges (``pareto_marks``)."""
    labels = list(dict.fromkeys(name for r in rows for name, *_ in r.figures.scenarios))
    if labels:
        grid = [[_scenario_point(r, label) for r in rows] for label in labels]
        if all(p is not None for points in grid for p in points):
            return scenario_marks([pareto_front(points) for points in grid])  # type: ignore[arg-type]
    return pareto_marks([(r.cost, r.figures.tpot_s) for r in rows])  # type: ignore[misc]
