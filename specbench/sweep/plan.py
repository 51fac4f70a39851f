"""The sweep's plan: which pod measures what, in which wave, and what it costs.

One pod per *unit*: a variant's vLLM server started once (compiling its graphs if the bucket has
none for its settings), then measured at every load level in turn, one point each. The units run
as the indexes of one Indexed Job whose parallelism is the number of free Neuron slots, and
Kubernetes' Job controller starts the lowest pending indexes first (kubernetes/kubernetes
pkg/controller/job/indexed_job_utils.go, ``firstPendingIndexes``), so unit ``i`` runs in wave
``i // slots`` when units take similar time. The baseline is unit 0 (first wave) and again the
last unit (last wave): the analysis reports the drift between the two.

Units of different sizes (``sweep.tensor_parallel_sizes``: a TP 4 unit asks for 1 device, a TP 32
unit for 8) are packed: a wave holds consecutive units while they fit the nodes' free devices, CPU
and memory together (``Packing``, first fit, largest first); with one size that is ``slots`` units a
wave, as before. Node-hours: the sweep holds its nodes for every wave (the plan's total, what is
paid); each unit is *charged* its device share, minutes x its devices / the node's devices
(``unit_node_hours``), so a TP 4 unit on 1 of a trn2.48xlarge's 16 devices costs 1/16 of the node's
time, and the total minus the units' charges is capacity left idle.

Pure functions on plain values: config/sweep.py feeds them from the configuration at synth,
``specbench plan`` prints the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

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
class Room:
    """What one sweep pod asks of a node, or the part of a node free for the sweep (CPU in
    millicores, memory in MiB; config/capacity.py computes both from the configuration)."""

    devices: int
    cpu_millis: int = 0
    memory_mib: int = 0

    def fits_in(self, other: Room) -> bool:
        return self.devices <= other.devices and self.cpu_millis <= other.cpu_millis and self.memory_mib <= other.memory_mib

    def minus(self, other: Room) -> Room:
        return Room(self.devices - other.devices, self.cpu_millis - other.cpu_millis, self.memory_mib - other.memory_mib)


@dataclass(frozen=True)
class Packing:
    """The sweep's capacity for units of different sizes: each Neuron node's free room, and the pod
    of a unit at each TP (0: the reference TP, serving.tensor_parallel_size)."""

    free: tuple[Room, ...]
    demand: tuple[tuple[int, Room], ...]  # (tp, one unit's pod), a tuple so the plan stays hashable
    devices_per_node: int = 16

    def of(self, tp: int) -> Room:
        for key, room in self.demand:
            if key == tp:
                return room
        raise ValueError(f"no pod size for a unit at TP {tp or 'of the services'} (known: {', '.join(str(k) for k, _ in self.demand)})")

    def fits(self, tps: Sequence[int]) -> bool:
        """Whether units at these TPs run at once: first fit on the nodes, largest first (the Neuron
        scheduler places each pod on a node with enough free devices; this is an estimate of it)."""
        left = list(self.free)
        for room in sorted((self.of(tp) for tp in tps), key=lambda r: (-r.devices, -r.cpu_millis, -r.memory_mib)):
            spot = next((i for i, free in enumerate(left) if room.fits_in(free)), None)
            if spot is None:
                return False
            left[spot] = left[spot].minus(room)
        return True

    def slots(self, tp: int = 0) -> int:
        """Units of one TP that run at once."""
        count = 0
        while count < 1024 and self.fits([tp] * (count + 1)):
            count += 1
        return count

    @property
    def nodes(self) -> int:
        """Nodes the sweep holds: those with room for at least one of its units."""
        return sum(1 for free in self.free if any(room.fits_in(free) for _, room in self.demand))


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
    unit_minutes: tuple[float, ...] = ()  # each unit's, in order


@dataclass(frozen=True)
class SweepPlan:
    units: tuple[Unit, ...]
    loads: tuple[Load, ...]
    slots: int  # units measured at once (of the reference TP, with a packing)
    nodes: int  # Neuron nodes that hold at least one slot
    devices_per_unit: int  # a reference-TP unit's devices
    devices_per_node: int
    waves: tuple[Wave, ...]
    node_hours: float
    price_per_node_hour: float | None  # None: no price for the instance type
    packing: Packing | None = field(default=None, compare=False)  # units of several TPs

    def devices_of(self, unit: Unit) -> int:
        return self.packing.of(unit.variant.tp).devices if self.packing else self.devices_per_unit

    @property
    def has_tp_units(self) -> bool:
        return any(u.variant.tp for u in self.units)

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
        for wave in self.waves:
            if any(u.index == index for u in wave.units):
                return wave.index
        return index // max(self.slots, 1)

    def unit_node_hours(self, unit: Unit) -> float:
        """The unit's charge: its minutes x its share of the node's devices (module docstring)."""
        wave = self.waves[self.wave_of(unit.index)]
        minutes = next(m for u, m in zip(wave.units, wave.unit_minutes, strict=True) if u.index == unit.index)
        return minutes / 60 * self.devices_of(unit) / self.devices_per_node


def units(variants: Iterable[SweepVariant], precompiled: Iterable[tuple[object, ...]]) -> tuple[Unit, ...]:
    """The baseline, every variant, the baseline again; ``precompiled`` are the compile keys the
    long-running services already compiled (their graphs are in the bucket). A TP variant
    (``tp``) has a compile key of its own, so it compiles unless its own graphs are there."""
    compiled = set(precompiled)
    baseline = SweepVariant(BASELINE)
    out = []
    for index, (variant, repeat) in enumerate([(baseline, False), *((v, False) for v in variants), (baseline, True)]):
        out.append(Unit(index, variant, repeat, variant.compile_key in compiled))
        compiled.add(variant.compile_key)
    return tuple(out)


def waves(all_units: tuple[Unit, ...], slots: int | Packing, points_per_unit: int, estimates: Estimates) -> tuple[Wave, ...]:
    """Consecutive units a wave: ``slots`` of them, or with a ``Packing`` as many as fit at once."""
    if isinstance(slots, Packing):
        groups = _packed(all_units, slots)
    elif slots < 1:
        raise ValueError("no Neuron slot is free for the sweep")
    else:
        groups = [all_units[i : i + slots] for i in range(0, len(all_units), slots)]
    out = []
    for i, group in enumerate(groups):
        minutes = tuple(estimates.unit_minutes(u, points_per_unit) for u in group)
        out.append(Wave(i, tuple(group), max(minutes), minutes))
    return tuple(out)


def _packed(all_units: Sequence[Unit], packing: Packing) -> list[tuple[Unit, ...]]:
    groups: list[list[Unit]] = []
    for unit in all_units:
        if groups and packing.fits([u.variant.tp for u in groups[-1]] + [unit.variant.tp]):
            groups[-1].append(unit)
        elif packing.fits([unit.variant.tp]):
            groups.append([unit])
        else:
            raise ValueError(f"sweep unit {unit.label} fits no Neuron node's free room (TP {unit.variant.tp or 'of the services'})")
    return [tuple(g) for g in groups]


def make_plan(
    variants: Iterable[SweepVariant],
    loads: tuple[Load, ...],
    *,
    slots_per_node: tuple[int, ...],
    devices_per_unit: int,
    devices_per_node: int,
    estimates: Estimates,
    precompiled: Iterable[tuple[object, ...]] = (),
    price_per_node_hour: float | None = None,
    packing: Packing | None = None,
) -> SweepPlan:
    """The plan for these variants and loads on nodes offering ``slots_per_node`` free units each
    (or, for units of several TPs, the free room of ``packing``).

    Node-hours count every node that holds a slot for the whole sweep (a node does not leave the
    group between waves)."""
    all_units = units(variants, precompiled)
    if packing is not None and any(v.variant.tp for v in all_units):
        planned = waves(all_units, packing, len(loads), estimates)
        slots, nodes = packing.slots(0), packing.nodes
    else:
        packing = None
        slots = sum(slots_per_node)
        planned = waves(all_units, slots, len(loads), estimates)
        nodes = sum(1 for s in slots_per_node if s > 0)
    hours = sum(w.minutes for w in planned) / 60
    return SweepPlan(
        all_units, loads, slots, nodes, devices_per_unit, devices_per_node, planned, hours * nodes, price_per_node_hour, packing
    )


def point_ids(plan: SweepPlan) -> list[str]:
    return [point_id(u.variant.name, load, u.repeat) for u in plan.units for load in plan.loads]


def render(plan: SweepPlan, sweep_id: str = "") -> str:
    """The plan as text: matrix, waves, node-hours and dollars."""
    speculative = [u for u in plan.units if u.variant.draft_model]
    loads = ", ".join(load.label for load in plan.loads)
    tps = plan.has_tp_units
    if tps:
        sizes = sorted({(u.variant.tp, plan.devices_of(u)) for u in plan.units})
        per_tp = ", ".join(f"TP {'of the services' if tp == 0 else tp}: {d}" for tp, d in sizes)
        capacity = (
            f"capacity: Neuron devices per pod by TP ({per_tp}) of {plan.devices_per_node} per node; "
            f"units packed by devices, CPU and memory on {plan.nodes} node(s); node-hours charged by device share"
        )
    else:
        capacity = (
            f"capacity: {plan.devices_per_unit} Neuron devices per pod of {plan.devices_per_node} per node; "
            f"{plan.slots} pod(s) at once on {plan.nodes} node(s)"
        )
    extra = (" TP | devices | node-hours (device share) |", " --- | --- | --- |") if tps else ("", "")
    lines = [
        f"sweep {sweep_id}".rstrip() + f": {len(speculative)} variant(s) + baseline (first and last wave) x {len(plan.loads)} "
        f"load level(s) [{loads}] = {plan.points} points in {len(plan.units)} pods",
        capacity,
        "",
        "| unit | variant | draft model | k | method | graphs | wave |" + extra[0],
        "| --- | --- | --- | --- | --- | --- | --- |" + extra[1],
    ]
    for u in plan.units:
        v = u.variant
        graphs = "in the bucket" if u.compiled else "compiled on first start"
        cells: tuple[object, ...] = (u.index, u.label, v.draft_model or "-", v.k or "-", v.method or "-", graphs, plan.wave_of(u.index))
        if tps:
            cells += (v.tp or "services'", plan.devices_of(u), f"{plan.unit_node_hours(u):.2f}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines.append("")
    for w in plan.waves:
        lines.append(f"wave {w.index}: {', '.join(u.label for u in w.units)} ({w.minutes:g} min)")
    if tps:
        charged = sum(plan.unit_node_hours(u) for u in plan.units)
        lines.append(f"charged to units by device share: {charged:.1f} node-hours; idle while held: {plan.node_hours - charged:.1f}")
    price = plan.price_per_node_hour
    # No price: the setting is 0, or the price catalog has no entry for the instance type, region and mode.
    dollars = "no node price (set results.node_price_per_hour)" if plan.dollars is None else f"${plan.dollars:,.0f} at ${price:g}/node-hour"
    lines.append(
        f"estimate: {len(plan.waves)} wave(s), {plan.wall_hours:.1f} h wall clock, {plan.node_hours:.1f} Neuron node-hours, {dollars}"
    )
    return "\n".join(lines)
