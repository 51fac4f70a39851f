"""The staged sweep's controller in the cluster (issue 36): ``specbench sweep control``
(specbench/outputs/sweep_controller.py) as a Job of the sweep's namespace, with an identity of its own.
Built only with ``sweep.strategy=staged`` (charts/sweep.py adds these objects to the sweep's chart).

**How it runs: one controller Job per sweep, its pod running the loop.** ``sweep control`` is not one
step per stage: each pass reads the stage documents and the Jobs again and takes the one step they call
for (decide, create the next stage's Job, or wait for it), until every decision is made, the budget
stops it or a stage fails. A final step inside each stage's Job cannot do that: a stage is an Indexed
Job of several pods, none of which knows it finishes last, and a pod cannot wait for its own Job's
``Complete`` condition. So the controller is a Job of its own that waits for a stage's Job and
loops. Kubernetes stays the queue: the controller only creates Jobs (the scheduler places a stage's
pods when Neuron capacity is free), and the Job controller restarts the controller's pod when it
fails or loses its node (``BACKOFF_LIMIT``; a node drain is not counted). A restart is safe: the
loop's state is only the stored documents and the Jobs, a stage's Job has a fixed name, and a create
of an existing name (409 AlreadyExists) counts as started, so nothing is done twice.

**Which sweep.** The controller's Job is named ``<sweep id>-control``; its pod takes the sweep id from
its own Job's name (the ``batch.kubernetes.io/job-name`` label, as the sweep's pods take theirs),
because ``kubectl create job --from`` sets nothing but the name. With ``sweep.start_on_deploy`` the
deploy creates it beside the sweep's Job; otherwise the suspended CronJob ``specbench-sweep-control``
is its template, started with the sweep (docs/sweeps.md). Exit code 2 (a Job named otherwise, or
settings it cannot decide with) fails the Job at once; any other failure (the API server or S3 out of
reach, the install, a failed stage) is retried.

**The pod**: the system node group, uid 10001, read-only root filesystem, every capability dropped,
RuntimeDefault seccomp (the ``restricted`` level), requests equal to limits. It installs the hash
lock (specbench/requirements.lock: boto3 for S3) and fetches the code asset, refused unless its
sha256 is the one the pod template records, exactly as the benchmark pod does (charts/benchmark.py
``install_requirements``, ``fetch_bundle``, ``code_env``), then runs ``sweep control`` from that zip.
It is the one pod the charts give a service account token on purpose
(``automountServiceAccountToken: true``; the benchmark, sweep and model-cache pods turn it off): it
calls the Jobs API with it (specbench/sweep/jobs_api.py).
Its egress is DNS, HTTPS and the Pod Identity agent only (charts/network.py ``sweep_control_egress``).

**Its permissions.** Its ServiceAccount may create and read Jobs in the sweep's namespace and nothing
else: a Role (not a ClusterRole: "a Role always sets permissions within a particular namespace",
kubernetes.io/docs/reference/access-authn-authz/rbac/#role-and-clusterrole) whose one rule names
the ``batch`` API group's ``jobs`` with the verbs create, get, list and watch (no update, patch or
delete: a stage is never changed or removed by the controller; no pods, no cronjobs, no secrets).
The S3 side (read and write under ``results/sweeps/``, list that prefix, get the one code object) is
its Pod Identity role's, stacks/sweep_control.py.
"""

from __future__ import annotations

import json
from typing import Any

from config import layout

from . import benchmark
from .network import SWEEP_CONTROL, SWEEP_CONTROL_LABELS
from .objects import guaranteed, metadata, suspended_cronjob
from .security import container_security, non_root_pod_security
from .spec import BenchmarkSpec, benchmark_requirements

NAME = SWEEP_CONTROL
LABELS = dict(SWEEP_CONTROL_LABELS)
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


# --- the controller's Job -------------------------------------------------------------------------

SUFFIX = "-control"  # the controller's Job: <sweep id>-control
CONTAINER = "control"
# Set by the Job controller on every pod of a Job since Kubernetes 1.27
# (kubernetes.io/docs/reference/labels-annotations-taints/#batchkubernetesiojob-name).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROL_JOB_ENV = "SWEEP_CONTROL_JOB"
# A stage runs for hours: its Job is read once a minute (``sweep control --poll-seconds``).
POLL_SECONDS = 60
# Restarts of the controller's pod (each continues where the last stopped: module docstring) for a
# node replaced, the API server or S3 briefly out of reach; a failed stage fails each restart again.
BACKOFF_LIMIT = 3
# ``sweep control``'s exit code for settings it cannot decide with (and this script's for a Job not
# named <sweep id>-control): no retry can help.
USAGE_EXIT = 2
# One Python process polling and deciding (a decision's bootstrap is a few seconds of one core);
# the install of the hash lock is the largest use of memory.
CPU, MEMORY = "500m", "512Mi"
# The settings file (``sweep control --settings``): {"sweep_decision": <config/sweep_decision.py's dict>}.
SETTINGS = benchmark.SETTINGS

# The sweep id from the Job's name; a Job named otherwise is refused in one line before anything runs.
NAME_CHECK = f"""\
set -eu
sweep_id="${{{CONTROL_JOB_ENV}%{SUFFIX}}}"
if [ -z "$sweep_id" ] || [ "$sweep_id" = "${CONTROL_JOB_ENV}" ]; then
  echo "specbench: sweep control: Job ${CONTROL_JOB_ENV} is not named <sweep id>{SUFFIX}; start it with" \\
    "kubectl create job <sweep id>{SUFFIX} --from=cronjob/{NAME}" >&2
  exit {USAGE_EXIT}
fi"""


def job_name(sweep_job: str) -> str:
    """The controller's Job of the sweep whose first Job is ``sweep_job`` (the sweep id)."""
    return f"{sweep_job}{SUFFIX}"


def script() -> str:
    """The container's script: the name check, the hashed install, the checked fetch, the loop."""
    run = (
        f'exec python {benchmark.UNPACKED} sweep control --sweep-id "$sweep_id" --results "$SWEEP_RESULTS" '
        f'--settings {benchmark.CODE_MOUNT}/{SETTINGS} --region "$AWS_REGION" --poll-seconds {POLL_SECONDS}'
    )
    return "\n".join((NAME_CHECK, benchmark.install_requirements("native"), benchmark.fetch_bundle(), run))


def settings_file(decision: dict[str, Any]) -> str:
    """settings.json of the controller: what ``sweep next`` decides with, as config/sweep_decision.py computes it."""
    # Compact: the manifest goes through the kubectl provider's Lambda payload (scripts/manifest_sizes.py).
    return json.dumps({"sweep_decision": decision}, separators=(",", ":"), sort_keys=True) + "\n"


def pod_template(spec: BenchmarkSpec, config_map: str) -> dict[str, Any]:
    container = {
        "name": CONTAINER,
        "image": spec.image,  # the benchmark's stock Python image
        "command": ["sh", "-c", script()],
        "env": [
            {"name": CONTROL_JOB_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_NAME_LABEL}']"}}},
            {"name": "SWEEP_RESULTS", "value": spec.results_uri},
            {"name": "PYTHONPATH", "value": benchmark.DEPS},
            {"name": "HOME", "value": benchmark.HOME},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},  # one log line a step, as it happens
            *benchmark.code_env(spec),
        ],
        "resources": guaranteed(CPU, MEMORY),
        "securityContext": container_security(readOnlyRootFilesystem=True, runAsNonRoot=True),
        "volumeMounts": [
            {"name": "settings", "mountPath": benchmark.CODE_MOUNT, "readOnly": True},
            {"name": "deps", "mountPath": benchmark.DEPS},
            {"name": "tmp", "mountPath": benchmark.TMP},
            {"name": "home", "mountPath": benchmark.HOME},
        ],
    }
    return {
        "metadata": {"labels": dict(LABELS)},
        "spec": {
            "serviceAccountName": NAME,
            # The only pod here with the API token: the Jobs API client reads it (jobs_api.ACCOUNT).
            "automountServiceAccountToken": True,
            "restartPolicy": "Never",
            # The system node group: no Neuron toleration, so never on a Trainium node.
            "nodeSelector": {layout.NODE_POOL_LABEL: layout.SYSTEM_POOL},
            "securityContext": non_root_pod_security(),
            "containers": [container],
            "volumes": [
                {"name": "settings", "configMap": {"name": config_map}},
                {"name": "deps", "emptyDir": {"sizeLimit": "1Gi"}},  # the hash lock's packages (tens of MB)
                {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},  # the fetched zip, pip's build directories
                {"name": "home", "emptyDir": {"sizeLimit": "64Mi"}},
            ],
        },
    }


def job_spec(spec: BenchmarkSpec, config_map: str) -> dict[str, Any]:
    """The controller's Job: retried (a restart continues), but not on exit code 2, and a pod lost to
    a drain or eviction is not counted ("Ignore" on the DisruptionTarget condition:
    kubernetes.io/docs/tasks/job/pod-failure-policy/)."""
    return {
        "backoffLimit": BACKOFF_LIMIT,
        "podFailurePolicy": {
            "rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": [USAGE_EXIT]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            ]
        },
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        "template": pod_template(spec, config_map),
    }


def config_map_data(settings_json: str) -> dict[str, str]:
    """What the controller reads: the native engine's hash lock (whatever the sweep's engine) and its settings."""
    return {benchmark.REQUIREMENTS: benchmark_requirements("native"), SETTINGS: settings_json}


def hashed(spec: BenchmarkSpec, settings_json: str) -> dict[str, Any]:
    """What the sweep's names hash of the controller (charts/sweep.py): a changed setting or pod
    renames the sweep with its controller (a Job's pod template is immutable)."""
    return {"data": config_map_data(settings_json), "job": job_spec(spec, NAME)}


def control_objects(spec: BenchmarkSpec, settings_json: str, digest: str, sweep_job: str = "") -> tuple[dict[str, Any], ...]:
    """The ServiceAccount, Role and RoleBinding, the ConfigMap ``specbench-sweep-control-<digest>``,
    the suspended CronJob ``specbench-sweep-control`` (the controller's template) and, when the
    deploy starts the sweep (``sweep_job``, its first Job's name), the controller's Job."""
    config_map = f"{NAME}-{digest}"
    job = job_spec(spec, config_map)
    objects: list[dict[str, Any]] = [
        *control_rbac(spec.namespace),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(config_map, spec.namespace, LABELS),
            "data": config_map_data(settings_json),
        },
        suspended_cronjob(NAME, spec.namespace, LABELS, job),
    ]
    if sweep_job:
        objects.append(
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata(job_name(sweep_job), spec.namespace, LABELS), "spec": job}
        )
    return tuple(objects)
