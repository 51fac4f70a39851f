"""The serving namespace and its model cache on the data bucket, through Mountpoint for S3:

- two static PersistentVolumes (and claims) on the bucket, one per prefix: ``models/`` for
  weights, ``neuron-artifacts/`` for compiled Neuron graphs. They survive pod restarts and node
  replacement, so a restart neither re-downloads the weights nor recompiles;
- a Job that copies the weights from the Hugging Face Hub into ``models/`` once (skipped when
  already complete), optionally with a token read from Secrets Manager. Its code
  (specbench/model_cache/fill.py) comes from the code asset, fetched and checked by an init container
  (charts/code.py), never from a ConfigMap.

The Mountpoint CSI driver authenticates with its own Pod Identity role (the data stack's
model-cache role), so no workload here holds bucket credentials; the Job's service account may only
get the code object (and read the token secret, when one is set: stacks/serving.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

import cdk8s
from constructs import Construct

from config import capacity, layout
from specbench.model_cache.fill import HEAD_MISMATCH

from . import code
from .network import network_policies
from .objects import add_objects, claim_volume, guaranteed, metadata, neuron_placement
from .security import container_security, namespace, pod_security
from .spec import ModelCacheSpec, model_path, settings_hash

MODELS_CLAIM = "model-weights"
ARTIFACTS_CLAIM = "neuron-artifacts"
SERVICE_ACCOUNT = "model-cache"
FILL_MODULE = "specbench.model_cache.fill"  # run from the code asset (charts/code.py)
TOKEN_DIR = "/var/run/secrets/huggingface"
# The Job runs as a plain user (no passwd entry) on a read-only root filesystem: HOME, temporary
# files and the Hugging Face cache are on the scratch emptyDir, which exists and is writable
# (huggingface_hub creates HF_HOME itself).
SCRATCH = "/scratch"
SCRATCH_ENV = ({"name": "HOME", "value": SCRATCH}, {"name": "TMPDIR", "value": SCRATCH})
# Mountpoint ignores the size; Kubernetes requires one.
NOMINAL_CAPACITY = "1Ti"
CSI_DRIVER = "s3.csi.aws.com"


def complete_marker(model_id: str) -> str:
    return f"{model_path(model_id)}/{layout.MODEL_COMPLETE_MARKER}"


def bucket_volume(spec: ModelCacheSpec, claim: str, prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A static PV on one bucket prefix, pre-bound to its claim (no StorageClass, no dynamic provisioning)."""
    pv_name = f"{spec.namespace}-{claim}"  # PVs are cluster-wide: the namespace keeps names unique
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": metadata(pv_name),
        "spec": {
            "capacity": {"storage": NOMINAL_CAPACITY},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": spec.namespace, "name": claim},
            # Whole-file writes and deletes only (Mountpoint semantics); the prefix confines the
            # mount to its part of the bucket.
            "mountOptions": ["allow-delete", "allow-overwrite", f"region {spec.region}", f"prefix {prefix}"],
            "csi": {"driver": CSI_DRIVER, "volumeHandle": pv_name, "volumeAttributes": {"bucketName": spec.bucket_name}},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(claim, spec.namespace),
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv_name,
            "resources": {"requests": {"storage": NOMINAL_CAPACITY}},
        },
    }
    return pv, pvc


# The fill's exit code for a head that cannot pair with the target (not retried).
HEAD_MISMATCH_EXIT_CODE = HEAD_MISMATCH


def head_mismatch_rule() -> dict[str, Any]:
    return {"action": "FailJob", "onExitCodes": {"containerName": "fill", "operator": "In", "values": [HEAD_MISMATCH_EXIT_CODE]}}


def fill_job(spec: ModelCacheSpec) -> dict[str, Any]:
    """The Job that fills models/. Its name carries a hash of what it does: a Job's pod template is
    immutable, so a changed model list, image or code creates a new Job (the old one is pruned; a new
    Job over a complete cache only lists the Hub's files and skips every model)."""
    sha256 = hashlib.sha256(spec.bundle).hexdigest()
    job_settings = {"image": spec.image, "models": list(spec.models), "token": spec.hf_token_secret_arn, "code": sha256}
    if spec.eagle3_heads:  # only then: the reference plan's Job keeps its name
        job_settings["eagle3_heads"] = list(spec.eagle3_heads)
    heads = [arg for head in spec.eagle3_heads for arg in ("--eagle3-head", head)]
    if spec.eagle3_heads:
        heads += ["--eagle3-target", spec.eagle3_target]
    job = capacity.MODEL_CACHE_JOB
    container: dict[str, Any] = {
        "name": "fill",
        "image": spec.image,
        "command": code.run_module("python3", FILL_MODULE, "--dest", layout.MODELS_MOUNT, "--scratch", SCRATCH, *heads, *spec.models),
        "env": [
            {"name": "HF_HUB_DISABLE_PROGRESS_BARS", "value": "1"},
            *SCRATCH_ENV,
            {"name": "HF_HOME", "value": f"{SCRATCH}/huggingface"},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        ],
        "resources": guaranteed(f"{job.cpu_millis}m", f"{job.memory_mib}Mi"),
        "securityContext": container_security(readOnlyRootFilesystem=True),
        "volumeMounts": [
            {"name": "models", "mountPath": layout.MODELS_MOUNT},
            {"name": "scratch", "mountPath": SCRATCH},
            code.mount(),
        ],
    }
    volumes: list[dict[str, Any]] = [
        claim_volume("models", MODELS_CLAIM),
        # One weight shard at a time (Qwen3-32B's are ~4 GB) on the node's root volume.
        {"name": "scratch", "emptyDir": {"sizeLimit": "64Gi"}},
        *code.volumes(),
    ]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "restartPolicy": "Never",
        # Non-root: the script only downloads and copies files (no Neuron device). The bucket
        # volume is writable through its group (security.BUCKET_GROUP).
        "securityContext": pod_security(run_as_non_root=True),
        **neuron_placement(spec.instance_type),
        # The code first: a missing or altered asset stops the pod before anything runs.
        "initContainers": [code.fetch_container(spec.aws_cli_image, spec.code_bucket, spec.code_key, sha256, spec.region)],
        "containers": [container],
        "volumes": volumes,
    }
    if spec.hf_token_secret_arn:
        # The token goes through an in-memory volume to a file huggingface_hub reads (HF_TOKEN_PATH),
        # never through a Kubernetes Secret or the pod spec.
        container["env"].append({"name": "HF_TOKEN_PATH", "value": f"{TOKEN_DIR}/token"})
        container["volumeMounts"].append({"name": "hf-token", "mountPath": TOKEN_DIR, "readOnly": True})
        volumes.append({"name": "hf-token", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
        pod_spec["initContainers"].append(
            {
                "name": "read-hf-token",
                "image": spec.aws_cli_image,
                "command": [
                    "sh",
                    "-c",
                    f'aws secretsmanager get-secret-value --secret-id "$SECRET" --query SecretString --output text > {TOKEN_DIR}/token',
                ],
                "env": [
                    {"name": "SECRET", "value": spec.hf_token_secret_arn},
                    {"name": "AWS_REGION", "value": spec.hf_token_secret_arn.split(":")[3]},
                    *SCRATCH_ENV,
                ],
                "resources": guaranteed("100m", "256Mi"),
                "securityContext": container_security(readOnlyRootFilesystem=True),
                "volumeMounts": [{"name": "hf-token", "mountPath": TOKEN_DIR}, {"name": "scratch", "mountPath": SCRATCH}],
            }
        )
    else:
        pod_spec["automountServiceAccountToken"] = False
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(f"model-cache-{settings_hash(job_settings)[:8]}", spec.namespace, {"app.kubernetes.io/name": "model-cache"}),
        # Bounded by retries, not by a deadline: a deadline would also count time spent Pending
        # while the Neuron group is scaled to zero, and a Job that failed for that stays failed.
        # A stalled download fails the pod (the Hub client's read timeout) and counts as a retry.
        "spec": {
            "backoffLimit": 4,
            # A head that cannot pair with the target fails the same way on every try: fail the Job
            # at once (the script's HEAD_MISMATCH exit code; Kubernetes "Pod failure policy", batch/v1
            # podFailurePolicy, needs restartPolicy Never).
            **({"podFailurePolicy": {"rules": [head_mismatch_rule()]}} if spec.eagle3_heads else {}),
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "model-cache"}}, "spec": pod_spec},
        },
    }


def model_cache_objects(spec: ModelCacheSpec) -> tuple[dict[str, Any], ...]:
    models_pv, models_pvc = bucket_volume(spec, MODELS_CLAIM, layout.MODELS_PREFIX)
    artifacts_pv, artifacts_pvc = bucket_volume(spec, ARTIFACTS_CLAIM, layout.ARTIFACTS_PREFIX)
    return (
        namespace(spec.namespace, spec.kubernetes_version),
        # Before any pod: no workload ever runs unprotected.
        *network_policies(spec.namespace, spec.serving_port),
        models_pv,
        models_pvc,
        artifacts_pv,
        artifacts_pvc,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(SERVICE_ACCOUNT, spec.namespace),
            "automountServiceAccountToken": False,
        },
        fill_job(spec),
    )


class ModelCacheChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, spec: ModelCacheSpec) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        self.spec = spec
        add_objects(self, model_cache_objects(spec))
