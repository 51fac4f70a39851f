"""``specbench sweep next``: one step of a staged sweep (sweep.strategy=staged; docs/sweeps.md#staged).

Reads the sweep's stored points (as sweep-report does), decides at every load with the staged model
(specbench/sweep/staged.py, evidence.py), writes ``sweeps/<id>/stages/after-stage-<n>.json`` (the
decisions, every candidate's prediction, and the next stage's variants and points), and prints the
decisions and the command that starts the next stage. The sweep never schedules pods itself: the
next stage is an Indexed Job of the same template, started by that command, and Kubernetes runs
its pods. ``stage_job`` (specbench/outputs/stage_job.py) is the filter in that command: it turns the
CronJob's Job (``kubectl create job --from=cronjob/... --dry-run=client -o json``) into the stage's Job.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specbench import jsonfile
from specbench.analysis import cost
from specbench.analysis.sweep import Point
from specbench.names import check_name
from specbench.outputs.stage_job import CRONJOB, STAGE_UNITS_ENV, group_job_name, job_name, stage_job, tp_suffix  # noqa: F401
from specbench.sweep import checked, evidence, pinning, staged
from specbench.sweep.plan import Estimates, Packing
from specbench.sweep.points import Load, SweepVariant, point_id

STAGES = "stages/"


class NextError(ValueError):
    """A sweep that cannot advance; the message says why and what to do."""


@dataclass(frozen=True)
class Inputs:
    """What the configuration gives (config/sweep.py): the candidates, the mix, the capacity, and
    what a stage costs (its node-hours against the plan synth printed)."""

    variants: tuple[SweepVariant, ...]  # every variant the sweep allows, in the configured (catalogue) order
    loads: tuple[Load, ...]
    objective: staged.Objective
    slots: int
    margin: float
    namespace: str
    estimates: Estimates = staged.DEFAULT_ESTIMATES
    nodes: int = 1  # Neuron nodes that hold a slot (a stage's node-hours count each)
    precompiled: tuple[staged.Config, ...] = ()  # graphs the services put in the bucket
    plan: staged.StagedCost | None = None  # config/sweep.py staged_cost: stage 1, expected, worst case
    budget_node_hours: float | None = None
    stage_one: tuple[SweepVariant, ...] = ()  # what the synth Job measures besides the baseline (config/sweep.py)
    packing: Packing | None = None  # units of several TPs (sweep.tensor_parallel_sizes): a stage is one wave of what fits


def stage_documents(store: Any, sweep_id: str) -> list[dict[str, Any]]:
    """The sweep's after-stage documents in stage order; NextError names one that cannot be read."""
    prefix = f"sweeps/{check_name(sweep_id, '--sweep-id')}/{STAGES}"
    docs = []
    for key in store.keys(prefix):
        if not (key.endswith(".json") and "after-stage-" in key):
            continue
        try:
            doc = json.loads(store.read_text(key))
        except (ValueError, RecursionError) as error:
            raise NextError(f"{key}: not a stage document ({error})") from None
        if not (isinstance(doc, dict) and type(doc.get("after_stage")) is int and isinstance(doc.get("decisions"), dict)):
            raise NextError(f"{key}: not a stage document (after_stage, decisions)")
        if not isinstance(doc.get("next_stage") or {}, dict):
            raise NextError(f"{key}: next_stage is not an object")
        docs.append(doc)
    return sorted(docs, key=lambda d: d["after_stage"])


def current_stage(documents: Sequence[Mapping[str, Any]], stored: set[str]) -> int:
    """The stages measured so far: 1 (the synth Job), plus every proposed stage whose points are stored;
    NextError when the last proposed stage is still missing points."""
    if not documents:
        return 1
    last = documents[-1]
    proposed = last.get("next_stage") or {}
    if not proposed.get("stage"):
        return int(last["after_stage"])
    missing = [p for p in proposed.get("points", []) if p not in stored]
    if missing:
        raise NextError(
            f"stage {proposed['stage']} has not finished: {len(missing)} of its points are not stored ({', '.join(missing[:4])}"
            f"{', ...' if len(missing) > 4 else ''}); start it with: {proposed.get('command', '')}"
        )
    return int(proposed["stage"])


def command(inputs: Inputs, sweep_id: str, stage: int, stage_file: str, tps: Sequence[int] = (0,)) -> str:
    """The next stage's shell command; the document's location quoted (a results folder may hold spaces).
    A stage with units at several TPs is one Job per TP group, each from its group's CronJob."""
    namespace = shlex.quote(inputs.namespace)
    return " && ".join(
        f"kubectl -n {namespace} create job {group_job_name(sweep_id, stage, tp)} --from=cronjob/{CRONJOB}{tp_suffix(tp)} --dry-run=client"
        f" -o json | python -m specbench sweep stage-job --stage {shlex.quote(stage_file)} | kubectl -n {namespace} apply -f -"
        for tp in tps
    )


def advance(
    store: Any, folders: Sequence[checked.Folder], sweep_id: str, inputs: Inputs, resamples: int = staged.RESAMPLES
) -> tuple[evidence.Step, dict[str, Any], str]:
    """Check the points, decide, store the step's document, return it with its key."""
    check_name(sweep_id, "--sweep-id")
    verdict = checked.check(folders, sweep_id, inputs.variants, inputs.loads)
    if verdict.contradictions:
        raise NextError(
            f"sweep {sweep_id}: the settings contradict {len(verdict.contradictions)} stored point(s) ("
            f"{'; '.join(verdict.contradictions[:3])}{'; ...' if len(verdict.contradictions) > 3 else ''}): "
            "give the settings the sweep ran with, or start a new sweep"
        )
    points = verdict.used
    left_out = [f"{name}: {why}" for name, why in verdict.left_out]
    documents = stage_documents(store, sweep_id)
    stage = _ready(documents, points, left_out, inputs, sweep_id)
    servers = _servers_per_node(folders, points)
    by_tp = _servers_by_tp(folders, points)
    pins = pinning.pinned(inputs.objective, inputs.margin, servers, inputs.variants, inputs.loads)
    started = pinning.recorded(documents[0]) if documents else {}
    changed = pinning.differences(started, pins)
    if changed:
        raise NextError(
            f"sweep {sweep_id} was started with other settings ({'; '.join(changed)}): run sweep next with the settings it started "
            "with (after-stage-1.json's pinned), or start a new sweep"
        )
    notes: list[str] = []
    obs = evidence.observations(points, notes=notes, servers_per_node=servers, servers_by_tp=by_tp)
    gone = pinning.vanished(documents, _measured_labels(obs))
    if gone:
        why = f"; left out: {'; '.join(left_out[:3])}" if left_out else ""
        raise NextError(
            f"sweep {sweep_id}: {len(gone)} measurement(s) an earlier stage decided with are no longer usable points "
            f"({', '.join(gone[:4])}{', ...' if len(gone) > 4 else ''}){why}; restore them, or start a new sweep"
        )
    if not obs.baseline:
        raise NextError(f"sweep {sweep_id}: no baseline point is usable yet (stage 1 is the synth Job: start it first){_listed(left_out)}")
    seen = {cls for classes in obs.baseline.values() for cls in classes}
    missing = sorted(set(inputs.objective.normalised()) - seen)
    if missing:
        raise NextError(
            f"sweep {sweep_id}: the traffic mix weighs class(es) {', '.join(missing)} that no stored point measured "
            f"(measured: {', '.join(sorted(seen))}); set sweep.class_weights to the suite's classes"
        )
    step = evidence.advance(obs, inputs.variants, inputs.objective, stage, inputs.slots, inputs.margin, resamples, inputs.packing)
    key = f"sweeps/{sweep_id}/{STAGES}after-stage-{stage}.json"
    location = f"{store.location.rstrip('/')}/{key}"
    groups = sorted({v.tp for v in step.proposal})
    doc = evidence.step_document(
        step, sweep_id, inputs.loads, inputs.objective, command(inputs, sweep_id, stage + 1, location, groups) if step.proposal else ""
    )
    doc["objective"]["servers_per_node"] = servers
    doc["pinned"] = pins  # what the first document pinned (any difference was refused above)
    doc["catalogue"] = [v.to_dict() for v in inputs.variants]
    doc["notes"] = notes
    doc["left_out"] = left_out
    doc["node_hours"] = _node_hours(documents, step, inputs, obs.configs())
    text = jsonfile.dumps(doc, indent=2, sort_keys=True) + "\n"
    if key in store.keys(key) and store.read_text(key) != text:
        raise NextError(
            f"{location} already holds a different decision after stage {stage} (the stored points changed since it was written); "
            "it is kept: remove it to decide again"
        )
    store.write_text(key, text)
    return step, doc, location


def _ready(documents: Sequence[Mapping[str, Any]], points: Sequence[Point], left_out: Sequence[str], inputs: Inputs, sweep_id: str) -> int:
    """The stage to decide after, once its points are usable: every point of the proposed stage
    (stage 1: of the synth Job's variants), and a baseline at every configured load."""
    usable = {p.point_id for p in points}
    try:
        stage = current_stage(documents, usable)
    except NextError as error:
        raise NextError(f"sweep {sweep_id}: {error}{_listed(left_out)}") from None
    missing = [] if documents else [p for p in point_ids(inputs.stage_one, inputs.loads) if p not in usable]
    if missing:
        raise NextError(
            f"sweep {sweep_id}: stage 1 has not finished: {len(missing)} of its points are not usable ({', '.join(missing[:4])}"
            f"{', ...' if len(missing) > 4 else ''}){_listed(left_out)}"
        )
    no_baseline = [load.label for load in inputs.loads if not any(p.variant.is_baseline and p.load.label == load.label for p in points)]
    if no_baseline and len(no_baseline) < len(inputs.loads):  # none at all: the caller's "no baseline point yet"
        raise NextError(
            f"sweep {sweep_id}: no usable baseline point at configured load(s) {', '.join(no_baseline)} (sweep.concurrencies, "
            f"sweep.request_rates): nothing could be decided there{_listed(left_out)}"
        )
    return stage


def _listed(left_out: Sequence[str]) -> str:
    return f" (left out: {'; '.join(left_out[:3])}{'; ...' if len(left_out) > 3 else ''})" if left_out else ""


def _servers_per_node(folders: Sequence[checked.Folder], points: Sequence[Point]) -> int:
    """The runs' servers per node, as sweep-report takes them (specbench.analysis.cost): the first
    used point's recorded deployment."""
    used = {p.point_id for p in points}
    for folder in folders:
        if any(p.point_id in used for p in folder.points):
            return cost.recorded_servers_per_node((folder.run.get("plan") or {}).get("deployment") or {})[0]
    return 1


def _servers_by_tp(folders: Sequence[checked.Folder], points: Sequence[Point]) -> dict[int, int]:
    """Servers per node at each other TP the points ran at: the recorded logical cores per node // TP
    (a server is charged its share of the node's devices, specbench/analysis/cost.py)."""
    tps = {int(p.variant.tp or 0) for p in points} - {0}
    if not tps:
        return {}
    used = {p.point_id for p in points}
    deployment = next(((f.run.get("plan") or {}).get("deployment") or {} for f in folders if any(p.point_id in used for p in f.points)), {})
    try:
        return cost.servers_by_tp(deployment, tps)
    except ValueError as error:
        raise NextError(str(error)) from None


def _measured_labels(obs: staged.Observations) -> dict[str, set[str]]:
    out = {load: {c.label for c in by_config} for load, by_config in obs.measured.items()}
    for load in obs.baseline:
        out.setdefault(load, set()).add(staged.BASELINE.label)
    for load, by_tp in obs.tp_baseline.items():
        out.setdefault(load, set()).update(staged.Config(tp=tp).label for tp in by_tp)
    return out


def _node_hours(
    documents: Sequence[Mapping[str, Any]], step: evidence.Step, inputs: Inputs, measured: set[staged.Config]
) -> dict[str, Any]:
    """The proposed stage's node-hours (one wave of its units, compiled unless the bucket has their
    graphs: the services' or a measured configuration's) and the running total: stage 1 as
    planned, every stage proposed before, this one."""
    earlier = [float((d.get("node_hours") or {}).get("next_stage") or 0.0) for d in documents if d["after_stage"] < step.stage]
    configs = [evidence.config_of_variant(v) for v in step.proposal]
    units = staged.stage_units(
        step.stage + 1, configs, [*inputs.precompiled, *measured], {c: v for c, v in zip(configs, step.proposal, strict=True)}
    )
    slots = inputs.packing or inputs.slots
    hours = staged.stage_node_hours(units, slots, len(inputs.loads), inputs.estimates, inputs.nodes) if configs else 0.0
    plan = inputs.plan
    return {
        "stage_one": plan.stage_one if plan else None,
        "next_stage": hours,
        "so_far": (plan.stage_one if plan else 0.0) + math.fsum(earlier) + hours,
        "expected": plan.expected if plan else None,
        "worst": plan.worst if plan else None,
        "budget": inputs.budget_node_hours,
    }


def render(doc: Mapping[str, Any]) -> str:
    lines = [f"sweep {doc['sweep_id']} after stage {doc['after_stage']} (objective: mix-weighted {doc['objective']['kind']})"]
    for load, d in doc["decisions"].items():
        state = (
            "decided" if d["made"] else f"open ({len(d['undecided'])} candidate(s) the model cannot rule out: {', '.join(d['undecided'])})"
        )
        ties = f", ties: {', '.join(d['ties'])}" if d["ties"] else ""
        lines.append(f"  {load}: best measured {d['best']} ({d['best_display']}){ties}; {state}")
    for item in doc.get("left_out") or []:
        lines.append(f"  left out: {item}")
    nxt = doc["next_stage"]
    if nxt["stage"]:
        hours = doc.get("node_hours") or {}
        lines.append(
            f"next: stage {nxt['stage']}: {', '.join(v['name'] for v in nxt['variants'])} ({len(nxt['points'])} points, "
            f"{hours.get('next_stage', 0.0):.1f} node-hours; {node_hours_total(hours)})"
        )
        lines.append(f"start it: {nxt['command']}")
    else:
        lines.append("every decision is made: no further stage (specbench sweep-report shows the decisions and the points never run)")
    return "\n".join(lines)


def node_hours_total(hours: Mapping[str, Any]) -> str:
    """``12.5 node-hours so far with it (plan: expected 10.0, worst case 30.0, budget 40.0)``: stage 1
    and every stage proposed up to this one, against the plan synth printed."""
    plan = [
        f"{name} {hours[key]:.1f}"
        for key, name in (("expected", "expected"), ("worst", "worst case"), ("budget", "budget"))
        if hours.get(key)
    ]
    return f"{hours.get('so_far', 0.0):.1f} node-hours so far with it" + (f" (plan: {', '.join(plan)})" if plan else "")


def point_ids(variants: Sequence[SweepVariant], loads: Sequence[Load]) -> list[str]:
    return [point_id(v.name, load) for v in variants for load in loads]


# --- the report's section --------------------------------------------------------------------------


def staged_section(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """sweep-report's account of a staged sweep: per load the decision and the stage that made it,
    the stages, and every configuration never run with why (its prediction against the best)."""
    if not documents:
        return []
    last = documents[-1]
    made_in = evidence.decided_in(documents)
    objective = last.get("objective") or {}
    weights = ", ".join(f"{cls} {w:.2f}" for cls, w in sorted((objective.get("weights") or {}).items()))
    lines = [
        "## Staged decisions",
        "",
        f"One configuration per load for the traffic mix ({weights}); objective: mix-weighted {objective.get('kind', 'speedup')}.",
        "",
    ]
    measured_in = pinning.stage_of(documents)
    for load, d in last["decisions"].items():
        ties = f" (indistinguishable: {', '.join(d['ties'])})" if d["ties"] else ""
        if d["made"]:
            source = f" (measured in stage {measured_in.get(d['best'], 1)})"
            lines.append(
                f"- {load}: {d['best']}, {d['best_display']}{ties}; decided after stage {made_in.get(load, last['after_stage'])}{source}"
            )
        else:
            lines.append(
                f"- {load}: best measured so far {d['best']}, {d['best_display']}{ties}; OPEN after stage {last['after_stage']}: "
                f"{', '.join(d['undecided'])} not ruled out"
            )
    first = sorted(c for c, stage in measured_in.items() if stage == 1)
    stage_one = (documents[0].get("node_hours") or {}).get("stage_one")
    planned = f", {stage_one:.1f} node-hours as planned" if stage_one else ""
    stages = [f"stage 1 (the synth Job): baseline, {', '.join(first) or 'no variant'}, baseline again{planned}"]
    for doc in documents:
        nxt = doc.get("next_stage") or {}
        if nxt.get("stage"):
            hours = doc.get("node_hours") or {}
            cost = f" ({hours['next_stage']:.1f} node-hours; {node_hours_total(hours)})" if "next_stage" in hours else ""
            ran = ", ".join(f"{v['name']} ({pinning.label_of(v)})" for v in nxt["variants"])
            stages.append(f"stage {nxt['stage']}: {ran}{cost}")
    stages.append(f"{len(documents)} analysis step(s) (specbench sweep next)")
    lines += ["", *[f"- {s}" for s in stages]]
    lines += [f"- left out of the decisions after stage {last['after_stage']}: {item}" for item in last.get("left_out") or []]
    lines += ["", "### Never run", ""]
    never = sorted({e["config"] for d in last["decisions"].values() for e in d["estimates"] if not e["measured"]})
    if not never:
        lines.append("- every configuration was measured")
        return lines
    lines += ["| configuration | load | why not run |", "| --- | --- | --- |"]
    for config in never:
        for load, d in last["decisions"].items():
            why = d["ruled_out"].get(config) or ("not ruled out: the decision is open" if config in d["undecided"] else "n/a")
            lines.append(f"| {config} | {load} | {why} |")
    return lines
