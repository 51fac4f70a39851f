"""A vLLM service on Neuron: one Deployment and one ClusterIP Service, built from a VllmServiceSpec.

The baseline and every speculative variant come from this one class with different specs.
"""

from __future__ import annotations

import math
from typing import Any

import cdk8s
from constructs import Construct

from config import layout

from .model_cache import ARTIFACTS_CLAIM, MODELS_CLAIM, complete_marker
from .objects import add_objects, claim_volume, guaranteed, metadata, neuron_placement
from .security import container_security, pod_security
from .serving_stack import service_container
from .spec import VllmServiceSpec

NEURON_DEVICE_RESOURCE = "aws.amazon.com/neuron"
PROBE_PERIOD_S = 30
# Seconds between the endpoint being removed from the Service and SIGTERM: in-flight streams finish.
PRE_STOP_SLEEP_S = 15
TERMINATION_GRACE_S = 90


def _http_probe(period: int, failures: int, timeout: int = 10) -> dict[str, Any]:
    return {
        "httpGet": {"path": layout.HEALTH_PATH, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def wait_for_models(spec: VllmServiceSpec) -> dict[str, Any]:
    """Init container: hold the pod until the model-cache Job has completed every model it needs."""
    markers = " ".join(complete_marker(m) for m in spec.models())
    script = f'for m in {markers}; do until [ -f "$m" ]; do echo "waiting for $m"; sleep 30; done; done'
    return {
        "name": "wait-for-model-cache",
        "image": spec.serving.image,
        "command": ["sh", "-c", script],
        "resources": guaranteed("100m", "256Mi"),
        "securityContext": container_security(),
        "volumeMounts": [{"name": "models", "mountPath": layout.MODELS_MOUNT, "readOnly": True}],
    }


def deployment(spec: VllmServiceSpec) -> dict[str, Any]:
    s = spec.serving
    labels = spec.labels()
    startup_failures = math.ceil(s.startup_timeout_minutes * 60 / PROBE_PERIOD_S)
    container = {
        "name": "vllm",
        # Image, command, arguments and environment of the service's stack.
        **service_container(spec),
        "ports": [{"name": "http", "containerPort": s.port, "protocol": "TCP"}],
        "resources": guaranteed(str(s.cpu), f"{s.memory_gib}Gi", **{NEURON_DEVICE_RESOURCE: str(s.neuron_devices)}),
        # A first start compiles the Neuron graphs (hours for a 32B model); later starts load them.
        "startupProbe": _http_probe(PROBE_PERIOD_S, startup_failures),
        "readinessProbe": _http_probe(10, 3),
        "livenessProbe": _http_probe(60, 3),
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRE_STOP_SLEEP_S)]}}},
        # Root (the image's user) but without any capability: the Neuron devices come from the
        # device plugin, not from privilege (Neuron's container tutorial runs Runtime 2.x with
        # `--device=/dev/neuron0` and no added capability; IPC_LOCK was for Inf1's neuron-rtd of
        # Runtime 1.x: awsdocs-neuron containers/tutorials/build-run-neuron-container), and the
        # bucket volumes are reached through their group (security.BUCKET_GROUP). Not verified
        # on a node here. Why not non-root: charts/security.py.
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "models", "mountPath": layout.MODELS_MOUNT, "readOnly": True},
            {"name": "artifacts", "mountPath": layout.ARTIFACTS_MOUNT},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "securityContext": pod_security(run_as_non_root=False),
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        **neuron_placement(s.instance_type),
        "initContainers": [wait_for_models(spec)],
        "containers": [container],
        "volumes": [
            claim_volume("models", MODELS_CLAIM, read_only=True),
            claim_volume("artifacts", ARTIFACTS_CLAIM),
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{s.shm_gib}Gi"}},
        ],
    }
    if s.scheduler_name:
        pod_spec["schedulerName"] = s.scheduler_name
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(spec.name, s.namespace, labels, annotations=_annotations(spec)),
        "spec": {
            "replicas": 1,
            # Recreate: a rolling update would need a second set of Neuron devices while the old
            # pod holds its own, and the node has none spare.
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": 3,
            "progressDeadlineSeconds": s.startup_timeout_minutes * 60 + 600,
            "selector": {"matchLabels": {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")}},
            "template": {"metadata": {"labels": labels, "annotations": _annotations(spec)}, "spec": pod_spec},
        },
    }


def service(spec: VllmServiceSpec) -> dict[str, Any]:
    labels = spec.labels()
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(spec.name, spec.serving.namespace, labels),
        "spec": {
            # ClusterIP: a LoadBalancer would leave ENIs that block VPC deletion on destroy.
            "type": "ClusterIP",
            "selector": {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")},
            "ports": [{"name": "http", "port": spec.serving.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _annotations(spec: VllmServiceSpec) -> dict[str, str]:
    annotations = {"specdecode/target-model": spec.serving.target_model, "specdecode/compiled-artifacts": spec.artifacts_dir()}
    if spec.speculative:
        annotations["specdecode/draft-model"] = spec.draft_model
        annotations["specdecode/speculator"] = spec.method.speculator
    return annotations


class VllmServiceChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, spec: VllmServiceSpec) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        self.spec = spec
        add_objects(self, (deployment(spec), service(spec)))
