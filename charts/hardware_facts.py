"""The first start's hardware check: a short Job that asks for Neuron devices exactly as the sweep
pods do, records what the node and that container see, and the gate that keeps a sweep from
starting when a fact contradicts what the project assumes.

- The Job ``hardware-facts-<hash>`` (created before the sweep Job, so the scheduler, which orders
  pending pods of equal priority by creation time, places it first): a probe container in the serving
  image, placed as ``sweep.pod_layout`` places the server (a regular container, or a native sidecar)
  and asking for the sweep pod's devices, with every capability dropped and the RuntimeDefault seccomp
  profile like the vLLM containers, runs ``specbench.hardware.facts collect`` (``neuron-ls``, the
  driver, runtime and tools versions, ``/dev/neuron*`` seen and openable, the node's device count),
  and writes the facts with their verdict to an in-memory emptyDir; an uploader in the AWS CLI image
  (non-root, read-only root) copies them to ``results/hardware-facts/<node>.json`` with the benchmark's
  Pod Identity role (it writes ``results/``), as the sweep pods write their runs.
- The gate, two init containers of every sweep pod after the model-cache wait: the AWS CLI image
  copies ``results/hardware-facts/`` (waiting up to ``GATE_WAIT_MINUTES`` for the Job), then the
  benchmark image runs ``specbench.hardware.facts check``, which prints one line per contradicting
  fact and exits ``MISMATCH`` (or ``NO_FACTS``); the sweep Job's pod failure policy turns either into
  ``FailJob``, so the sweep stops at once instead of failing hours later.

Both run that module from the code asset, fetched and checked by the pod's ``fetch-code`` init
container (charts/code.py), which the Job takes from the sweep pod it mirrors.
"""

from __future__ import annotations

from typing import Any

from config import capacity
from specbench.hardware.facts import MISMATCH, NO_FACTS  # the check's exit codes: FailJob's

from . import code
from .objects import guaranteed, metadata
from .security import NON_ROOT_UID, container_security

NAME = "hardware-facts"
LABELS = {"app.kubernetes.io/name": NAME}
PREFIX = "hardware-facts/"  # under the results prefix
MODULE = "specbench.hardware.facts"  # run from the code asset (charts/code.py)
FACTS_MOUNT = "/facts"
SCRATCH = "/scratch"
GATE_WAIT_MINUTES = 60
GATE_POLL_SECONDS = 30
FETCH, CHECK = "fetch-hardware-facts", "check-hardware-facts"
PROBE_RESOURCES = capacity.Resources(cpu_millis=500, memory_mib=512)
NODE_ENV = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def facts_uri(results_uri: str) -> str:
    return f"{results_uri.rstrip('/')}/{PREFIX}"


def expectations(devices_per_node: int, lnc: int, requested: int) -> list[str]:
    return ["--devices-per-node", str(devices_per_node), "--lnc", str(lnc), "--requested", str(requested)]


def _aws_cli(name: str, image: str, region: str, script: str, mounts: list[dict[str, Any]], env: list[dict[str, Any]]) -> dict[str, Any]:
    """An AWS CLI container as the model-cache Job's token reader runs one: non-root, read-only root,
    HOME on a scratch emptyDir, credentials from the pod's Pod Identity."""
    return {
        "name": name,
        "image": image,
        "command": ["sh", "-c", script],
        "env": [{"name": "AWS_REGION", "value": region}, {"name": "HOME", "value": SCRATCH}, *env],
        "resources": guaranteed("100m", "256Mi"),
        "securityContext": container_security(
            readOnlyRootFilesystem=True, runAsNonRoot=True, runAsUser=NON_ROOT_UID, runAsGroup=NON_ROOT_UID
        ),
        "volumeMounts": [*mounts, {"name": f"{name}-scratch", "mountPath": SCRATCH}],
    }


def facts_job(
    name: str,
    namespace: str,
    pod: dict[str, Any],
    server: dict[str, Any],
    sidecar: bool,
    aws_cli_image: str,
    region: str,
    results_uri: str,
    expect: list[str],
) -> dict[str, Any]:
    """The Job. ``pod`` is the sweep pod (its placement, scheduler, account, pod security and code
    fetch are reused); ``server`` its vLLM container (its image and Neuron device request are reused)."""
    neuron = {k: v for k, v in server["resources"]["limits"].items() if k.startswith("aws.amazon.com/")}
    layout = "sidecar" if sidecar else "server-container"
    probe: dict[str, Any] = {
        "name": "probe",
        "image": server["image"],
        "command": code.run_module(
            "python3",
            MODULE,
            "collect",
            *expect,
            "--node",
            "$(NODE_NAME)",
            "--layout",
            layout,
            "--out",
            f"{FACTS_MOUNT}/facts.json",
            *(["--then-wait"] if sidecar else []),
        ),
        "env": [NODE_ENV, *[e for e in server.get("env", []) if e["name"] == "NEURON_LOGICAL_NC_CONFIG"]],
        "resources": guaranteed(f"{PROBE_RESOURCES.cpu_millis}m", f"{PROBE_RESOURCES.memory_mib}Mi", **neuron),
        # As the vLLM containers run: the image's root user, every capability dropped, no privilege
        # escalation; the pod's RuntimeDefault seccomp profile. The question is what such a container sees.
        "securityContext": server["securityContext"],
        "volumeMounts": [{"name": "facts", "mountPath": FACTS_MOUNT}, code.mount()],
    }
    if sidecar:
        probe["restartPolicy"] = "Always"
    (fetch,) = [c for c in pod["initContainers"] if c["name"] == code.FETCH_CONTAINER]
    wait = int(GATE_WAIT_MINUTES * 60 / 2)
    upload = _aws_cli(
        "upload",
        aws_cli_image,
        region,
        f"i=0; until [ -f {FACTS_MOUNT}/facts.json ]; do i=$((i+1)); "
        f'[ $i -le {wait} ] || {{ echo "hardware facts: the probe wrote nothing" >&2; exit 1; }}; sleep 2; done; '
        f'cat {FACTS_MOUNT}/facts.json; aws s3 cp --only-show-errors {FACTS_MOUNT}/facts.json "{facts_uri(results_uri)}$NODE_NAME.json"',
        [{"name": "facts", "mountPath": FACTS_MOUNT, "readOnly": True}],
        [NODE_ENV],
    )
    spec: dict[str, Any] = {
        key: pod[key]
        for key in (
            "affinity",
            "tolerations",
            "nodeSelector",
            "schedulerName",
            "securityContext",
            "serviceAccountName",
            "priorityClassName",
        )
        if key in pod
    }
    spec.update(
        restartPolicy="Never",
        # Pending time counts: a Job that found no free devices in this time fails, and the gate says so.
        activeDeadlineSeconds=GATE_WAIT_MINUTES * 60,
        # The code first, then (sidecar layout) the probe as a native sidecar.
        initContainers=[fetch, probe] if sidecar else [fetch],
        containers=[upload] if sidecar else [probe, upload],
        volumes=[
            {"name": "facts", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            {"name": "upload-scratch", "emptyDir": {"sizeLimit": "64Mi"}},
            *code.volumes(),
        ],
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(name, namespace, LABELS),
        "spec": {"backoffLimit": 1, "template": {"metadata": {"labels": dict(LABELS)}, "spec": spec}},
    }


def gate(check_image: str, aws_cli_image: str, region: str, results_uri: str, expect: list[str]) -> list[dict[str, Any]]:
    """The sweep pod's two init containers, after its code fetch (the check runs the fetched code);
    the volumes they need are ``gate_volumes()`` and charts/code.py ``volumes()``."""
    tries = GATE_WAIT_MINUTES * 60 // GATE_POLL_SECONDS
    fetch = _aws_cli(
        FETCH,
        aws_cli_image,
        region,
        f'i=0; until aws s3 cp --only-show-errors --recursive "{facts_uri(results_uri)}" /gate/ && ls /gate/*.json >/dev/null 2>&1; '
        f"do i=$((i+1)); if [ $i -ge {tries} ]; then "
        f'echo "hardware facts: none under {facts_uri(results_uri)} after {GATE_WAIT_MINUTES} minutes: '
        'the hardware-facts Job did not run" >&2; '
        f"exit {NO_FACTS}; fi; sleep {GATE_POLL_SECONDS}; done",
        [{"name": "gate", "mountPath": "/gate"}],
        [],
    )
    check = {
        "name": CHECK,
        "image": check_image,
        "command": code.run_module("python", MODULE, "check", *expect, "/gate"),
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": guaranteed("100m", "128Mi"),
        "securityContext": container_security(
            readOnlyRootFilesystem=True, runAsNonRoot=True, runAsUser=NON_ROOT_UID, runAsGroup=NON_ROOT_UID
        ),
        "volumeMounts": [
            {"name": "gate", "mountPath": "/gate", "readOnly": True},
            code.mount(),
        ],
    }
    return [fetch, check]


def gate_volumes() -> list[dict[str, Any]]:
    return [{"name": "gate", "emptyDir": {"sizeLimit": "16Mi"}}, {"name": f"{FETCH}-scratch", "emptyDir": {"sizeLimit": "64Mi"}}]


def gate_failure_policy() -> dict[str, Any]:
    """The sweep Job's podFailurePolicy: a contradicting fact (or none at all) fails the whole Job."""
    return {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": name, "operator": "In", "values": [MISMATCH, NO_FACTS]}}
            for name in (FETCH, CHECK)
        ]
    }
