"""Pod Security Standards: the namespace enforces baseline and warns/audits at restricted (pinned
versions), every container of every pod the charts render meets the level its namespace enforces,
and the pods that can meet restricted do (tests/pss.py holds the standards as data)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from pss import highest_level, violations

from charts import serving_plan
from charts.model_cache import model_cache_objects
from config import load_config
from conftest import BUCKET


def _objects(dist):
    return [o for objects in dist.values() for o in objects]


def _pods(objects):
    for obj in objects:
        kind, spec = obj["kind"], obj.get("spec", {})
        if kind in ("Deployment", "Job"):
            yield f"{kind}/{obj['metadata']['name']}", obj["metadata"]["namespace"], spec["template"]["spec"]
        elif kind == "CronJob":
            yield f"{kind}/{obj['metadata']['name']}", obj["metadata"]["namespace"], spec["jobTemplate"]["spec"]["template"]["spec"]


def _enforced(objects) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["metadata"]["labels"].get("pod-security.kubernetes.io/enforce", "privileged")
        for o in objects
        if o["kind"] == "Namespace"
    }


def test_namespace_enforces_baseline_and_warns_and_audits_restricted(dist, config):
    (namespace,) = [o for o in _objects(dist) if o["kind"] == "Namespace"]
    version = f"v{config.cluster.kubernetes_version}"
    assert {k: v for k, v in namespace["metadata"]["labels"].items() if k.startswith("pod-security")} == {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": version,
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": version,
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": version,
    }
    labels = load_config({"cluster.kubernetes_version": "1.34"}, {})
    assert (
        model_cache_objects(serving_plan(labels, BUCKET).model_cache)[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce-version"]
        == "v1.34"
    )


def test_every_pod_meets_the_level_its_namespace_enforces(dist):
    objects = _objects(dist)
    enforced = _enforced(objects)
    pods = list(_pods(objects))
    assert len(pods) == 5  # two services, the model-cache Job, the benchmark Job and its rerun template
    levels = {}
    for name, namespace, pod in pods:
        assert violations(pod, enforced[namespace]) == [], name
        levels[name.split("-")[0] if name.startswith("Job/") else name] = highest_level(pod)
    print("\nPod Security level per pod:", levels)
    assert levels == {
        "Deployment/qwen-vllm": "baseline",
        "Deployment/qwen-sd-vllm": "baseline",
        "Job/model": "restricted",
        "Job/specbench": "restricted",
        "CronJob/specbench": "restricted",
    }


def test_serving_pods_miss_restricted_only_by_running_as_root(dist):
    for name, _, pod in _pods(_objects(dist)):
        if name.startswith("Deployment/"):
            assert violations(pod, "restricted") == ["Running as Non-root"], name
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for container in pod["containers"] + pod["initContainers"]:
                assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_the_token_reading_variant_meets_restricted_too(config):
    secret = "arn:aws:secretsmanager:us-east-2:123456789012:secret:hf/token-AbCdEf"
    cache = dataclasses.replace(serving_plan(config, BUCKET).model_cache, hf_token_secret_arn=secret)
    job = model_cache_objects(cache)[-1]
    pod = job["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["fetch-code", "read-hf-token"]
    assert highest_level(pod) == "restricted"


def _deployment_pod(dist):
    return copy.deepcopy(next(pod for name, _, pod in _pods(_objects(dist)) if name.startswith("Deployment/")))


@pytest.mark.parametrize(
    "breakage, control, level",
    [
        (lambda pod: pod["containers"][0]["securityContext"].update(privileged=True), "Privileged Containers", "baseline"),
        (lambda pod: pod.update(hostNetwork=True), "Host Namespaces", "baseline"),
        (lambda pod: pod["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), "HostPath Volumes", "baseline"),
        (lambda pod: pod["initContainers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]), "Capabilities", "baseline"),
        (lambda pod: pod["securityContext"].update(seccompProfile={"type": "Unconfined"}), "Seccomp", "baseline"),
        (lambda pod: pod["containers"][0]["ports"][0].update(hostPort=8000), "Host Ports", "baseline"),
        (lambda pod: pod["containers"][0]["startupProbe"]["httpGet"].update(host="10.0.0.1"), "Host Probes / Lifecycle Hooks", "baseline"),
        (lambda pod: pod["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]), "Sysctls", "baseline"),
        (lambda pod: pod["initContainers"][0]["securityContext"].pop("allowPrivilegeEscalation"), "Privilege Escalation", "restricted"),
        (lambda pod: pod["initContainers"][0]["securityContext"].pop("capabilities"), "Capabilities (drop ALL)", "restricted"),
        (lambda pod: pod["securityContext"].pop("seccompProfile"), "Seccomp (required)", "restricted"),
    ],
)
def test_each_rule_catches_its_breakage(dist, breakage, control, level):
    pod = _deployment_pod(dist)
    assert control not in violations(pod, "restricted")
    breakage(pod)
    assert control in violations(pod, level)
