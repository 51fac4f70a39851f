"""What a deployment will measure, before any hardware is rented: the serving model's predictions per
prompt class and load level (TPOT, E2E, tokens/s per node, speedup, cost per million tokens), the best
k and the crossover load. Pure: ``specbench predict`` (specbench/outputs/prediction.py) prints it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from specbench.analysis import provenance
from specbench.analysis import serving_model as sm
from specbench.analysis.cost import cost_per_million_tokens

K_MAX = 15


@dataclass(frozen=True)
class Row:
    concurrency: int
    baseline: sm.Prediction
    speculative: sm.Prediction
    speedup: float  # baseline TPOT / speculative TPOT
    best_k: int  # the k with the lowest TPOT at this load
    best_k_speedup: float
    baseline_cost: float | None  # $ per million output tokens
    speculative_cost: float | None
    extrapolated: bool = False  # outside the loads the profile was measured at (provenance.extrapolated)


@dataclass(frozen=True)
class ClassPrediction:
    prompt_class: str
    a: float
    source: str  # where a came from: assumed, a run, a sweep
    rows: list[Row]
    crossover: float | None  # clients in flight where speculation stops paying (model, continuous); None: never
    first_level_not_paying: int | None  # the first load level with a predicted speedup <= 1
    text: str


@dataclass(frozen=True)
class PredictionReport:
    deployment: sm.Deployment
    profile: sm.Profile
    workload: sm.Workload
    price_per_hour: float | None
    loads: list[int]
    classes: list[ClassPrediction]
    weight_bound_s: float
    baseline_step_s: float  # a plain decode step at max_num_seqs
    assumptions: tuple[str, ...] = sm.ASSUMPTIONS
    calibration: provenance.Calibration | None = None  # what the profile rests on (None: not said)
    parameters: tuple[provenance.Parameter, ...] = ()  # per free parameter: fitted or assumed, carried over or not
    deployment_sources: tuple[tuple[str, str], ...] = ()  # (Deployment field, where its value came from)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["assumptions"] = list(self.assumptions)
        data["calibration"] = None if self.calibration is None else self.calibration.to_dict()
        data["parameters"] = [p.to_dict() for p in self.parameters]
        data["deployment_sources"] = dict(self.deployment_sources)
        return data


def headroom(step_s: float, dep: sm.Deployment) -> tuple[float, float]:
    """How far a (measured or predicted) plain decode step is from the weight-bandwidth bound: the
    ratio, and the seconds a better compile could still win at most."""
    bound = sm.weight_bound_s(dep)
    return step_s / bound, step_s - bound


def default_loads(max_num_seqs: int) -> list[int]:
    """Doubling levels from 1 to twice the batch limit (the levels above it show the queue)."""
    loads, level = [], 1
    while level <= 2 * max_num_seqs:
        loads.append(level)
        level *= 2
    return loads


def predict_deployment(
    dep: sm.Deployment,
    profile: sm.Profile,
    acceptance: Mapping[str, tuple[float, str]],
    loads: Sequence[int],
    workload: sm.Workload = sm.DEFAULT_WORKLOAD,
    price_per_hour: float | None = None,
    k_max: int = K_MAX,
    calibration: provenance.Calibration | None = None,
    deployment_sources: Mapping[str, str] | None = None,
) -> PredictionReport:
    """``acceptance``: prompt class -> (a, where it came from). ``dep`` must speculate. With
    ``calibration`` each row says whether it lies outside the measured loads, and the report which
    parameters were fitted and which assumed."""
    if not dep.method:
        raise ValueError("predict needs a speculative deployment (serving.speculation_method draft or eagle3, k >= 1)")
    if not loads or any(not isinstance(c, int) or c < 1 for c in loads):
        raise ValueError(f"loads must be integers >= 1 (clients in flight); got {list(loads)!r}")
    base = dep.with_k(0)
    classes = []
    for name, (a, source) in acceptance.items():
        rows = []
        for c in sorted(set(loads)):
            b, s = sm.predict(base, profile, 0.0, c, workload), sm.predict(dep, profile, a, c, workload)
            k, k_speedup = sm.best_k(dep, profile, a, c, k_max, workload)
            rows.append(
                Row(
                    c,
                    b,
                    s,
                    b.tpot_s / s.tpot_s,
                    k,
                    k_speedup,
                    cost_per_million_tokens(price_per_hour, b.tokens_per_s_per_node),
                    cost_per_million_tokens(price_per_hour, s.tokens_per_s_per_node),
                    calibration is not None and provenance.extrapolated(calibration, dep, c),
                )
            )
        cross = sm.crossover_concurrency(dep, profile, a, workload)
        first = next((r.concurrency for r in rows if r.speedup <= 1.0), None)
        if cross is None:
            limit = dep.max_num_seqs
            text = f"pays at every load: the batch stops growing at max_num_seqs {limit}, where the speedup is {rows[-1].speedup:.2f}x"
        else:
            text = f"stops paying at ~{cross:.3g} clients in flight (model, batch interpolated)"
        classes.append(ClassPrediction(name, a, source, rows, cross, first, text))
    top = sm.decode_step(base, profile, dep.max_num_seqs).total_s
    params = tuple(provenance.parameters(calibration, dep)) if calibration is not None else ()
    return PredictionReport(
        dep,
        profile,
        workload,
        price_per_hour,
        sorted(set(loads)),
        classes,
        sm.weight_bound_s(dep),
        top,
        calibration=calibration,
        parameters=params,
        deployment_sources=tuple((deployment_sources or {}).items()),
    )
