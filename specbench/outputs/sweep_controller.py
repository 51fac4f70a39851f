"""The staged sweep's controller: ``specbench sweep control`` in a pod of the cluster (issue 36).

It does what a person with a checkout does between stages (``sweep next``, then the printed
``kubectl create job ... | sweep stage-job | kubectl apply``), in a loop, until every decision is
made or the node-hour budget stops it. Its state is only what the cluster holds: the stage
documents under ``sweeps/<id>/stages/`` and the Jobs. Each pass of the loop reads both again and
takes the one step they call for, so a controller killed between any two steps and started again
continues where it was:

- no stage document yet: stage 1 is the sweep's first Job (named the sweep id); wait for it;
- the last document proposes no stage: done;
- the proposed stage's points are all stored and complete (checked.py: not a run still going):
  decide on them read again (``sweep_next.advance``, the same function
  ``sweep next`` calls, with the same Inputs: config/sweep_decision.py; it writes the document
  whole, one PUT);
- its Job (``job_name(sweep id, stage)``: a restart finds it) exists: wait; failed: stop;
- else, unless the stage would take the sweep over ``sweep.budget_node_hours``: create it. Created
  twice is impossible: the name is fixed and the API answers 409 AlreadyExists.

Kubernetes stays the queue: the controller only creates Jobs; the scheduler runs their pods.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.jsonfile import dumps
from specbench.outputs import sweep_next
from specbench.outputs.stage_job import StageJobError, group_job_name, stage_groups, stage_job, tp_suffix
from specbench.results.store import PollingReader, S3Store
from specbench.sweep import checked, staged
from specbench.sweep.jobs_api import ACCOUNT, IN_CLUSTER, JobsApi, JobsApiError, job_state
from specbench.sweep.plan import Estimates, Packing, Room
from specbench.sweep.points import SweepVariant, loads

DONE, BUDGET, FAILED = "done", "budget", "failed"
# Labels and fields the Job controller and API server add to a Job (kubernetes.io/docs/concepts/
# workloads/controllers/job/#specifying-your-own-pod-selector: the system picks a unique
# controller-uid selector and adds it to the pod template's labels); a new Job made from a read one
# without removing them is refused (its selector would not be its own).
SYSTEM_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid", "job-name")
STAGE_ANNOTATION = "specbench.dev/sweep-stage"
MAX_POLL_S = 600.0


class ControlError(ValueError):
    """Settings the controller cannot decide with; the message names the field."""


def _field(settings: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str = "settings") -> Any:
    value = settings.get(key) if isinstance(settings, Mapping) else None
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise ControlError(f"{where}.{key}: expected {' or '.join(k.__name__ for k in kinds)}, got {value!r:.40}")
    return value


def _variant(d: Any, where: str) -> SweepVariant:
    if not isinstance(d, Mapping):
        raise ControlError(f"{where}: expected an object, got {d!r:.40}")
    tp = d.get("tp", 0)
    if type(tp) is not int or tp < 0:
        raise ControlError(f"{where}.tp: expected a whole number >= 0 (0: the services' TP), got {tp!r:.40}")
    name = _field(d, "name", (str,), where)
    return SweepVariant(name, str(d.get("draft_model") or ""), int(d.get("k") or 0), str(d.get("method") or ""), tp)


def inputs_from_settings(settings: Mapping[str, Any]) -> sweep_next.Inputs:
    """config/sweep_decision.py's dict back into the Inputs ``sweep next`` decides with."""
    if not isinstance(settings, Mapping):
        raise ControlError(f"settings: expected an object, got {settings!r:.40}")
    number = (int, float)
    objective = _field(settings, "objective", (dict,))
    optional = (int, float, type(None))
    estimates = _field(settings, "estimates", (dict,))
    plan = settings.get("plan")
    if plan is not None and not isinstance(plan, dict):
        raise ControlError(f"settings.plan: expected an object or null, got {plan!r:.40}")
    variants = tuple(_variant(v, f"settings.variants[{i}]") for i, v in enumerate(_field(settings, "variants", (list,))))
    if not variants:
        raise ControlError("settings.variants: empty (no sweep configured: sweep.variants)")
    weights = _field(objective, "weights", (dict,), "settings.objective")
    if not weights or not all(isinstance(w, number) and not isinstance(w, bool) for w in weights.values()):
        raise ControlError(f"settings.objective.weights: expected class -> number, got {weights!r:.60}")
    return sweep_next.Inputs(
        variants,
        loads(
            tuple(int(c) for c in _field(settings, "concurrencies", (list,))),
            tuple(float(r) for r in _field(settings, "request_rates", (list,))),
        ),
        staged.Objective(
            dict(weights),
            _field(objective, "price_per_node_hour", optional, "settings.objective"),
            _field(objective, "slo_tpot_s", optional, "settings.objective"),
            _field(objective, "slo_ttft_s", optional, "settings.objective"),
        ),
        _field(settings, "slots", (int,)),
        float(_field(settings, "margin", number)),
        _field(settings, "namespace", (str,)),
        Estimates(
            *(float(_field(estimates, k, number, "settings.estimates")) for k in ("compile_minutes", "start_minutes", "measure_minutes"))
        ),
        _field(settings, "nodes", (int,)),
        tuple(
            staged.Config(str(c.get("draft") or ""), int(c.get("k") or 0), str(c.get("method") or ""))
            for c in settings.get("precompiled") or []
        ),
        None
        if plan is None
        else staged.StagedCost(*(float(_field(plan, k, number, "settings.plan")) for k in ("stage_one", "expected", "worst", "grid"))),
        _field(settings, "budget_node_hours", optional),
        tuple(_variant(v, f"settings.stage_one[{i}]") for i, v in enumerate(_field(settings, "stage_one", (list,)))),
        _packing(settings.get("packing")),
    )


def _packing(value: Any) -> Packing | None:
    """settings.packing (config/sweep_decision.py ``packing_settings``) back into a Packing; null: none."""
    if value is None:
        return None
    where = "settings.packing"

    def whole(items: Any, size: int, field: str) -> list[list[int]]:
        ok = isinstance(items, list) and all(
            isinstance(r, list) and len(r) == size and all(type(x) is int and x >= 0 for x in r) for r in items
        )
        if not ok or not items:
            raise ControlError(f"{where}.{field}: expected a non-empty list of {size} whole numbers >= 0 each, got {items!r:.60}")
        return items

    if not isinstance(value, dict):
        raise ControlError(f"{where}: expected an object or null, got {value!r:.40}")
    free = whole(value.get("free"), 3, "free")
    demand = whole(value.get("demand"), 4, "demand")
    devices = value.get("devices_per_node")
    if type(devices) is not int or devices < 1:
        raise ControlError(f"{where}.devices_per_node: expected a whole number >= 1, got {devices!r:.40}")
    return Packing(tuple(Room(*r) for r in free), tuple((tp, Room(*r)) for tp, *r in demand), devices)


def stage_template(first: Mapping[str, Any], name: str, stage: int) -> dict[str, Any]:
    """The sweep's first Job (as the API returns it) as the Job kubectl's ``create job --from=cronjob``
    would print for ``name``: its labels, owner and spec, without what the system added (status,
    uid, selector, controller labels)."""
    meta = first.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in SYSTEM_LABELS}
    spec = copy.deepcopy(first.get("spec") or {})
    spec.pop("selector", None)
    spec.pop("manualSelector", None)
    template_meta = (spec.get("template") or {}).get("metadata") or {}
    if "labels" in template_meta:
        template_meta["labels"] = {k: v for k, v in template_meta["labels"].items() if k not in SYSTEM_LABELS}
    metadata: dict[str, Any] = {"name": name, "labels": labels, "annotations": {STAGE_ANNOTATION: str(stage)}}
    if meta.get("ownerReferences"):
        metadata["ownerReferences"] = copy.deepcopy(meta["ownerReferences"])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


@dataclass(frozen=True)
class Outcome:
    state: str  # done | budget | failed
    message: str


def _over_budget(doc: Mapping[str, Any]) -> str:
    hours = doc.get("node_hours") or {}
    budget, so_far = hours.get("budget"), hours.get("so_far")
    if budget and so_far is not None and so_far > budget * (1 + 1e-9):
        stage = (doc.get("next_stage") or {}).get("stage")
        return f"stage {stage} would take the sweep to {so_far:.1f} node-hours, over sweep.budget_node_hours {budget:.1f}: not started"
    return ""


def template_key(sweep_id: str, tp: int = 0) -> str:
    return f"sweeps/{sweep_id}/{sweep_next.STAGES}stage-job-template{tp_suffix(tp)}.json"


def _template(api: Any, store: Any, sweep_id: str, first_job: str, tp: int = 0) -> dict[str, Any] | None:
    """The sweep's first Job (of TP group ``tp``: ``<first job>-tp<N>``), kept in the sweep's prefix
    when first seen: ttlSecondsAfterFinished deletes a finished Job (charts/sweep.py sets it), and
    later stages are made from its spec."""
    key = template_key(sweep_id, tp)
    if key in store.keys(key):
        return json.loads(store.read_text(key))
    first = api.get(first_job)
    if first is not None:
        store.write_text(key, dumps(first, indent=2, sort_keys=True) + "\n")
    return first


def step(api: Any, store: Any, sweep_id: str, inputs: sweep_next.Inputs, first_job: str, resamples: int) -> tuple[str, Outcome | None]:
    """One step the stored documents and the Jobs call for: what it did, and the outcome once there is one."""
    from specbench.outputs.sweep_report import load_sweep_folders

    documents = sweep_next.stage_documents(store, sweep_id)
    proposed = (documents[-1].get("next_stage") or {}) if documents else {}
    if documents and not proposed.get("stage"):
        return "every decision is made", Outcome(
            DONE, f"sweep {sweep_id}: every decision is made after stage {documents[-1]['after_stage']}"
        )
    folders = load_sweep_folders(store, sweep_id)
    # Stored means usable (checked.py): a pod's point folder appears, run.json "running", as soon as its run
    # starts, and a decision then would stop the sweep ("stage N has not finished") while its stage still runs.
    stored = {p.point_id for p in checked.check(folders, sweep_id, inputs.variants, inputs.loads).used}
    if not documents:  # stage 1: the sweep's first Job, and one per other TP group (their specs kept first)
        stage, jobs = 1, {}
        for tp in sorted({0, *(v.tp for v in inputs.stage_one)}):
            name = first_job + tp_suffix(tp)
            job = _template(api, store, sweep_id, name, tp)
            if job is not None:
                job = api.get(name) or {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}  # gone: finished
            if job is None:
                return "no first Job", Outcome(FAILED, f"sweep {sweep_id}: no Job {name} (stage 1: start the sweep first)")
            jobs[name] = job
    else:
        stage = int(proposed["stage"])
        if all(p in stored for p in proposed.get("points") or []):  # measured (its Job may be gone: ttlSecondsAfterFinished)
            return _decide(store, sweep_id, inputs, resamples)
        jobs, created = {}, []
        for tp in stage_groups(documents[-1]) or [0]:  # one Job per TP group the stage has units in
            name = group_job_name(sweep_id, stage, tp)
            job = api.get(name)
            if job is None:
                over = _over_budget(documents[-1])
                if over:
                    return "budget", Outcome(BUDGET, f"sweep {sweep_id}: {over}")
                first = _template(api, store, sweep_id, first_job + tp_suffix(tp), tp)
                if first is None:
                    return "no first Job", Outcome(
                        FAILED, f"sweep {sweep_id}: its first Job {first_job + tp_suffix(tp)} is gone: no template for stage {stage}"
                    )
                slots = inputs.packing.slots(tp) if inputs.packing else inputs.slots
                made = api.create(stage_job(stage_template(first, name, stage), documents[-1], slots))
                created.append(f"created job {name} (stage {stage})" if made else f"job {name} (stage {stage}) was already created")
            jobs[name] = job
        if created:
            return "; ".join(created), None
    for name, job in jobs.items():
        if job_state(job) == "failed":
            return f"job {name} failed", Outcome(
                FAILED, f"sweep {sweep_id}: stage {stage}'s Job {name} failed: see kubectl -n {api.namespace} describe job {name}"
            )
    if all(job_state(job) == "complete" for job in jobs.values()):
        return _decide(store, sweep_id, inputs, resamples)
    return f"waiting for job {', '.join(n for n, j in jobs.items() if job_state(j) != 'complete')} (stage {stage})", None


def _decide(store: Any, sweep_id: str, inputs: sweep_next.Inputs, resamples: int) -> tuple[str, Outcome | None]:
    """Decide on the points read again now. The step's first read listed each folder's files before
    reading its run.json: a pod finishing in between leaves a "completed" point whose last files
    (the last test case's acceptance) were not listed, and a Job seen Complete after that read may
    have written more. Every point the stage needed was complete before this listing, so it has
    all of their files: the decision is the one ``sweep next`` makes on the stored points."""
    from specbench.outputs.sweep_report import load_sweep_folders

    try:
        _, doc, location = sweep_next.advance(store, load_sweep_folders(store, sweep_id), sweep_id, inputs, resamples)
    except ValueError as error:  # a finished stage whose points do not decide: a person must look
        return "cannot decide", Outcome(FAILED, str(error))
    return f"decided after stage {doc['after_stage']}: {location}", None


def run(
    api: Any,
    store: Any,
    sweep_id: str,
    inputs: sweep_next.Inputs,
    *,
    first_job: str = "",
    poll_s: float = 60.0,
    max_steps: int = 100_000,
    resamples: int = staged.RESAMPLES,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = print,
) -> Outcome:
    """Steps until an outcome; a step that only waits sleeps ``poll_s`` first. Bounded by ``max_steps``.
    Each step lists the sweep's objects and reads every point's files: on S3 an object already read
    at the ETag listed now is not fetched again (PollingReader), so a poll of a stage still running
    costs its listing and the objects written since the last poll."""
    if isinstance(store, S3Store):
        store = PollingReader(store)
    for _ in range(max_steps):
        did, outcome = step(api, store, sweep_id, inputs, first_job or sweep_id, resamples)
        log(f"sweep control: {did}")
        if outcome is not None:
            return outcome
        if did.startswith("waiting"):
            sleep(poll_s)
    return Outcome(FAILED, f"sweep {sweep_id}: not finished after {max_steps} steps (--max-steps)")


def _poll(text: str) -> float:
    value = float(text)
    if not 0 < value <= MAX_POLL_S:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {MAX_POLL_S:g}], got {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="specbench sweep control", description="run a staged sweep's stages in the cluster (docs/sweeps.md)", allow_abbrev=False
    )
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    from specbench.flags import safe_name

    p.add_argument("--sweep-id", type=safe_name, required=True, help="the sweep (its first Job's name unless --first-job)")
    p.add_argument("--results", required=True, help="the results location (s3://bucket/prefix or a directory)")
    p.add_argument("--settings", required=True, help="settings.json: its sweep_decision object (config/sweep_decision.py)")
    p.add_argument("--first-job", default="", help="stage 1's Job (default: the sweep id)")
    p.add_argument("--namespace", default="", help="the Jobs' namespace (default: the service account's)")
    p.add_argument("--api-url", default=IN_CLUSTER, help=f"the Kubernetes API (default {IN_CLUSTER})")
    p.add_argument("--account", default=str(ACCOUNT), help="the service account's token, ca.crt and namespace")
    p.add_argument("--poll-seconds", type=_poll, default=60.0, help=f"between two reads of a running Job (at most {MAX_POLL_S:g})")
    p.add_argument("--max-steps", type=_positive, default=100_000, help="stop after this many steps")
    p.add_argument("--resamples", type=_positive, default=staged.RESAMPLES, help="bootstrap resamples of every decision")
    p.add_argument("--region", default=None)


def main_control(argv: list[str] | None = None) -> int:
    return control(parser().parse_args(argv))


def control(args: argparse.Namespace) -> int:
    """0: every decision made, or the budget stopped it (said); 1: a stage failed or cannot decide; 2: bad settings."""
    from specbench.results.store import open_store

    try:
        settings = json.loads(Path(args.settings).read_text())
        decision = settings.get("sweep_decision", settings) if isinstance(settings, dict) else settings
        inputs = inputs_from_settings(decision)
        api = JobsApi.from_account(args.api_url, Path(args.account), args.namespace)
        store = open_store(args.results, args.region)
    except (OSError, ValueError) as error:
        print(f"specbench: sweep control: {error}", file=sys.stderr)
        return 2
    try:
        outcome = run(
            api,
            store,
            args.sweep_id,
            inputs,
            first_job=args.first_job,
            poll_s=args.poll_seconds,
            max_steps=args.max_steps,
            resamples=args.resamples,
            log=lambda line: print(line, flush=True),
        )
    except (JobsApiError, StageJobError, OSError) as error:  # a restart continues from the cluster's state
        print(f"specbench: sweep control: {error}", file=sys.stderr)
        return 1
    print(f"sweep control: {outcome.message}", flush=True)
    return 1 if outcome.state == FAILED else 0


if __name__ == "__main__":
    sys.exit(main_control())
