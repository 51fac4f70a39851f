"""Small builders for Kubernetes object fragments the charts share."""

from __future__ import annotations

from typing import Any

import cdk8s

from config import layout

PART_OF = {"app.kubernetes.io/part-of": "specdecode-trn2"}


def metadata(name: str, namespace: str | None = None, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**PART_OF, **(labels or {})}, **extra}
    if namespace:
        meta["namespace"] = namespace
    return meta


def neuron_placement(instance_type: str) -> dict[str, Any]:
    """Pod-spec fields that put a pod on the Trainium node group, and only there."""
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": layout.NODE_POOL_LABEL, "operator": "In", "values": [layout.NEURON_POOL]},
                                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [{"key": layout.NEURON_TAINT_KEY, "operator": "Equal", "value": layout.NEURON_TAINT_VALUE, "effect": "NoSchedule"}],
    }


# A suspended CronJob never fires; Kubernetes still requires a schedule.
NEVER = "0 0 1 1 *"


def suspended_cronjob(name: str, namespace: str, labels: dict[str, str], job: dict[str, Any]) -> dict[str, Any]:
    """A template Job kept as a CronJob that never runs (suspended): ``kubectl create job X
    --from=cronjob/<name>`` copies its job template into a Job (the benchmark's reruns, a sweep's start,
    its controller's). Forbid: a copy never runs beside another one the CronJob itself started."""
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": metadata(name, namespace, labels),
        "spec": {
            "schedule": NEVER,
            "suspend": True,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"metadata": {"labels": dict(labels)}, "spec": job},
        },
    }


def guaranteed(cpu: str, memory: str, **extended: str) -> dict[str, Any]:
    """Requests equal to limits (Guaranteed QoS: no CPU overcommit, last to be evicted)."""
    amounts = {"cpu": cpu, "memory": memory, **extended}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def claim_volume(name: str, claim: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}}


def add_objects(chart: cdk8s.Chart, manifests: tuple[dict[str, Any], ...]) -> None:
    """Add plain manifests to a chart as ApiObjects (ids from kind and name)."""
    for manifest in manifests:
        obj = cdk8s.ApiObject(
            chart,
            f"{manifest['kind']}-{manifest['metadata']['name']}",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=cdk8s.ApiObjectMetadata(**_snake(manifest["metadata"])),
        )
        for field, value in manifest.items():
            if field not in ("apiVersion", "kind", "metadata"):
                obj.add_json_patch(cdk8s.JsonPatch.add(f"/{field}", value))


def _snake(meta: dict[str, Any]) -> dict[str, Any]:
    return {"".join("_" + c.lower() if c.isupper() else c for c in key): value for key, value in meta.items()}
