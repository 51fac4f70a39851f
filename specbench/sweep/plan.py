"""The sweep's plan: which pod measures what, in which wave, and what it costs.

One pod per *unit*: a variant's vLLM server started once (compiling its graphs if the bucket has
none for its settings), then measured at every load level in turn, one point each. The units run
as the indexes of one Indexed Job whose parallelism is the number of free Neuron slots, and
Kubernetes' Job controller starts the lowest pending indexes first (kubernetes/kubernetes
pkg/controller/job/indexed_job_utils.go, ``firstPendingIndexes``), so unit ``i`` runs in wave
``i // slots`` when units take similar time. The baseline is unit 0 (first wave) and again the
last unit (last wave): the analysis reports the drift between the two.

Pure functions on plain values: config/sweep.py feeds them from the configuration at synth,
``specbench plan`` prints the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from specbench.sweep.points import BASELINE, Load, SweepVariant, point_id


@dataclass(frozen=True)
class Unit:
    index: int
    variant: SweepVariant
    repeat: bool  # the baseline's second run, in the last wave
    compiled: bool  # graphs already in the bucket when it starts (by a service or an earlier unit)

    @property
    def label(self) -> str:
        return f"{self.variant.name} (again)" if self.repeat else self.variant.name


@dataclass(frozen=True)
class Estimates:
    compile_minutes: float
    start_minutes: float
    measure_minutes: float

    def unit_minutes(self, unit: Unit, points: int) -> float:
        return (self.start_minutes if unit.compiled else self.compile_minutes) + points * self.measure_minutes


@dataclass(frozen=True)
class Wave:
    index: int
    units: tuple[Unit, ...]
    minutes: float  # the longest unit of the wave


@dataclass(frozen=True)
class SweepPlan:
    units: tuple[Unit, ...]
    loads: tuple[Load, ...]
    slots: int  # units measured at once
    nodes: int  # Neuron nodes that hold at least one slot
    devices_per_unit: int
    devices_per_node: int
    waves: tuple[Wave, ...]
    node_hours: float
    price_per_node_hour: float | None  # None: no price for the instance type

    @property
    def points(self) -> int:
        return len(self.units) * len(self.loads)

    @property
    def wall_hours(self) -> float:
        return sum(w.minutes for w in self.waves) / 60

    @property
    def dollars(self) -> float | None:
        return None if self.price_per_node_hour is None else self.node_hours * self.price_per_node_hour

    def wave_of(self, index: int) -> int:
        return index // self.slots


def units(variants: Iterable[SweepVariant], precompiled: Iterable[tuple[str, int, str]]) -> tuple[Unit, ...]:
    """The baseline, every variant, the baseline again; ``precompiled`` are the compile keys the
    long-running services already compiled (their graphs are in the bucket)."""
    compiled = set(precompiled)
    baseline = SweepVariant(BASELINE)
    out = []
    for index, (variant, repeat) in enumerate([(baseline, False), *((v, False) for v in variants), (baseline, True)]):
        out.append(Unit(index, variant, repeat, variant.compile_key in compiled))
        compiled.add(variant.compile_key)
    return tuple(out)


def waves(all_units: tuple[Unit, ...], slots: int, points_per_unit: int, estimates: Estimates) -> tuple[Wave, ...]:
    if slots < 1:
        raise ValueError("no Neuron slot is free for the sweep")
    groups = [all_units[i : i + slots] for i in range(0, len(all_units), slots)]
    return tuple(Wave(i, tuple(group), max(estimates.unit_minutes(u, points_per_unit) for u in group)) for i, group in enumerate(groups))


def make_plan(
    variants: Iterable[SweepVariant],
    loads: tuple[Load, ...],
    *,
    slots_per_node: tuple[int, ...],
    devices_per_unit: int,
    devices_per_node: int,
    estimates: Estimates,
    precompiled: Iterable[tuple[str, int, str]] = (),
    price_per_node_hour: float | None = None,
) -> SweepPlan:
    """The plan for these variants and loads on nodes offering ``slots_per_node`` free units each.

    Node-hours count every node that holds a slot for the whole sweep (a node does not leave the
    group between waves)."""
    all_units = units(variants, precompiled)
    slots = sum(slots_per_node)
    planned = waves(all_units, slots, len(loads), estimates)
    nodes = sum(1 for s in slots_per_node if s > 0)
    hours = sum(w.minutes for w in planned) / 60
    return SweepPlan(all_units, loads, slots, nodes, devices_per_unit, devices_per_node, planned, hours * nodes, price_per_node_hour)


def point_ids(plan: SweepPlan) -> list[str]:
    return [point_id(u.variant.name, load, u.repeat) for u in plan.units for load in plan.loads]


def render(plan: SweepPlan, sweep_id: str = "") -> str:
    """The plan as text: matrix, waves, node-hours and dollars."""
    speculative = [u for u in plan.units if u.variant.draft_model]
    loads = ", ".join(load.label for load in plan.loads)
    lines = [
        f"sweep {sweep_id}".rstrip() + f": {len(speculative)} variant(s) + baseline (first and last wave) x {len(plan.loads)} "
        f"load level(s) [{loads}] = {plan.points} points in {len(plan.units)} pods",
        f"capacity: {plan.devices_per_unit} Neuron devices per pod of {plan.devices_per_node} per node; "
        f"{plan.slots} pod(s) at once on {plan.nodes} node(s)",
        "",
        "| unit | variant | draft model | k | method | graphs | wave |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for u in plan.units:
        v = u.variant
        graphs = "in the bucket" if u.compiled else "compiled on first start"
        cells = (u.index, u.label, v.draft_model or "-", v.k or "-", v.method or "-", graphs, plan.wave_of(u.index))
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines.append("")
    for w in plan.waves:
        lines.append(f"wave {w.index}: {', '.join(u.label for u in w.units)} ({w.minutes:g} min)")
    price = plan.price_per_node_hour
    # No price: the setting is 0, or the price catalog has no entry for the instance type, region and mode.
    dollars = "no node price (set results.node_price_per_hour)" if plan.dollars is None else f"${plan.dollars:,.0f} at ${price:g}/node-hour"
    lines.append(
        f"estimate: {len(plan.waves)} wave(s), {plan.wall_hours:.1f} h wall clock, {plan.node_hours:.1f} Neuron node-hours, {dollars}"
    )
    return "\n".join(lines)
