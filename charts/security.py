"""Pod Security: the namespace's Pod Security Admission labels and the security contexts the
serving pods share.

The namespace enforces ``baseline`` and warns and audits at ``restricted``, each pinned to the
cluster's Kubernetes version so an upgrade does not change the rules silently
(https://kubernetes.io/docs/concepts/security/pod-security-admission/). tests/test_pod_security.py
checks every container of every rendered pod against the level its namespace enforces, and lists
which pods meet ``restricted``.

What keeps the vLLM pods at ``baseline``: they run as root. Everything else of ``restricted`` they
meet (RuntimeDefault seccomp, every capability dropped, no privilege escalation). Non-root would
need, beyond what the bucket volumes already allow (see ``BUCKET_GROUP``): the Neuron device nodes
readable and writable by that uid (their mode comes from the Neuron driver's udev rule on the
node, which we have not read), a writable HOME and every cache the image writes (the Neuron
compiler's cache and work directories, vLLM's and PyTorch's caches, /tmp), none of which is
documented for the 0.9.1 image. charts/README.md, "Pod security", lists it.
"""

from __future__ import annotations

from typing import Any

from .objects import metadata

ENFORCE = "baseline"
WARN = AUDIT = "restricted"

# The group the bucket volumes belong to in every pod that mounts them. The Mountpoint CSI driver
# v2 advertises VOLUME_MOUNT_GROUP, so the kubelet hands it the pod's fsGroup in NodePublishVolume
# instead of changing ownership itself (kubernetes pkg/volume/csi/csi_mounter.go, SetUpAt), and
# the driver mounts with --gid=<fsGroup> --allow-other --dir-mode=770
# --file-mode=660 (awslabs/mountpoint-s3-csi-driver pkg/driver/node/node.go NodePublishVolume;
# docs/UPGRADING_TO_V2.md "will respect fsGroup"). The kubelet adds fsGroup to every container's
# supplementary groups, so a container reads and writes the bucket through the group, whether it
# runs as root without capabilities (vLLM) or as a plain user (the model-cache Job).
BUCKET_GROUP = 10001
# The uid of the pods that run as non-root (no passwd entry needed: HOME is set explicitly). Above
# 10000, clear of the node's own users (checkov CKV_K8S_40).
NON_ROOT_UID = 10001


def container_security(**extra: Any) -> dict[str, Any]:
    """A container's securityContext: no privilege escalation, no capabilities, plus ``extra``."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, **extra}


def non_root_pod_security() -> dict[str, Any]:
    """A pod's securityContext at Pod Security restricted: a non-root uid and group, RuntimeDefault seccomp."""
    return {"runAsNonRoot": True, "runAsUser": NON_ROOT_UID, "runAsGroup": NON_ROOT_UID, "seccompProfile": {"type": "RuntimeDefault"}}


def pod_security(run_as_non_root: bool) -> dict[str, Any]:
    """A pod's securityContext for the bucket volumes: RuntimeDefault seccomp, the bucket group, and a
    non-root uid if asked."""
    if run_as_non_root:
        return {**non_root_pod_security(), "fsGroup": BUCKET_GROUP}
    return {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": BUCKET_GROUP}


def pod_security_labels(kubernetes_version: str) -> dict[str, str]:
    version = f"v{kubernetes_version}"
    labels = {}
    for mode, level in (("enforce", ENFORCE), ("warn", WARN), ("audit", AUDIT)):
        labels[f"pod-security.kubernetes.io/{mode}"] = level
        labels[f"pod-security.kubernetes.io/{mode}-version"] = version
    return labels


def namespace(name: str, kubernetes_version: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(name, labels=pod_security_labels(kubernetes_version))}
