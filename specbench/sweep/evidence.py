"""A staged sweep's evidence from its stored points, and the next stage's plan.

``observations`` turns the sweep's points (specbench.analysis.sweep ``Point``, as sweep-report reads
them) into the staged model's ``Observations``: per load and class the speedup of the chosen metric
against the baseline at that load (median / median, its standard error from the seeded bootstrap
CI, (high - low) / (2 x 1.96)), the per-token acceptance (``point_acceptance``: /metrics where the
server counts it, else the stream's, only when the self-check passes; its standard error a fixed
0.01, MIN_A_SE: a point's a is a mean over hundreds of draft positions), the medians the SLOs check, and the baseline's
tokens/s per node (cost). Points at another TP (``variant.tp``) are measured against the baseline at
their TP, whose tokens/s per node counts that TP's servers per node (``servers_by_tp``: logical cores
per node // TP, the device share a server is charged). ``advance`` is one step of the staged loop:
the decision at every load, and the next stage's units when one is open. Both pure;
specbench/outputs/sweep_next.py reads and writes the store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.analysis import stats
from specbench.analysis.sweep import E2E, TPOT, Point, node_throughput, point_acceptance
from specbench.sweep import pinning, staged
from specbench.sweep.plan import Packing
from specbench.sweep.points import Load, SweepVariant, point_id

MIN_A_SE = 0.01


def config_of(point: Point) -> staged.Config:
    v = point.variant
    tp = int(v.tp or 0)
    return staged.Config(tp=tp) if v.is_baseline else staged.Config(v.draft_model or "", int(v.k or 0), v.method or "", tp)


def observations(
    points: Sequence[Point],
    metric: str = TPOT,
    resamples: int = 400,
    servers_per_node: int = 1,
    notes: list[str] | None = None,
    servers_by_tp: Mapping[int, int] | None = None,
) -> staged.Observations:
    """``servers_per_node``: at the services' TP; ``servers_by_tp``: at each other TP the points have."""
    notes = notes if notes is not None else []
    baseline: dict[str, dict[str, staged.BaseClass]] = {}
    at_tps: dict[str, dict[int, dict[str, staged.BaseClass]]] = {}
    measured: dict[str, dict[staged.Config, dict[str, staged.ClassMeasure]]] = {}
    classes = sorted({r.prompt_class for p in points for r in p.records})
    tps = sorted({int(p.variant.tp or 0) for p in points})
    for load, tp in ((load, tp) for load in sorted({p.load for p in points}) for tp in tps):
        at = [p for p in points if p.load == load and int(p.variant.tp or 0) == tp]
        servers = servers_per_node if not tp else (servers_by_tp or {}).get(tp)
        if servers is None:
            raise ValueError(f"points at TP {tp}: no servers per node given for that TP (servers_by_tp)")
        for cls in classes:
            base_points = [[r for r in p.records if r.prompt_class == cls and r.ok] for p in at if p.variant.is_baseline]
            base = [r for group in base_points for r in group]
            if not base:
                continue
            per_node = [t for t in (node_throughput(g, servers) for g in base_points) if t is not None]
            figures = staged.BaseClass(
                math.fsum(per_node) / len(per_node) if per_node else None, _median(base, TPOT), _median(base, "ttft_s")
            )
            if tp:
                at_tps.setdefault(load.label, {}).setdefault(tp, {})[cls] = figures
            else:
                baseline.setdefault(load.label, {})[cls] = figures
            for p in at:
                if p.variant.is_baseline:
                    continue
                mine = [r for r in p.records if r.prompt_class == cls and r.ok]
                values = stats.clean([getattr(r, metric) for r in mine])
                if not values:
                    continue
                interval = stats.speedup(
                    stats.clean([getattr(r, metric) for r in base]),
                    values,
                    seed=stats.seed_for(cls, load.label, p.variant.name, metric, "staged"),
                    resamples=resamples,
                )
                if interval.point is None:
                    continue
                se = (interval.high - interval.low) / (2 * staged.Z) if interval.known else interval.point * 0.05  # type: ignore[operator]
                a, _ = point_acceptance(p, cls, base, mine, notes)
                measured.setdefault(load.label, {})[config_of(p)] = {
                    **measured.get(load.label, {}).get(config_of(p), {}),
                    cls: staged.ClassMeasure(interval.point, max(se, 1e-4), a, MIN_A_SE, _median(mine, TPOT), _median(mine, "ttft_s")),
                }
    return staged.Observations(baseline, measured, at_tps)


def _median(records: Sequence[Any], attribute: str) -> float | None:
    values = stats.clean([getattr(r, attribute) for r in records])
    return stats.median(values) if values else None


# --- one step of the staged loop -------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    stage: int  # the stages measured so far
    decisions: dict[str, staged.Decision]
    proposal: list[SweepVariant]  # the next stage's variants (empty: every decision is made)

    @property
    def decided(self) -> bool:
        return not self.proposal


def advance(
    obs: staged.Observations,
    variants: Sequence[SweepVariant],
    objective: staged.Objective,
    stage: int,
    slots: int,
    margin: float = 0.0,
    resamples: int = staged.RESAMPLES,
    packing: Packing | None = None,
) -> Step:
    """``variants``: the catalogue, every TP's baseline among them when the sweep has TP variants;
    ``packing``: a stage is one wave of what fits it (units of several TPs), else ``slots`` units."""
    by_config = {config_of_variant(v): v for v in variants}
    candidates = list(by_config)
    decisions = {
        load: staged.decide(obs, candidates, objective, load, resamples=resamples, seed=stage, margin=margin)
        for load in sorted(obs.baseline)
    }
    fits = staged.wave_fits(packing) if packing is not None else None
    ranked = staged.next_stage(list(decisions.values()), slots, fits)
    proposal = [by_config[c] for c in ranked if c in by_config and c not in obs.configs()]
    return Step(stage, decisions, proposal)


def config_of_variant(v: SweepVariant) -> staged.Config:
    return staged.Config(tp=v.tp) if v.is_baseline else staged.Config(v.draft_model, v.k, v.method, v.tp)


def step_document(step: Step, sweep_id: str, loads: Sequence[Load], objective: staged.Objective, command: str = "") -> dict[str, Any]:
    """What ``specbench sweep next`` stores under ``sweeps/<id>/stages/after-stage-<n>.json``."""

    def estimate(e: staged.Estimate) -> dict[str, Any]:
        return {"config": e.config.label, "measured": e.measured, "point": e.point, "low": e.low, "high": e.high, "feasible": e.feasible}

    return stats.json_safe(
        {
            "sweep_id": sweep_id,
            "after_stage": step.stage,
            "objective": {
                "kind": objective.kind,
                "weights": objective.normalised(),
                "price_per_node_hour": objective.price_per_node_hour,
                "slo_tpot_s": objective.slo_tpot_s,
                "slo_ttft_s": objective.slo_ttft_s,
            },
            "decisions": {
                load: {
                    "made": d.made,
                    "best": d.best.label if d.best else None,
                    "best_value": d.best_value,
                    "best_display": objective.display(d.best_value),
                    "ties": [c.label for c in d.ties],
                    "undecided": [c.label for c in d.undecided],
                    "ruled_out": {c.label: why for c, why in sorted(d.ruled_out.items())},
                    "estimates": [estimate(e) for e in d.estimates.values()],
                }
                for load, d in step.decisions.items()
            },
            "next_stage": {
                "stage": step.stage + 1 if step.proposal else None,
                "variants": [v.to_dict() for v in step.proposal],
                "points": [point_id(v.name, load) for v in step.proposal for load in loads],
                "command": command,
            },
        }
    )


def decided_in(documents: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Per load, the stage after which its current decision was made and has held since
    (specbench/sweep/pinning.py)."""
    return pinning.decided_in(documents)


__all__ = ["E2E", "TPOT", "Step", "advance", "config_of", "decided_in", "observations", "step_document"]
