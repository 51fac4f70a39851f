"""``specbench sweep stage-job``: the CronJob's Job made into a staged sweep's next stage, every
input checked first and the Job checked again before it is printed.

The input is what ``kubectl create job NAME --from=cronjob/specbench-sweep --dry-run=client -o json``
prints: kubectl copies the CronJob's ``jobTemplate`` (its labels and its whole spec) into a
``batch/v1`` ``Job`` (kubernetes/kubectl pkg/cmd/create/create_job.go, ``createJobFromCronJob``), so
it carries charts/sweep.py's label ``app.kubernetes.io/name: specbench-sweep`` (another value: another
app's Job), an Indexed spec and a pod template whose measuring container reads ``SWEEP_ID``. Anything
else (another kind, no containers) is refused: the filter's output is applied to the cluster as is.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from specbench.names import check_name, echo
from specbench.sweep.points import NAME

CRONJOB = "specbench-sweep"  # charts/sweep.py NAME
NAME_LABEL = "app.kubernetes.io/name"  # charts/sweep.py LABELS
STAGE_UNITS_ENV = "SWEEP_STAGE_UNITS"  # the catalogue indexes a stage's Job runs, by completion index
SWEEP_ID_ENV = "SWEEP_ID"
# A TP group's CronJob (charts/sweep.py: sweep.tensor_parallel_sizes): its label, the suffix of its
# CronJob's and Jobs' names, and the env its point runner takes that suffix off the Job's name by.
TP_LABEL = "specbench/sweep-tp"
SWEEP_ID_SUFFIX_ENV = "SWEEP_ID_SUFFIX"


def tp_suffix(tp: int) -> str:
    return f"-tp{tp}" if tp else ""


def group_job_name(sweep_id: str, stage: int, tp: int = 0) -> str:
    """A stage's Job of one TP group: ``<sweep id>-s<stage>`` (the services' TP) or ``...-s<stage>-tp<N>``."""
    suffix = f"-s{stage}{tp_suffix(tp)}"
    stem = re.sub(r"[^a-z0-9-]", "-", sweep_id.lower())[: 63 - len(suffix)].strip("-") or "sweep"
    return stem + suffix


def stage_groups(stage_doc: Mapping[str, Any]) -> list[int]:
    """The TP groups the next stage has units in (each needs its group's Job)."""
    variants = ((stage_doc.get("next_stage") or {}).get("variants")) or []
    return sorted({int(v.get("tp") or 0) for v in variants if isinstance(v, dict)})


# A DNS-1123 label: "For best compatibility, the name should follow the more restrictive rules for a DNS
# label. Even when the name is a DNS subdomain, the name must be no longer than 63 characters"
# (kubernetes.io/docs/concepts/workloads/controllers/job/: it becomes its pods' names and job-name label).
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)


class StageJobError(ValueError):
    """Input the filter cannot make a stage's Job from; the message names the field."""


def job_name(sweep_id: str, stage: int) -> str:
    """The stage's Job name: ``<sweep id>-s<stage>``, a DNS label. The sweep id is cut (never the
    suffix, so two stages never share a name) and made lowercase with ``_``/``.`` as ``-``."""
    suffix = f"-s{stage}"
    stem = re.sub(r"[^a-z0-9-]", "-", sweep_id.lower())[: 63 - len(suffix)].strip("-") or "sweep"
    return stem + suffix


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StageJobError(f"{where}: expected a JSON object, got {echo(value, 40)}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise StageJobError(f"{where}: expected a JSON list, got {echo(value, 40)}")
    return value


def check_stage_doc(doc: Any, tp: int | None = None) -> tuple[str, int, list[int]]:
    """The stage document's sweep id, next stage and completion index -> catalogue unit index
    (unit 0 is the baseline, so the catalogue's i-th variant is unit i + 1); with ``tp``, only the
    stage's units of that TP group (0: the services' TP)."""
    doc = _mapping(doc, "--stage document")
    try:
        sweep_id = check_name(doc.get("sweep_id"), "--stage document: sweep_id")
    except ValueError as error:
        raise StageJobError(str(error)) from None
    nxt = _mapping(doc.get("next_stage") or {}, "--stage document: next_stage")
    stage = nxt.get("stage")
    if not stage:
        raise StageJobError("this stage document proposes no further stage: every decision is made")
    if type(stage) is not int or stage < 2:
        raise StageJobError(f"--stage document: next_stage.stage {echo(stage)} is not a stage number (2 or more)")
    names = []
    for i, entry in enumerate(_list(doc.get("catalogue"), "--stage document: catalogue")):
        name = _mapping(entry, f"--stage document: catalogue[{i}]").get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise StageJobError(f"--stage document: catalogue[{i}].name {echo(name)} is not a variant name (a DNS label)")
        if name in names:
            raise StageJobError(f"--stage document: catalogue names {name} twice")
        names.append(name)
    indexes: list[int] = []
    variants = _list(nxt.get("variants"), "--stage document: next_stage.variants")
    if not variants:
        raise StageJobError(f"--stage document: stage {stage} lists no variant")
    for i, entry in enumerate(variants):
        name = _mapping(entry, f"--stage document: next_stage.variants[{i}]").get("name")
        if name not in names:
            raise StageJobError(f"--stage document: variant {echo(name)} is not in the sweep's catalogue ({', '.join(names)})")
        index = names.index(name) + 1
        if index in indexes:  # two completion indexes of one unit would measure (and store) its points twice
            raise StageJobError(f"--stage document: stage {stage} lists variant {name} twice")
        if tp is None or int(entry.get("tp") or 0) == tp:
            indexes.append(index)
    if not indexes:
        groups = ", ".join(f"cronjob/{CRONJOB}{tp_suffix(g)}" for g in stage_groups(doc))
        raise StageJobError(f"stage {stage} has no unit at TP {tp or 'of the services'}: make its Jobs from {groups}")
    return sweep_id, stage, indexes


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    containers = _list(pod.get("containers"), "Job spec.template.spec.containers")
    if not containers:
        raise StageJobError("Job spec.template.spec.containers is empty: not the sweep CronJob's Job")
    found = []
    for field in ("initContainers", "containers"):
        for i, container in enumerate(_list(pod.get(field, []), f"Job spec.template.spec.{field}")):
            where = f"Job spec.template.spec.{field}[{i}]"
            container = _mapping(container, where)
            if not isinstance(container.get("name"), str):
                raise StageJobError(f"{where}: has no name")
            for j, env in enumerate(_list(container.get("env", []), f"{where}.env")):
                if not isinstance(_mapping(env, f"{where}.env[{j}]").get("name"), str):
                    raise StageJobError(f"{where}.env[{j}]: has no name")
            found.append(container)
    return found


def check_job(job: Any) -> None:
    """The CronJob's Job as kubectl prints it (module docstring); StageJobError otherwise."""
    job = _mapping(job, "stdin")
    if job.get("kind") != "Job" or job.get("apiVersion") != "batch/v1":
        raise StageJobError(f"stdin is kind {echo(job.get('kind'))} of {echo(job.get('apiVersion'))}: expected a batch/v1 Job")
    metadata = _mapping(job.get("metadata") or {}, "Job metadata")
    name = metadata.get("name")
    if name is not None and not (isinstance(name, str) and DNS_LABEL.fullmatch(name)):
        raise StageJobError(f"Job metadata.name {echo(name)} is not a DNS label (1-63 lowercase letters, digits or '-')")
    labels = _mapping(metadata.get("labels") or {}, "Job metadata.labels")
    if labels.get(NAME_LABEL, CRONJOB) != CRONJOB:  # kubectl copies the jobTemplate's labels: another app's Job
        raise StageJobError(f"Job metadata.labels[{NAME_LABEL}] is {echo(labels.get(NAME_LABEL))}: not a Job of cronjob/{CRONJOB}")
    spec = _mapping(job.get("spec"), "Job spec")
    if spec.get("completionMode") != "Indexed":
        raise StageJobError(f"Job spec.completionMode is {echo(spec.get('completionMode'))}: the sweep's Job is Indexed")
    parallelism = spec.get("parallelism")
    if parallelism is not None and (type(parallelism) is not int or parallelism < 1):
        raise StageJobError(f"Job spec.parallelism {echo(parallelism)} is not a whole number >= 1")
    pod = _mapping(_mapping(spec.get("template"), "Job spec.template").get("spec"), "Job spec.template.spec")
    if not any(e.get("name") == SWEEP_ID_ENV for c in _containers(pod) for e in c.get("env", [])):
        raise StageJobError(f"no container of the Job reads {SWEEP_ID_ENV}: not the sweep CronJob's Job")


def stage_job(job: Any, stage_doc: Any, slots: int | None = None) -> dict[str, Any]:
    """The CronJob's Job made into the stage's: as many completions as the stage has variants,
    ``SWEEP_STAGE_UNITS`` mapping each completion index to the variant's index in the chart's unit
    catalogue (charts/sweep.py: baseline, every variant, baseline again), and the sweep id fixed
    (the stage's Job has a name of its own, the sweep keeps its id)."""
    check_job(job)
    tp_label = ((job.get("metadata") or {}).get("labels") or {}).get(TP_LABEL, "0")
    if not (isinstance(tp_label, str) and tp_label.isdigit()):
        raise StageJobError(f"Job metadata.labels[{TP_LABEL}] is {echo(tp_label)}: not a TP (a whole number)")
    sweep_id, _, indexes = check_stage_doc(stage_doc, int(tp_label))
    out = copy.deepcopy(job)
    spec = out["spec"]
    spec["completions"] = len(indexes)
    spec["parallelism"] = min(int(slots or spec.get("parallelism") or len(indexes)), len(indexes))
    pod = spec["template"]["spec"]
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        # The sweep id is set: a TP group's suffix (the Job name's) is not taken off it.
        env = [e for e in container.get("env", []) if e["name"] not in (STAGE_UNITS_ENV, SWEEP_ID_ENV, SWEEP_ID_SUFFIX_ENV)]
        if any(e["name"] == SWEEP_ID_ENV for e in container.get("env", [])):
            env.append({"name": SWEEP_ID_ENV, "value": sweep_id})
        env.append({"name": STAGE_UNITS_ENV, "value": ",".join(map(str, indexes))})
        container["env"] = env
    check_output(out)
    return out


def check_output(job: Mapping[str, Any]) -> None:
    """The Job about to be printed: completions match distinct indexes, every id is safe."""
    spec = job["spec"]
    for container in [*spec["template"]["spec"].get("initContainers", []), *spec["template"]["spec"]["containers"]]:
        values = {e["name"]: e.get("value") for e in container["env"]}
        units = str(values.get(STAGE_UNITS_ENV, "")).split(",")
        if len(units) != spec["completions"] or len(set(units)) != len(units) or not all(u.isdigit() for u in units):
            raise StageJobError(f"{STAGE_UNITS_ENV}={values.get(STAGE_UNITS_ENV)!r} does not give {spec['completions']} distinct units")
        if SWEEP_ID_ENV in values:
            check_name(values[SWEEP_ID_ENV], SWEEP_ID_ENV)
