"""``specbench sweep next``: one step of a staged sweep (sweep.strategy=staged; docs/sweeps.md#staged).

Reads the sweep's stored points (as sweep-report does), decides at every load with the staged model
(specbench/sweep/staged.py, evidence.py), writes ``sweeps/<id>/stages/after-stage-<n>.json`` (the
decisions, every candidate's prediction, and the next stage's variants and points), and prints the
decisions and the command that starts the next stage. The sweep never schedules pods itself: the
next stage is an Indexed Job of the same template, started by that command, and Kubernetes runs
its pods. ``stage_job`` is the filter in that command: it turns the CronJob's Job (``kubectl create
job --from=cronjob/... --dry-run=client -o json``) into the stage's Job.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specbench import jsonfile
from specbench.analysis.sweep import Point
from specbench.sweep import evidence, staged
from specbench.sweep.points import Load, SweepVariant, point_id

STAGES = "stages/"
CRONJOB = "specbench-sweep"  # charts/sweep.py NAME
STAGE_UNITS_ENV = "SWEEP_STAGE_UNITS"  # the catalogue indexes a stage's Job runs, by completion index


class NextError(ValueError):
    """A sweep that cannot advance; the message says why and what to do."""


@dataclass(frozen=True)
class Inputs:
    """What the configuration gives (config/sweep.py): the candidates, the mix, the capacity."""

    variants: tuple[SweepVariant, ...]  # every variant the sweep allows, in the configured (catalogue) order
    loads: tuple[Load, ...]
    objective: staged.Objective
    slots: int
    margin: float
    namespace: str


def stage_documents(store: Any, sweep_id: str) -> list[dict[str, Any]]:
    prefix = f"sweeps/{sweep_id}/{STAGES}"
    docs = [json.loads(store.read_text(key)) for key in store.keys(prefix) if key.endswith(".json") and "after-stage-" in key]
    return sorted(docs, key=lambda d: d.get("after_stage", 0))


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


def command(inputs: Inputs, sweep_id: str, stage: int, stage_file: str) -> str:
    job = f"{sweep_id}-s{stage}"[:63]
    return (
        f"kubectl -n {inputs.namespace} create job {job} --from=cronjob/{CRONJOB} --dry-run=client -o json"
        f" | python -m specbench sweep stage-job --stage {stage_file} | kubectl -n {inputs.namespace} apply -f -"
    )


def advance(
    store: Any, points: Sequence[Point], sweep_id: str, inputs: Inputs, resamples: int = staged.RESAMPLES
) -> tuple[evidence.Step, dict[str, Any], str]:
    """Decide, store the step's document, return it with its key."""
    stored = {p.point_id for p in points}
    documents = stage_documents(store, sweep_id)
    stage = current_stage(documents, stored)
    notes: list[str] = []
    obs = evidence.observations(points, notes=notes)
    if not obs.baseline:
        raise NextError(f"sweep {sweep_id}: no baseline point is stored yet (stage 1 is the synth Job: start it first)")
    seen = {cls for classes in obs.baseline.values() for cls in classes}
    missing = sorted(set(inputs.objective.normalised()) - seen)
    if missing:
        raise NextError(
            f"sweep {sweep_id}: the traffic mix weighs class(es) {', '.join(missing)} that no stored point measured "
            f"(measured: {', '.join(sorted(seen))}); set sweep.class_weights to the suite's classes"
        )
    step = evidence.advance(obs, inputs.variants, inputs.objective, stage, inputs.slots, inputs.margin, resamples)
    key = f"sweeps/{sweep_id}/{STAGES}after-stage-{stage}.json"
    location = f"{store.location.rstrip('/')}/{key}"
    doc = evidence.step_document(
        step, sweep_id, inputs.loads, inputs.objective, command(inputs, sweep_id, stage + 1, location) if step.proposal else ""
    )
    doc["catalogue"] = [v.to_dict() for v in inputs.variants]
    doc["notes"] = notes
    store.write_text(key, jsonfile.dumps(doc, indent=2, sort_keys=True) + "\n")
    return step, doc, location


def render(doc: Mapping[str, Any]) -> str:
    lines = [f"sweep {doc['sweep_id']} after stage {doc['after_stage']} (objective: mix-weighted {doc['objective']['kind']})"]
    for load, d in doc["decisions"].items():
        state = (
            "decided" if d["made"] else f"open ({len(d['undecided'])} candidate(s) the model cannot rule out: {', '.join(d['undecided'])})"
        )
        ties = f", ties: {', '.join(d['ties'])}" if d["ties"] else ""
        lines.append(f"  {load}: best measured {d['best']} ({d['best_display']}){ties}; {state}")
    nxt = doc["next_stage"]
    if nxt["stage"]:
        lines.append(f"next: stage {nxt['stage']}: {', '.join(v['name'] for v in nxt['variants'])} ({len(nxt['points'])} points)")
        lines.append(f"start it: {nxt['command']}")
    else:
        lines.append("every decision is made: no further stage (specbench sweep-report shows the decisions and the points never run)")
    return "\n".join(lines)


# --- the stage's Job -----------------------------------------------------------------------------


def stage_job(job: dict[str, Any], stage_doc: Mapping[str, Any], slots: int | None = None) -> dict[str, Any]:
    """The CronJob's Job (as kubectl prints it) made into the stage's: as many completions as the
    stage has variants, ``SWEEP_STAGE_UNITS`` mapping each completion index to the variant's index in
    the chart's unit catalogue (charts/sweep.py: baseline, every variant, baseline again), and the
    sweep id fixed (the stage's Job has a name of its own, the sweep keeps its id)."""
    nxt = stage_doc.get("next_stage") or {}
    if not nxt.get("stage"):
        raise NextError("this stage document proposes no further stage: every decision is made")
    names = [v["name"] for v in stage_doc.get("catalogue", [])]
    indexes = []
    for variant in nxt["variants"]:
        if variant["name"] not in names:
            raise NextError(f"variant {variant['name']} is not in the sweep's catalogue ({', '.join(names)})")
        indexes.append(names.index(variant["name"]) + 1)  # unit 0 is the baseline
    out = copy.deepcopy(job)
    spec = out.setdefault("spec", {})
    spec["completions"] = len(indexes)
    spec["parallelism"] = min(int(slots or spec.get("parallelism") or len(indexes)), len(indexes))
    pod = spec.setdefault("template", {}).setdefault("spec", {})
    for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        env = [e for e in container.get("env", []) if e.get("name") not in (STAGE_UNITS_ENV, "SWEEP_ID")]
        if any(e.get("name") == "SWEEP_ID" for e in container.get("env", [])):
            env.append({"name": "SWEEP_ID", "value": stage_doc["sweep_id"]})
        env.append({"name": STAGE_UNITS_ENV, "value": ",".join(map(str, indexes))})
        container["env"] = env
    return out


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
    for load, d in last["decisions"].items():
        ties = f" (indistinguishable: {', '.join(d['ties'])})" if d["ties"] else ""
        if d["made"]:
            lines.append(f"- {load}: {d['best']}, {d['best_display']}{ties}; decided after stage {made_in.get(load, last['after_stage'])}")
        else:
            lines.append(
                f"- {load}: best measured so far {d['best']}, {d['best_display']}{ties}; OPEN after stage {last['after_stage']}: "
                f"{', '.join(d['undecided'])} not ruled out"
            )
    measured = {e["config"] for d in last["decisions"].values() for e in d["estimates"] if e["measured"]}
    stages = [
        f"stage 1 (the synth Job): {', '.join(sorted(c for c in measured if c != 'baseline'))} measured in all; "
        f"{len(documents)} analysis step(s)"
    ]
    for doc in documents:
        nxt = doc.get("next_stage") or {}
        if nxt.get("stage"):
            stages.append(f"stage {nxt['stage']}: {', '.join(v['name'] for v in nxt['variants'])}")
    lines += ["", *[f"- {s}" for s in stages], "", "### Never run", ""]
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
