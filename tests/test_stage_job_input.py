"""``specbench sweep stage-job`` (issue 33): the chart's own CronJob, copied as kubectl copies it,
becomes a stage's Job that passes strict schema validation; anything that is not that Job, or a
stage document that would give duplicate completion indexes or an unsafe id, is one line and exit 2."""

from __future__ import annotations

import io
import json

import kubernetes_validate
import pytest

from charts import benchmark_spec, serving_plan
from charts.sweep import sweep_objects, sweep_spec
from config import catalog, load_config
from conftest import BUCKET
from specbench import cli
from specbench.outputs.stage_job import DNS_LABEL, job_name

Q17 = "Qwen/Qwen3-1.7B"
CONTEXT = {
    "neuron_nodes.desired_size": 2,
    "neuron_nodes.max_size": 2,
    "sweep.variants": ",".join(f"q17-k{k}:{Q17}:{k}" for k in (3, 5, 7)),
    "sweep.strategy": "staged",
}
DOC = {
    "sweep_id": "sweep-20261201-2100",
    "catalogue": [{"name": "q17-k3"}, {"name": "q17-k5"}, {"name": "q17-k7"}],
    "next_stage": {"stage": 2, "variants": [{"name": "q17-k7"}, {"name": "q17-k3"}], "points": []},
}


@pytest.fixture(scope="module")
def cron_job():
    """What ``kubectl create job s2 --from=cronjob/specbench-sweep --dry-run=client -o json`` prints:
    kubectl's createJobFromCronJob (kubernetes/kubectl pkg/cmd/create/create_job.go) copies the
    jobTemplate's labels and spec, adds the instantiate annotation and an owner reference."""
    config = load_config(CONTEXT, {})
    plan = serving_plan(config, BUCKET)
    cron = next(o for o in sweep_objects(sweep_spec(config, plan, benchmark_spec(config, plan))) if o["kind"] == "CronJob")
    template = cron["spec"]["jobTemplate"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "sweep-20261201-2100-s2",
            "namespace": cron["metadata"]["namespace"],
            "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "labels": template["metadata"]["labels"],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": cron["metadata"]["name"], "uid": ""}],
        },
        "spec": template["spec"],
    }


def _filter(monkeypatch, tmp_path, capsys, stdin: str, doc=DOC):  # type: ignore[no-untyped-def]
    path = tmp_path / "after-stage-1.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = cli.main(["sweep", "stage-job", "--stage", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_charts_cronjob_becomes_a_valid_stage_job(monkeypatch, tmp_path, capsys, cron_job):
    code, out, err = _filter(monkeypatch, tmp_path, capsys, json.dumps(cron_job))
    assert code == 0, err
    job = json.loads(out)
    for version in catalog.SUPPORTED_KUBERNETES_VERSIONS:
        kubernetes_validate.validate(job, f"{version}.0", strict=True)
    assert job["spec"]["completions"] == 2 and job["spec"]["completionMode"] == "Indexed"
    pod = job["spec"]["template"]["spec"]
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        names = [e["name"] for e in container.get("env", [])]
        assert names.count("SWEEP_STAGE_UNITS") == 1 and names.count("SWEEP_ID") <= 1
        assert {"name": "SWEEP_STAGE_UNITS", "value": "3,1"} in container["env"]
    measure = next(c for c in pod["containers"] if c["name"] == "measure")
    assert {"name": "SWEEP_ID", "value": DOC["sweep_id"]} in measure["env"]


def _edited(job, path, value):  # type: ignore[no-untyped-def]
    """The job as JSON text with the field at ``path`` set to ``value`` (removed for KeyError)."""
    out = json.loads(json.dumps(job))
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(out)


CONTAINERS = ["spec", "template", "spec", "containers"]
BROKEN_JOBS = {
    "a list": ([], [], "stdin: expected a JSON object"),
    "wrong kind": (["kind"], "CronJob", "expected a batch/v1 Job"),
    "no kind": (["kind"], KeyError, "expected a batch/v1 Job"),
    "another app's Job": (["metadata", "labels"], {"app.kubernetes.io/name": "other"}, "not a Job of cronjob/specbench-sweep"),
    "no spec": (["spec"], KeyError, "Job spec: expected a JSON object"),
    "not Indexed": (["spec", "completionMode"], "NonIndexed", "completionMode"),
    "no containers": (CONTAINERS, [], "containers is empty"),
    "containers not a list": (CONTAINERS, "x", "containers: expected a JSON list"),
    "template a string": (["spec", "template"], "x", "Job spec.template: expected a JSON object"),
    "env a string": ([*CONTAINERS, 0, "env"], "x", "env: expected a JSON list"),
    "env item no name": ([*CONTAINERS, 0, "env"], [{}], "env[0]: has no name"),
    "parallelism text": (["spec", "parallelism"], "two", "parallelism"),
    "unsafe Job name": (["metadata", "name"], "../sw-s2", "Job metadata.name '../sw-s2' is not a DNS label"),
    "nested": (None, "[" * 100_000 + "]" * 100_000, "stdin: nested too deeply"),
    "not JSON": (None, "{", "stdin: not JSON"),
}


@pytest.mark.parametrize("case", list(BROKEN_JOBS))
def test_input_that_is_not_the_cronjobs_job_is_one_line(monkeypatch, tmp_path, capsys, cron_job, case):
    path, value, expected = BROKEN_JOBS[case]
    stdin = value if path is None else json.dumps(value) if not path else _edited(cron_job, path, value)
    code, out, err = _filter(monkeypatch, tmp_path, capsys, stdin)
    assert code == cli.EXIT_USAGE and not out
    assert err.startswith("specbench: sweep stage-job: ") and err.count("\n") == 1 and expected in err, err


def _doc(**changes):  # type: ignore[no-untyped-def]
    doc = json.loads(json.dumps(DOC))
    for key, value in changes.items():
        if key in ("stage", "variants"):
            doc["next_stage"][key] = value
        else:
            doc[key] = value
    return doc


BROKEN_DOCS = {
    "a variant twice": (_doc(variants=[{"name": "q17-k7"}, {"name": "q17-k7"}]), "lists variant q17-k7 twice"),
    "unknown variant": (_doc(variants=[{"name": "q17-k9"}]), "'q17-k9' is not in the sweep's catalogue"),
    "no variant": (_doc(variants=[]), "lists no variant"),
    "variants not a list": (_doc(variants={"name": "q17-k7"}), "next_stage.variants: expected a JSON list"),
    "variant not an object": (_doc(variants=["q17-k7"]), "next_stage.variants[0]: expected a JSON object"),
    "stage as text": (_doc(stage="2"), "is not a stage number"),
    "sweep id leaves the folder": (_doc(sweep_id="../escaped"), "sweep_id '../escaped'"),
    "sweep id missing": (_doc(sweep_id=None), "sweep_id None"),
    "catalogue name unsafe": (_doc(catalogue=[{"name": "q17-k7\n"}]), "is not a variant name"),
    "catalogue twice": (_doc(catalogue=[{"name": "q17-k7"}, {"name": "q17-k7"}]), "catalogue names q17-k7 twice"),
    "catalogue missing": (_doc(catalogue=None), "catalogue: expected a JSON list"),
    "a list": ([], "--stage document: expected a JSON object"),
    "not JSON": ("{", "not JSON"),
}


@pytest.mark.parametrize("case", list(BROKEN_DOCS))
def test_a_stage_document_that_would_give_a_bad_job_is_one_line(monkeypatch, tmp_path, capsys, cron_job, case):
    doc, expected = BROKEN_DOCS[case]
    code, out, err = _filter(monkeypatch, tmp_path, capsys, json.dumps(cron_job), doc)
    assert code == cli.EXIT_USAGE and not out
    assert err.startswith("specbench: sweep stage-job: ") and err.count("\n") == 1 and expected in err, err


@pytest.mark.parametrize("sweep_id", ["a" * 62, "a" * 60 + "-b", "Sweep_2026.12", "sw"])
def test_stage_job_names_are_distinct_dns_labels(sweep_id):
    names = [job_name(sweep_id, stage) for stage in (2, 3, 10, 11)]
    assert len(set(names)) == 4 and all(DNS_LABEL.fullmatch(n) and len(n) <= 63 for n in names), names
