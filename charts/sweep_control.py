"""The staged sweep controller's identity in the cluster (issue 36; specbench/outputs/sweep_controller.py).

Its ServiceAccount may create and read Jobs in the sweep's namespace and nothing else: a Role (not
a ClusterRole: "a Role always sets permissions within a particular namespace",
kubernetes.io/docs/reference/access-authn-authz/rbac/#role-and-clusterrole) whose one rule names
the ``batch`` API group's ``jobs`` with the verbs create, get, list and watch (no update, patch or
delete: a stage is never changed or removed by the controller; no pods, no cronjobs, no secrets).
The S3 side (read and write under ``results/sweeps/`` only) is the Pod Identity role's, in stacks/.
"""

from __future__ import annotations

from typing import Any

from .objects import metadata

NAME = "specbench-sweep-control"
LABELS = {"app.kubernetes.io/name": NAME}
JOB_RULE = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch"]}


def control_rbac(namespace: str) -> tuple[dict[str, Any], ...]:
    """The ServiceAccount, its Role and the RoleBinding between them, all in ``namespace``."""
    return (
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(NAME, namespace, LABELS)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(NAME, namespace, LABELS),
            "rules": [dict(JOB_RULE)],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(NAME, namespace, LABELS),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
    )
