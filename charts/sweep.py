"""The sweep on the cluster: one Indexed Job whose every index is a pod that holds Neuron devices
only while it measures.

Each pod (a *unit*: the baseline or one variant) runs a vLLM server and a measuring client, which
drives every load level at ``localhost``, writes each point's run to S3 under the sweep's id, and
exits. Two layouts (``sweep.pod_layout``):

- ``server-container`` (default): the server is a regular container, the way the Neuron device
  plugin is documented to allocate devices (a container's ``resources.limits``); nothing public says
  the Neuron scheduler extension and device plugin (both closed source) allocate devices to an init
  container, and multi-container pods failed that way before (aws-neuron-sdk issue 675). Regular
  containers start together and nothing stops one when another exits, so the server runs under a
  small supervisor (specbench/sweep/vllm_supervisor.py ``--signal-dir``) and the two share an in-memory emptyDir:
  the client waits for the server's /health, measures, and writes ``done`` there whatever the outcome;
  the supervisor then stops vLLM and exits 0. With ``restartPolicy: Never`` the pod ends Succeeded
  when every container exited 0 (the client measured every point), Failed otherwise; when vLLM dies
  first the supervisor exits non-zero and writes ``server-exited``, and the client stops (kubernetes.io
  /docs/concepts/workloads/pods/pod-lifecycle/, "Pod phase").
- ``sidecar``: the server is a native sidecar (an init container with ``restartPolicy: Always``) and
  the client the main container. The client starts once the server's startup probe has passed (the
  kubelet starts the next container only then: kubernetes.io/docs/concepts/workloads/pods/
  sidecar-containers/); the kubelet stops the sidecar when the client exits ("Once all regular
  containers have completed, all init containers with restartPolicy Always will be shut down": the
  Container API's ``restartPolicy`` field). Native sidecars: on by default since Kubernetes 1.29,
  stable in 1.33; config/sweep.py checks the version. The kubelet allocates the sidecar's devices and
  keeps them for it (pkg/kubelet/cm/devicemanager ``ManagerImpl.Allocate`` does not hand a restartable
  init container's devices on: kubernetes/kubernetes PR 120461); how the Neuron scheduler extension
  handles a restartable init container's request is not documented.

Queueing is Kubernetes': ``parallelism`` is the number of units the free Neuron capacity holds
(config/sweep.py), the Job controller starts the lowest pending indexes first (kubernetes/kubernetes
pkg/controller/job/indexed_job_utils.go, ``firstPendingIndexes``), and the Neuron scheduler places
each pod. ``backoffLimitPerIndex: 0`` (stable in 1.33, kubernetes.io/blog/2025/05/13/...): a failed
unit is not retried (a retry would repeat every point) and does not stop the other indexes.

Parity: every unit's server is ``charts.vllm.deployment`` of that unit's ``VllmServiceSpec`` (the
services' code), turned into a sidecar. An Indexed Job has one pod template, so what differs per
unit (vLLM's command, arguments and environment: draft, k, compiled-artifact folder) goes to a
ConfigMap (data only: units.json, a sweep's own suite), and the server's launcher
(specbench/sweep/vllm_supervisor.py) picks its unit by ``JOB_COMPLETION_INDEX``. The launcher, the
client's point runner (specbench/sweep/point_runner.py) and the gate's check run from the code asset,
which the pod's first init container fetches and checks (charts/code.py). ``sweep_objects`` refuses
units whose pods would differ in anything else.
The compiled-artifact folder is the services' (a hash of the compile settings), so the baseline and
a variant equal to a service load the services' graphs, and a rerun compiles nothing.

``sweep.start_on_deploy`` false: only the suspended CronJob ``specbench-sweep`` (never scheduled, like
the benchmark's rerun template, charts/benchmark.py); start a sweep with
``kubectl -n <ns> create job sweep-<date> --from=cronjob/specbench-sweep`` (kubectl copies the
template's whole Job spec: kubernetes/kubectl pkg/cmd/create/create_job.go, ``createJobFromCronJob``).
Its Job's name is the sweep id.

``sweep.strategy=staged``: the chart also holds the staged sweep's controller (charts/sweep_control.py:
its ServiceAccount, Role and RoleBinding, its settings, the suspended CronJob
``specbench-sweep-control`` and, with ``sweep.start_on_deploy``, its Job ``<sweep id>-control``),
which creates each later stage's Job in the cluster.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

import cdk8s
from constructs import Construct

from config import PlatformConfig, catalog
from config.sweep import CLIENT, SERVER_CONTAINER, SIDECAR, grid_plan, scaled_service, stage_one_variants, sweep_plan
from config.sweep_decision import decision_settings
from config.variants import speculator_target
from specbench.prompts.suite import load_suite
from specbench.sweep.plan import SweepPlan
from specbench.sweep.points import Load, point_id

from . import benchmark, code, hardware_facts, sweep_control
from .objects import add_objects, guaranteed, metadata, suspended_cronjob
from .spec import MAX_SUITE_SECONDS, SETUP_SECONDS, BenchmarkSpec, ServingPlan, VllmServiceSpec, settings_hash
from .vllm import deployment, wait_for_models

NAME = "specbench-sweep"
LABELS = {"app.kubernetes.io/name": NAME}
MOUNT = "/opt/sweep"
UNITS = "units.json"
SUITE = "suite.json"
# The modules the pods run from the code asset (standard library only: the serving image and the
# benchmark image before its install have none of the requirements).
LAUNCHER = "specbench.sweep.vllm_supervisor"
RUNNER = "specbench.sweep.point_runner"
LOCALHOST = "127.0.0.1"
# Set by the Job controller on every pod of a Job since Kubernetes 1.27
# (kubernetes.io/docs/reference/labels-annotations-taints/#batchkubernetesiojob-name).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# server-container layout: the emptyDir the client and the server's supervisor signal through.
SIGNAL_VOLUME = "sweep-signal"
SIGNAL_MOUNT = "/run/sweep"


@dataclass(frozen=True)
class SweepUnitSpec:
    index: int
    service: VllmServiceSpec  # the unit's server, from the same spec code as the services
    variant: dict[str, Any]  # SweepVariant.to_dict()
    points: tuple[tuple[str, int, Load], ...]  # (point id, wave, load level)


@dataclass(frozen=True)
class SweepSpec:
    units: tuple[SweepUnitSpec, ...]
    parallelism: int
    start_on_deploy: bool
    benchmark: BenchmarkSpec  # the client: image, engine, load settings, service account, results
    test_cases: int
    suite_json: str = ""  # empty: the benchmark's suite
    plan: SweepPlan | None = None
    pod_layout: str = SERVER_CONTAINER  # config/sweep.py POD_LAYOUTS
    # What the hardware-facts gate checks (charts/hardware_facts.py): the node's Neuron devices, LNC.
    devices_per_node: int = 16
    lnc: int = 2
    aws_cli_image: str = ""
    # sweep.strategy=staged: ``units`` is the catalogue of every unit (the grid's), and the Job runs
    # these indexes of it (its completion index i runs unit stage_units[i]; the launchers read
    # SWEEP_STAGE_UNITS); `specbench sweep stage-job` sets them for a later stage. Empty: every unit.
    stage_units: tuple[int, ...] = ()
    # sweep.strategy=staged: the controller's settings.json (charts/sweep_control.py), what `sweep
    # next` decides with (config/sweep_decision.py). Empty: no controller (a grid).
    control_settings: str = ""
    # sweep.tensor_parallel_sizes: units at each other TP ask for other devices, so each TP is a Job of
    # its own (one pod template a Job); (tp, its parallelism: how many of its units fit at once).
    tp_parallelism: tuple[tuple[int, int], ...] = ()

    @property
    def namespace(self) -> str:
        return self.benchmark.namespace

    @property
    def tps(self) -> list[int]:
        """The TP groups: 0 (the services' TP, the sweep's own Job) first, then each other TP."""
        return sorted({int(u.variant.get("tp") or 0) for u in self.units} | {0})

    def group_units(self, tp: int = 0) -> tuple[int, ...]:
        """The catalogue indexes the Job of TP group ``tp`` runs (its completion index i runs the i-th):
        the stage's (staged) or every unit of the group; () for a sweep without TP groups (every unit)."""
        if self.tps == [0]:
            return self.stage_units
        mine = [u.index for u in self.units if int(u.variant.get("tp") or 0) == tp]
        return tuple(i for i in (self.stage_units or mine) if i in mine)

    def group_parallelism(self, tp: int) -> int:
        return dict(self.tp_parallelism).get(tp, self.parallelism)


def sweep_spec(config: PlatformConfig, plan: ServingPlan, bench: BenchmarkSpec) -> SweepSpec:
    """The sweep of a validated configuration whose ``sweep.variants`` is set."""
    staged = config.sweep.strategy == "staged"
    planned = grid_plan(config) if staged else sweep_plan(config)
    # The baseline unit runs as the baseline service does; variants on the speculative services' spec
    # (the same unless serving.cross_stack puts the baseline on another stack).
    baseline, shared = plan.services[0].serving, plan.services[-1].serving
    units = []
    for unit in planned.units:
        v = unit.variant
        # The one place a variant's method reaches its server: the shared spec keeps the services'
        # stack, whose container mapping (charts/serving_stack.py) builds the sidecar.
        serving = replace(shared, speculation_method=v.method) if v.draft_model else baseline
        if v.tp:  # a TP variant: its own TP (so its compile settings and artifact folder), devices, CPU and memory
            cpu, memory = scaled_service(config, v.tp)
            serving = replace(serving, tensor_parallel_size=v.tp, cpu=cpu, memory_gib=memory)
        target = speculator_target(config.serving, v.draft_model) if v.draft_model else ""
        points = tuple((point_id(v.name, load, unit.repeat), planned.wave_of(unit.index), load) for load in planned.loads)
        units.append(SweepUnitSpec(unit.index, VllmServiceSpec(v.name, serving, v.draft_model, v.k, target), v.to_dict(), points))
    own = config.sweep.suite
    suite = load_suite(own or config.benchmark.suite_file)
    suite_json = json.dumps(suite.to_dict(), indent=2, sort_keys=True) + "\n" if own else ""
    first = {v.name for v in stage_one_variants(config)} if staged else set()
    stage = tuple(u.index for u in planned.units if not u.variant.draft_model or u.variant.name in first) if staged else ()
    cases = len(suite.test_cases)
    n = config.neuron_nodes
    return SweepSpec(
        tuple(units),
        planned.slots,
        config.sweep.start_on_deploy,
        bench,
        cases,
        suite_json,
        planned,
        config.sweep.pod_layout,
        devices_per_node=catalog.TRAINIUM_INSTANCES[n.instance_type].neuron_devices,
        lnc=n.logical_nc_config,
        aws_cli_image=plan.model_cache.aws_cli_image,
        stage_units=stage,
        control_settings=sweep_control.settings_file(decision_settings(config)) if staged else "",
        tp_parallelism=tuple((tp, planned.packing.slots(tp)) for tp in sorted({u.variant.tp for u in planned.units}))
        if planned.packing
        else (),
    )


# --- the client's arguments ------------------------------------------------------------------------


def _without(args: list[str], flags: set[str]) -> list[str]:
    """``args`` without each ``--flag value`` pair whose flag is in ``flags``."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        else:
            out.append(arg)
    return out


def load_args(load: Load) -> list[str]:
    # --request-rate: the open-loop load of specbench run (issue 14, load levels).
    return ["--concurrency", str(int(load.value))] if load.kind == "concurrency" else ["--request-rate", format(load.value, "g")]


def point_args(spec: SweepSpec, unit: SweepUnitSpec, load: Load) -> list[str]:
    """``specbench run`` flags of one point: the benchmark's own (model, engine, tokens, requests,
    temperature, seed, timeouts, settings), with the unit's server on localhost as the only endpoint
    and this point's load. Results location, run id and sweep metadata: specbench/sweep/point_runner.py."""
    args = _without(benchmark.run_args(spec.benchmark), {"--endpoint", "--concurrency", "--results"})
    if spec.suite_json:
        args = [*_without(args, {"--suite"}), "--suite", f"{MOUNT}/{SUITE}"]
    url = f"http://{LOCALHOST}:{unit.service.serving.port}"
    return ["--endpoint", f"{unit.variant['name']}={url}", *args, *load_args(load), "--no-publish", "--no-progress"]


def pod_deadline_seconds(spec: SweepSpec) -> int:
    """activeDeadlineSeconds of one pod (counted from its start on a node, not while it waits for
    devices): the server's whole startup budget, then every point running into its timeouts in
    waves of its concurrency (one request at a time for an open-loop rate), as for the benchmark
    Job (charts/spec.py ``benchmark_deadline_seconds``)."""
    b = spec.benchmark
    suite = 0
    for _, _, load in spec.units[0].points:
        in_flight = int(load.value) if load.kind == "concurrency" else 1
        suite += spec.test_cases * -(-b.requests // in_flight) * b.request_timeout_seconds
    return b.ready_timeout_seconds + SETUP_SECONDS + min(suite, MAX_SUITE_SECONDS)


# --- the pod -----------------------------------------------------------------------------------------


def _parity_view(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A service pod spec without what the launcher sets per unit (and the models it waits for)."""
    view = copy.deepcopy(pod_spec)
    view.pop("initContainers", None)
    for container in view["containers"]:
        for key in ("command", "args", "env"):
            container.pop(key, None)
    return view


def unit_pods(spec: SweepSpec) -> list[dict[str, Any]]:
    """Each unit's server pod as the services build it; ValueError if they differ beyond the
    launcher's part (a per-unit resource or probe cannot live in one pod template). A TP variant's
    pod differs in its devices, CPU and memory: it is compared with the first pod of its TP group
    (each group is a Job of its own)."""
    pods = [deployment(u.service)["spec"]["template"]["spec"] for u in spec.units]
    first: dict[int, dict[str, Any]] = {}
    for unit, pod in zip(spec.units, pods, strict=True):
        tp = int(unit.variant.get("tp") or 0)
        if _parity_view(pod) != first.setdefault(tp, _parity_view(pod)):
            what = "the baseline's" if not tp else f"the first of TP {tp}'s"
            raise ValueError(f"sweep unit {unit.variant['name']}: its server pod differs from {what} beyond command, args and env")
    return pods


def tp_of(unit: SweepUnitSpec) -> int:
    return int(unit.variant.get("tp") or 0)


def units_file(spec: SweepSpec) -> str:
    """units.json: per index, the server's command, arguments and environment, and the points."""
    units = []
    for unit, pod in zip(spec.units, unit_pods(spec), strict=True):
        server = pod["containers"][0]
        if any("value" not in e for e in server["env"]):  # valueFrom cannot travel through a file
            raise ValueError(f"sweep unit {unit.variant['name']}: the server's environment must be plain values for the launcher")
        units.append(
            {
                "variant": unit.variant,
                "command": server["command"],
                "args": server["args"],
                "env": {e["name"]: e["value"] for e in server["env"]},
                "points": [
                    {"point_id": pid, "wave": wave, "variant": unit.variant, "load": load.to_dict(), "args": point_args(spec, unit, load)}
                    for pid, wave, load in unit.points
                ],
            }
        )
    # Compact: the manifest goes through the kubectl provider's Lambda payload (REFERENCE.md section 3).
    return json.dumps(units, separators=(",", ":"), sort_keys=True) + "\n"


class _AllModels:
    """What charts.vllm.wait_for_models reads of a spec, for the models of every unit."""

    def __init__(self, spec: SweepSpec) -> None:
        self.serving = spec.units[0].service.serving
        self._models = tuple(dict.fromkeys(m for u in spec.units for m in u.service.models()))

    def models(self) -> tuple[str, ...]:
        return self._models


def pod_spec(spec: SweepSpec, config_map: str, tp: int = 0) -> dict[str, Any]:
    """The pod template of TP group ``tp``'s Job (0: the sweep's own): its units' server, with that
    TP's devices, CPU and memory (charts.vllm.deployment of its spec)."""
    if spec.pod_layout not in (SERVER_CONTAINER, SIDECAR):
        raise ValueError(f"sweep.pod_layout={spec.pod_layout!r}: is not a sweep pod layout; allowed: {SERVER_CONTAINER}, {SIDECAR}")
    pods = [pod for unit, pod in zip(spec.units, unit_pods(spec), strict=True) if tp_of(unit) == tp]
    pod = copy.deepcopy(pods[0])
    server = pod["containers"][0]
    # The environment every unit shares stays visible in the template; the launcher adds the rest.
    shared_env = [e for e in server["env"] if all(e in p["containers"][0]["env"] for p in pods)]
    separate = spec.pod_layout == SERVER_CONTAINER
    signal_mount = {"name": SIGNAL_VOLUME, "mountPath": SIGNAL_MOUNT}
    launcher = {
        **server,
        "command": code.run_module("python3", LAUNCHER),
        "args": [f"{MOUNT}/{UNITS}", "--signal-dir", SIGNAL_MOUNT] if separate else [f"{MOUNT}/{UNITS}"],
        "env": shared_env,
        "volumeMounts": [
            *server["volumeMounts"],
            {"name": "sweep", "mountPath": MOUNT, "readOnly": True},
            code.mount(),
            *([signal_mount] if separate else []),
        ],
    }
    if not separate:
        launcher["restartPolicy"] = "Always"  # a native sidecar
    bench_pod = benchmark.pod_template(spec.benchmark)["spec"]
    client = copy.deepcopy(bench_pod["containers"][0])
    client.pop("args", None)
    client.update(
        name="measure",
        command=[
            "sh",
            "-c",
            "\n".join(
                (
                    "set -eu",
                    benchmark.install_requirements(spec.benchmark.engine),
                    # The points run from the zip the pod's fetch-code init container checked.
                    code.run_module_line("python", RUNNER),
                )
            ),
        ],
        resources=guaranteed(f"{CLIENT.cpu_millis}m", f"{CLIENT.memory_mib}Mi"),
    )
    client["env"] += [
        {"name": "SWEEP_ID", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_NAME_LABEL}']"}}},
        {"name": "SWEEP_RESULTS", "value": spec.benchmark.results_uri},
        {"name": "SWEEP_UNITS", "value": f"{MOUNT}/{UNITS}"},
        {"name": "SWEEP_BUNDLE", "value": code.ZIP},
    ]
    # It fetches nothing itself: the fetch-code init container holds the code's location and sha256.
    fetched = {benchmark.FETCH_ENV, benchmark.CODE_BUCKET_ENV, benchmark.CODE_KEY_ENV, benchmark.BUNDLE_SHA256_ENV}
    client["env"] = [e for e in client["env"] if e["name"] not in fetched]
    # The pod may run as root (the vLLM server does, as in the services); the client never does.
    if spec.group_units(tp):  # a staged sweep's stage, or a TP group's units: completion index -> catalogue index
        stage_env = {"name": "SWEEP_STAGE_UNITS", "value": ",".join(map(str, spec.group_units(tp)))}
        launcher["env"] = [*launcher["env"], stage_env]
        client["env"].append(stage_env)
    if tp:  # the group's Job is named <sweep id>-tp<N>: its points go under the sweep's id
        client["env"].append({"name": SWEEP_ID_SUFFIX_ENV, "value": tp_suffix(tp)})
    client["securityContext"] = {**client["securityContext"], "runAsUser": benchmark.RUN_AS, "runAsGroup": benchmark.RUN_AS}
    client["volumeMounts"] += [{"name": "sweep", "mountPath": MOUNT, "readOnly": True}, code.mount()]
    volumes = [*pod["volumes"], *bench_pod["volumes"], {"name": "sweep", "configMap": {"name": config_map}}, *code.volumes()]
    if separate:
        # Both start at once: the client waits for the server's /health as long as the startup probe
        # would, and writes done on the shared in-memory volume (writable through the pod's fsGroup).
        client["env"] += [
            {"name": "SWEEP_SIGNAL_DIR", "value": SIGNAL_MOUNT},
            {"name": "SWEEP_SERVER_URL", "value": f"http://{LOCALHOST}:{spec.units[0].service.serving.port}"},
            {"name": "SWEEP_READY_SECONDS", "value": str(spec.benchmark.ready_timeout_seconds)},
        ]
        client["volumeMounts"].append(signal_mount)
        volumes.append({"name": SIGNAL_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
    gate = hardware_facts.gate(
        spec.benchmark.image, spec.aws_cli_image, spec.benchmark.region, spec.benchmark.results_uri, expectations(spec, server)
    )
    b = spec.benchmark
    fetch = code.fetch_container(spec.aws_cli_image, b.code_bucket, b.code_key, hashlib.sha256(b.bundle).hexdigest(), b.region)
    volumes += hardware_facts.gate_volumes()
    pod.update(
        # The code (a missing or altered asset stops the pod in seconds), the model cache, then the
        # hardware facts (a contradicting fact fails the Job), then the server.
        initContainers=[fetch, wait_for_models(_AllModels(spec)), *gate, *([] if separate else [launcher])],  # type: ignore[arg-type]
        containers=[launcher, client] if separate else [client],
        volumes=volumes,
        # The benchmark's service account: its Pod Identity role writes results/ (sweeps/ is under it).
        serviceAccountName=bench_pod["serviceAccountName"],
        restartPolicy="Never",
        activeDeadlineSeconds=pod_deadline_seconds(spec),
    )
    return pod


def expectations(spec: SweepSpec, server: dict[str, Any]) -> list[str]:
    """The hardware-facts check's flags: what the project assumes of a node and of a sweep pod."""
    requested = int(server["resources"]["limits"].get("aws.amazon.com/neuron", 0))
    return hardware_facts.expectations(spec.devices_per_node, spec.lnc, requested)


def facts_job(spec: SweepSpec, config_map: str) -> dict[str, Any]:
    """The hardware-facts Job of this sweep (charts/hardware_facts.py), its pod as a sweep pod's."""
    pod = pod_spec(spec, config_map)
    server = next(c for c in [*pod["initContainers"], *pod["containers"]] if c["name"] == "vllm")
    job = hardware_facts.facts_job(
        "",
        spec.namespace,
        pod,
        server,
        spec.pod_layout == SIDECAR,
        spec.aws_cli_image,
        spec.benchmark.region,
        spec.benchmark.results_uri,
        expectations(spec, server),
    )
    job["metadata"]["name"] = f"{hardware_facts.NAME}-{settings_hash(job['spec'], spec.benchmark.bucket_name, code_location(spec))[:8]}"
    return job


def code_location(spec: SweepSpec) -> tuple[str, str]:
    """The code asset's bucket and key: tokens in the CDK app, kept out of the names' hashes."""
    return spec.benchmark.code_bucket, spec.benchmark.code_key


def job_spec(spec: SweepSpec, config_map: str, tp: int = 0) -> dict[str, Any]:
    return {
        "completionMode": "Indexed",
        "completions": len(spec.group_units(tp) or spec.units),
        "parallelism": spec.group_parallelism(tp),
        "backoffLimitPerIndex": 0,
        "podFailurePolicy": hardware_facts.gate_failure_policy(),
        "ttlSecondsAfterFinished": spec.benchmark.ttl_seconds_after_finished,
        "template": {"metadata": {"labels": group_labels(tp)}, "spec": pod_spec(spec, config_map, tp)},
    }


# A TP group's objects: the CronJob specbench-sweep-tp<N>, its Jobs <sweep id>-tp<N> (stage n:
# <sweep id>-s<n>-tp<N>, specbench/outputs/stage_job.py), a label naming the TP, and the suffix the
# point runner takes off the Job's name to find the sweep id (specbench/sweep/point_runner.py).
TP_LABEL = "specbench/sweep-tp"
SWEEP_ID_SUFFIX_ENV = "SWEEP_ID_SUFFIX"


def tp_suffix(tp: int) -> str:
    return f"-tp{tp}"


def group_labels(tp: int) -> dict[str, str]:
    return {**LABELS, TP_LABEL: str(tp)} if tp else dict(LABELS)


def sweep_objects(spec: SweepSpec) -> tuple[dict[str, Any], ...]:
    """The ConfigMap, the suspended CronJob (the sweep's template) and, with start_on_deploy, its Job.

    Names carry a hash of everything the pods get (like the benchmark Job's): a Job's pod template
    is immutable, and a running sweep keeps reading its own ConfigMap."""
    files = {UNITS: units_file(spec)}  # data only: the pods' code is the code asset (charts/code.py)
    if spec.suite_json:
        files[SUITE] = spec.suite_json
    hashed = {"files": files, "job": job_spec(spec, NAME), "code": spec.benchmark.digest()}
    if spec.control_settings:  # a staged sweep's controller is renamed with it (charts/sweep_control.py)
        hashed["control"] = sweep_control.hashed(spec.benchmark, spec.control_settings)
    digest = settings_hash(hashed, spec.benchmark.bucket_name, code_location(spec))[:8]
    config_map = f"{NAME}-{digest}"
    job = job_spec(spec, config_map)
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(config_map, spec.namespace, LABELS), "data": files},
        # Before the sweep Job: its pod is queued (and placed) before the sweep's pods.
        facts_job(spec, config_map),
        suspended_cronjob(NAME, spec.namespace, LABELS, job),
    ]
    if spec.start_on_deploy:
        objects.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata(config_map, spec.namespace, LABELS), "spec": job})
    for tp in spec.tps[1:]:  # each other TP: a CronJob (and with start_on_deploy a Job) of its own pod template
        group = job_spec(spec, config_map, tp)
        objects.append(suspended_cronjob(NAME + tp_suffix(tp), spec.namespace, group_labels(tp), group))
        if spec.start_on_deploy:
            name = config_map + tp_suffix(tp)
            objects.append(
                {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata(name, spec.namespace, group_labels(tp)), "spec": group}
            )
    if spec.control_settings:  # its controller, after the sweep's Job: it waits for that Job first
        first = config_map if spec.start_on_deploy else ""
        objects += sweep_control.control_objects(spec.benchmark, spec.control_settings, digest, first)
    return tuple(objects)


class SweepChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, spec: SweepSpec) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        self.spec = spec
        add_objects(self, sweep_objects(spec))
