"""The sweep's Kubernetes objects (charts/sweep.py), rendered in-process with cdk8s (no CDK synth):
an Indexed Job of pods holding Neuron devices only while they measure, parity with the services,
schemas, pod security, placement, the payload budget, and the modules its pods run."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import cdk8s
import kubernetes_validate
import pytest
from netpol import Pod, allowed, connects, matches
from pss import violations

from charts import benchmark, benchmark_spec, code, serving_plan
from charts.network import network_policies
from charts.sweep import LAUNCHER, RUNNER, SweepChart, point_args, sweep_objects, sweep_spec, unit_pods
from charts.vllm import deployment
from config import capacity, catalog, load_config
from conftest import BUCKET
from manifests import pod_requests
from specbench import bundle, cli
from specbench.sweep import point_runner as run_sweep_points
from specbench.sweep import vllm_supervisor as sweep_vllm

Q17 = "Qwen/Qwen3-1.7B"
TWO_NODES = {"neuron_nodes.desired_size": 2, "neuron_nodes.max_size": 2}
# The issue's sweep: 2 drafts x 7 k x 3 loads (the suite's 8 classes are the reference suite's).
FULL = {
    **TWO_NODES,
    "sweep.variants": ",".join(f"q17-k{k}:{Q17}:{k}" for k in range(3, 10))
    + ","
    + ",".join(f"q06-k{k}:Qwen/Qwen3-0.6B:{k}" for k in range(3, 10)),
    "sweep.request_rates": "0.5",
    "sweep.budget_node_hours": "500",
    "budget.node_hours": "500",  # the cost guard's budget may not stop a sweep synth accepts
}
# The kubectl provider hands a chart's manifest to its Lambda: 256 KB of payload (REFERENCE.md
# section 3, aws/aws-cdk issues 19165 and 31902). Half of it leaves room for the request envelope.
PAYLOAD_BUDGET = 128 * 1024


def from_zip(root: Path, module: str, *args: str) -> list[str]:
    """The argv a pod runs ``module`` of its checked zip with (charts/code.py run_module), the zip
    written to ``root`` as the pod's fetch-code init container leaves it."""
    zipped = root / "specbench.pyz"
    if not zipped.exists():
        zipped.write_bytes(bundle.zipapp_bytes())
    argv = code.run_module(sys.executable, module, *args)
    return [str(zipped) if a == code.ZIP else a for a in argv]


def build(context: dict):
    config = load_config(context, {})
    plan = serving_plan(config, BUCKET)
    bench = benchmark_spec(config, plan)
    return config, plan, sweep_spec(config, plan, bench)


def by_kind(objects):
    return {o["kind"]: o for o in objects}


LAYOUTS = ("server-container", "sidecar")  # sweep.pod_layout


def small_sweep(layout: str):  # type: ignore[no-untyped-def]
    return build(
        {
            **TWO_NODES,
            "sweep.variants": f"q17-k5:{Q17}:5,q17-k7:{Q17}:7",
            "sweep.start_on_deploy": "true",
            "sweep.pod_layout": layout,
        }
    )


@pytest.fixture(scope="module", params=LAYOUTS)
def small(request):
    """The same small sweep in each pod layout (sweep.pod_layout)."""
    return small_sweep(request.param)


def server_of(pod: dict) -> dict:
    """The vLLM container of a sweep pod, wherever its layout puts it."""
    (server,) = [c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == "vllm"]
    return server


def client_of(pod: dict) -> dict:
    (client,) = [c for c in pod["containers"] if c["name"] == "measure"]
    return client


def test_units_are_indexes_of_one_job_with_the_capacity_as_parallelism(small):
    _, _, spec = small
    objects = by_kind(sweep_objects(spec))
    job, cron = objects["Job"], objects["CronJob"]
    assert job["metadata"]["name"] == objects["ConfigMap"]["metadata"]["name"]
    assert job["metadata"]["name"].startswith("specbench-sweep-") and len(job["metadata"]["name"]) == len("specbench-sweep-") + 8
    assert {k: job["spec"][k] for k in ("completionMode", "completions", "parallelism", "backoffLimitPerIndex")} == {
        "completionMode": "Indexed",
        "completions": 4,  # baseline, two variants, baseline again
        "parallelism": 2,  # the second node's two slots
        "backoffLimitPerIndex": 0,
    }
    assert cron["metadata"]["name"] == "specbench-sweep" and cron["spec"]["suspend"] is True
    assert cron["spec"]["jobTemplate"]["spec"] == job["spec"]
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "specbench"
    # Startup budget + margin, set-up, then 8 cases at c1 (8 waves of requests) and at c4 (2 waves) timing out.
    assert pod["activeDeadlineSeconds"] == (285 + 15) * 60 + 15 * 60 + 8 * (8 + 2) * 1200


def test_without_start_on_deploy_only_the_suspended_template_is_created():
    _, _, spec = build({**TWO_NODES, "sweep.variants": f"q17-k5:{Q17}:5"})
    assert [o["kind"] for o in sweep_objects(spec)] == ["ConfigMap", "Job", "CronJob"]
    assert sweep_objects(spec)[1]["metadata"]["name"].startswith("hardware-facts-")


def test_the_server_is_a_regular_container_by_default_or_a_native_sidecar(small):
    config, plan, spec = small
    pod = by_kind(sweep_objects(spec))["Job"]["spec"]["template"]["spec"]
    server, client = server_of(pod), client_of(pod)
    wait = pod["initContainers"][1]
    assert wait["name"] == "wait-for-model-cache" and "restartPolicy" not in wait
    assert server["resources"]["limits"]["aws.amazon.com/neuron"] == "8"
    assert "startupProbe" in server
    assert client["name"] == "measure" and "aws.amazon.com/neuron" not in client["resources"]["limits"]
    # The requirements, then the point runner from the zip the pod's first init container fetched
    # and checked (charts/code.py): the client fetches nothing itself.
    lines = client["command"][2].splitlines()
    assert len(lines) == 3 and "pip install" in lines[1] and lines[2] == code.run_module_line("python", RUNNER)
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in client["env"]}
    assert env["SWEEP_ID"] == {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}
    assert env["SWEEP_RESULTS"] == f"s3://{BUCKET}/results/"
    assert env["SWEEP_BUNDLE"] == run_sweep_points.BUNDLE == code.ZIP == "/code/specbench.pyz"
    assert not {benchmark.FETCH_ENV, benchmark.BUNDLE_SHA256_ENV, benchmark.CODE_KEY_ENV} & env.keys()
    fetch = pod["initContainers"][0]
    assert fetch["name"] == "fetch-code" and fetch["command"] == ["sh", "-c", code.FETCH_SCRIPT]
    assert {e["name"]: e["value"] for e in fetch["env"]}["SPECBENCH_BUNDLE_SHA256"] == hashlib.sha256(spec.benchmark.bundle).hexdigest()
    assert {"name": "tmp", "mountPath": "/tmp"} in client["volumeMounts"]
    assert {"name": "code", "mountPath": "/opt/specbench", "readOnly": True} in client["volumeMounts"]
    assert code.mount() in client["volumeMounts"] and code.mount() in server["volumeMounts"]
    assert server["command"] == code.run_module("python3", LAUNCHER) == ["python3", "-c", code.RUN_MODULE, code.ZIP, LAUNCHER]
    if config.sweep.pod_layout == "server-container":
        # Both regular containers, the server first; no native sidecar anywhere.
        assert [c["name"] for c in pod["containers"]] == ["vllm", "measure"]
        assert [c["name"] for c in pod["initContainers"]] == [
            "fetch-code",
            "wait-for-model-cache",
            "fetch-hardware-facts",
            "check-hardware-facts",
        ]
        assert "restartPolicy" not in server
        assert server["args"] == ["/opt/sweep/units.json", "--signal-dir", "/run/sweep"]
        signal = {"name": "sweep-signal", "mountPath": "/run/sweep"}
        assert signal in server["volumeMounts"] and signal in client["volumeMounts"]
        assert {"name": "sweep-signal", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}} in pod["volumes"]
        assert (env["SWEEP_SIGNAL_DIR"], env["SWEEP_SERVER_URL"]) == ("/run/sweep", "http://127.0.0.1:8000")
        assert env["SWEEP_READY_SECONDS"] == str(spec.benchmark.ready_timeout_seconds)
        assert "shareProcessNamespace" not in pod  # the signal is a file, not a process of the other container
    else:
        assert [c["name"] for c in pod["initContainers"]] == [
            "fetch-code",
            "wait-for-model-cache",
            "fetch-hardware-facts",
            "check-hardware-facts",
            "vllm",
        ]
        assert server["restartPolicy"] == "Always"
        assert server["args"] == ["/opt/sweep/units.json"] and [c["name"] for c in pod["containers"]] == ["measure"]
        assert "SWEEP_SIGNAL_DIR" not in env and all(v["name"] != "sweep-signal" for v in pod["volumes"])


def test_the_default_layout_is_the_regular_container():
    _, _, spec = build({**TWO_NODES, "sweep.variants": f"q17-k5:{Q17}:5"})
    assert spec.pod_layout == "server-container"
    with pytest.raises(ValueError, match="sweep.pod_layout='init': is not a sweep pod layout"):
        sweep_objects(dataclasses.replace(spec, pod_layout="init"))


def test_sidecar_is_the_services_container_but_for_what_the_launcher_sets(small):
    """Parity across the sweep: the sidecar is the service container; each unit's command, args and
    env are exactly those of a service Deployment with the same draft and k."""
    _, plan, spec = small
    objects = by_kind(sweep_objects(spec))
    server = server_of(objects["Job"]["spec"]["template"]["spec"])
    service = deployment(plan.services[0])["spec"]["template"]["spec"]["containers"][0]
    launcher = {"command", "args", "env", "volumeMounts", "restartPolicy"}
    assert {k: v for k, v in server.items() if k not in launcher} == {k: v for k, v in service.items() if k not in launcher}
    assert server["volumeMounts"][: len(service["volumeMounts"])] == service["volumeMounts"]
    units = json.loads(objects["ConfigMap"]["data"]["units.json"])
    assert [u["variant"]["name"] for u in units] == ["baseline", "q17-k5", "q17-k7", "baseline"]
    # The baseline units and the k = 7 unit run exactly what the two services run.
    for unit, service_spec in ((units[0], plan.services[0]), (units[3], plan.services[0]), (units[2], plan.services[1])):
        container = deployment(service_spec)["spec"]["template"]["spec"]["containers"][0]
        assert (unit["command"], unit["args"]) == (container["command"], container["args"])
        assert unit["env"] == {e["name"]: e["value"] for e in container["env"]}
    # k = 5 differs from the speculative service only in k and its compiled-artifact folder.
    k5 = json.loads(units[1]["args"][units[1]["args"].index("--speculative-config") + 1])
    assert (
        k5["num_speculative_tokens"] == 5 and units[1]["env"]["NEURON_COMPILED_ARTIFACTS"] != units[2]["env"]["NEURON_COMPILED_ARTIFACTS"]
    )


def test_units_whose_pods_would_differ_beyond_the_launcher_are_refused(small):
    _, _, spec = small
    unit = spec.units[1]
    service = dataclasses.replace(unit.service, serving=dataclasses.replace(unit.service.serving, cpu=80))
    drifted = dataclasses.replace(spec, units=(spec.units[0], dataclasses.replace(unit, service=service), *spec.units[2:]))
    with pytest.raises(ValueError, match="sweep unit q17-k5: its server pod differs from the baseline's"):
        unit_pods(drifted)
    assert len(unit_pods(spec)) == 4  # the same spec without the drift passes


def test_points_carry_their_wave_load_and_the_benchmarks_client_settings(small):
    config, _, spec = small
    units = json.loads(by_kind(sweep_objects(spec))["ConfigMap"]["data"]["units.json"])
    points = [(p["point_id"], p["wave"]) for u in units for p in u["points"]]
    assert points == [
        ("baseline-c1", 0),
        ("baseline-c4", 0),
        ("q17-k5-c1", 0),
        ("q17-k5-c4", 0),
        ("q17-k7-c1", 1),
        ("q17-k7-c4", 1),
        ("baseline-last-c1", 1),
        ("baseline-last-c4", 1),
    ]
    args = units[1]["points"][1]["args"]
    assert args[:2] == ["--endpoint", "q17-k5=http://127.0.0.1:8000"] and args[-4:] == [
        "--concurrency",
        "4",
        "--no-publish",
        "--no-progress",
    ]
    parsed = cli.parser().parse_args(["run", *args])
    b = config.benchmark
    assert (parsed.model, parsed.engine, parsed.requests, parsed.input_tokens, parsed.output_tokens, parsed.seed) == (
        config.serving.target_model,
        b.engine,
        b.requests_per_test_case,
        b.input_tokens,
        b.output_tokens,
        b.seed,
    )
    assert parsed.settings == "/opt/specbench/settings.json" and parsed.no_publish


def test_rate_points_ask_for_an_open_loop_rate():
    _, _, spec = build({**TWO_NODES, "sweep.variants": f"q17-k5:{Q17}:5", "sweep.concurrencies": "[]", "sweep.request_rates": "0.5"})
    assert point_args(spec, spec.units[0], spec.units[0].points[0][2])[-4:] == ["--request-rate", "0.5", "--no-publish", "--no-progress"]


def test_a_sweep_suite_is_shipped_and_used(tmp_path):
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"name": "two", "test_cases": [{"name": "a", "text": "a ", "prompt_class": "structured"}]}))
    _, _, spec = build({**TWO_NODES, "sweep.variants": f"q17-k5:{Q17}:5", "sweep.suite": str(suite)})
    data = by_kind(sweep_objects(spec))["ConfigMap"]["data"]
    assert json.loads(data["suite.json"])["name"] == "two" and spec.test_cases == 1
    args = point_args(spec, spec.units[0], spec.units[0].points[0][2])
    assert args.count("--suite") == 1 and args[args.index("--suite") + 1] == "/opt/sweep/suite.json"


def test_the_model_cache_fetches_the_sweeps_drafts_too():
    config, plan, _ = build({**TWO_NODES, "sweep.variants": "q06-k5:Qwen/Qwen3-0.6B:5"})
    assert plan.model_cache.models == ("Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B")
    assert serving_plan(load_config({}, {}), BUCKET).model_cache.models == ("Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B")


def test_sweep_pods_are_not_behind_any_service_and_only_on_neuron_nodes(small):
    _, plan, spec = small
    template = by_kind(sweep_objects(spec))["Job"]["spec"]["template"]
    for service in plan.services:
        selector = {k: v for k, v in service.labels().items() if k.startswith("app.kubernetes.io/")}
        assert not matches({"matchLabels": selector}, template["metadata"]["labels"])
    assert template["spec"]["schedulerName"] == "my-scheduler"
    assert template["spec"]["tolerations"][0]["key"] == "aws.amazon.com/neuron"


def test_pod_security_baseline_like_the_services_and_the_client_is_restricted(small):
    _, _, spec = small
    pod = by_kind(sweep_objects(spec))["Job"]["spec"]["template"]["spec"]
    assert violations(pod, "baseline") == []
    client_only = {**pod, "initContainers": [], "containers": [client_of(pod)]}
    client_only["volumes"] = [v for v in pod["volumes"] if "persistentVolumeClaim" not in v]
    assert violations(client_only, "restricted") == []


@pytest.mark.parametrize("version", catalog.SUPPORTED_KUBERNETES_VERSIONS)
def test_every_sweep_object_passes_strict_schema_validation(small, version):
    for obj in sweep_objects(small[2]):
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)


def test_the_issues_sweep_fits_the_kubectl_providers_payload():
    _, _, spec = build({**FULL, "sweep.start_on_deploy": "true"})
    assert len(spec.units) == 16 and sum(len(u.points) for u in spec.units) == 48 and spec.test_cases == 8
    chart = SweepChart(cdk8s.App(), "sweep", spec)
    # As the CDK puts it in the template: the manifest is a JSON string inside the resource's JSON.
    size = len(json.dumps(json.dumps(chart.to_json())))
    assert size < PAYLOAD_BUDGET, size
    print(f"\nsweep of 2 drafts x 7 k x 3 loads x 8 classes: manifest {size} bytes (budget {PAYLOAD_BUDGET})")


def test_names_change_with_the_spec():
    _, _, a = build({**TWO_NODES, "sweep.variants": f"q17-k5:{Q17}:5", "sweep.start_on_deploy": "true"})
    _, _, b = build({**TWO_NODES, "sweep.variants": f"q17-k6:{Q17}:6", "sweep.start_on_deploy": "true"})
    _, _, again = build({**TWO_NODES, "sweep.variants": f"q17-k5:{Q17}:5", "sweep.start_on_deploy": "true"})
    name = by_kind(sweep_objects(a))["Job"]["metadata"]["name"]
    assert name == by_kind(sweep_objects(again))["Job"]["metadata"]["name"] != by_kind(sweep_objects(b))["Job"]["metadata"]["name"]


def test_names_do_not_depend_on_the_buckets_token_number():
    """In the CDK app the bucket's name is a token numbered among every token made before it, so two
    apps that differ only in construct order (a resource added elsewhere, an aws-cdk-lib upgrade) give
    it two texts: the sweep's objects must keep their names, or a deploy would start the sweep again
    (two syntheses in one process gave the sweep and hardware-facts objects new names before)."""
    context = {**TWO_NODES, "sweep.variants": f"q17-k5:{Q17}:5", "sweep.start_on_deploy": "true"}

    def names(bucket: str) -> list[str]:
        config = load_config(context, {})
        plan = serving_plan(config, bucket)
        objects = sweep_objects(sweep_spec(config, plan, benchmark_spec(config, plan)))
        assert any(bucket in json.dumps(o) for o in objects)  # the name is used, only not hashed
        return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)

    first, second = names("${Token[TOKEN.812]}"), names("${Token[TOKEN.1310]}")
    assert first == second and len(first) == 4


# --- the modules the pods run ------------------------------------------------------------------------


def test_launcher_picks_its_units_server():
    units = [{"command": ["vllm"], "args": ["serve", "a"], "env": {"X": "1"}}, {"command": ["vllm"], "args": ["serve", "b"], "env": {}}]
    assert sweep_vllm.unit_command(units, 0) == (["vllm", "serve", "a"], {"X": "1"})
    assert sweep_vllm.unit_command(units, 1) == (["vllm", "serve", "b"], {})


def test_launcher_execs_the_units_command(tmp_path):
    units = tmp_path / "units.json"
    script = "import os, sys; print(os.environ['FROM_UNIT'], *sys.argv[1:])"
    units.write_text(
        json.dumps([{"variant": {"name": "v"}, "command": [sys.executable], "args": ["-c", script, "ok"], "env": {"FROM_UNIT": "u0"}}])
    )
    done = subprocess.run(
        from_zip(tmp_path, LAUNCHER, str(units)), env={"JOB_COMPLETION_INDEX": "0", "PATH": ""}, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "u0 ok"


def test_every_point_runs_even_after_a_failure_and_the_exit_code_counts_it():
    unit = {
        "points": [
            {"point_id": "v-c1", "wave": 0, "variant": {"name": "v"}, "load": {"kind": "concurrency", "value": 1}, "args": ["--x"]},
            {"point_id": "v-c4", "wave": 0, "variant": {"name": "v"}, "load": {"kind": "concurrency", "value": 4}, "args": ["--y"]},
        ]
    }
    calls = []

    def run(command):
        calls.append(command)
        return SimpleNamespace(returncode=1 if "--x" in command else 0)

    assert run_sweep_points.run_unit(unit, "sweep-a", "s3://b/results/", run=run, python="py", bundle="b.pyz") == 1
    assert len(calls) == 2
    assert calls[1][:4] == ["py", "b.pyz", "run", "--y"]
    assert calls[1][4:10] == ["--results", "s3://b/results/sweeps/sweep-a/", "--run-id", "v-c4", "--sweep-id", "sweep-a"]
    assert json.loads(calls[1][11]) == {
        "point_id": "v-c4",
        "wave": 0,
        "variant": {"name": "v"},
        "load": {"kind": "concurrency", "value": 4},
    }
    assert run_sweep_points.run_unit({"points": unit["points"][1:]}, "s", "r", run=run) == 0


def test_as_many_sweep_pods_as_the_job_runs_at_once_fit_the_free_node(small):
    """Sums the rendered pod (the sidecar's devices, CPU and memory plus the client's), not config/sweep.py's numbers."""
    config, _, spec = small
    job = by_kind(sweep_objects(spec))["Job"]
    requests = pod_requests(job["spec"]["template"]["spec"])
    assert requests["aws.amazon.com/neuron"] == 8 and requests["cpu"] == 91 and requests["memory"] == (900 + 4) * 2**30
    room = capacity.allocatable(catalog.TRAINIUM_INSTANCES[config.neuron_nodes.instance_type])
    fixed = capacity.DAEMONSET_BUDGET + capacity.MODEL_CACHE_JOB
    pods = job["spec"]["parallelism"]
    assert pods * requests["aws.amazon.com/neuron"] <= room.neuron_devices
    assert pods * requests["cpu"] * 1000 + fixed.cpu_millis <= room.cpu_millis
    assert pods * requests["memory"] + fixed.memory_mib * 2**20 <= room.memory_mib * 2**20
    # One more would not fit: the parallelism is the node's capacity, not a guess.
    assert (pods + 1) * requests["aws.amazon.com/neuron"] > room.neuron_devices


def test_sidecars_count_beside_the_containers_in_a_pods_requests():
    def c(cpu, **extra):
        return {"resources": {"requests": {"cpu": cpu}}, **extra}

    pod = {"initContainers": [c("4"), c("2", restartPolicy="Always"), c("5")], "containers": [c("1")]}
    # Init 4 alone; init 5 beside the sidecar's 2 = 7; the sidecar 2 + container 1 = 3.
    assert pod_requests(pod) == {"cpu": 7}
    assert pod_requests({"initContainers": [c("2", restartPolicy="Always")], "containers": [c("1")]}) == {"cpu": 3}


def test_nothing_reaches_a_sweep_pod_and_it_reaches_all_but_instance_metadata(small):
    """The namespace's policies (charts/network.py) cover the sweep pods: its client talks to its
    own server on localhost, so no ingress is needed; it writes to S3 and never reads IMDS."""
    _, plan, spec = small
    labels = by_kind(sweep_objects(spec))["Job"]["spec"]["template"]["metadata"]["labels"]
    policies = list(network_policies("specdecode", 8000))
    sweep = Pod("sweep", "specdecode", labels, ip="10.0.2.50")
    bench = Pod("bench", "specdecode", {"app.kubernetes.io/name": "specbench", "specdecode/endpoint-client": "true"}, ip="10.0.2.51")
    vllm = Pod("vllm", "specdecode", plan.services[0].labels(), ip="10.0.2.52")
    assert not connects(policies, bench, sweep, 8000)
    assert not connects(policies, sweep, vllm, 8000)  # not a client of the long-running services either
    assert allowed(policies, sweep, "Egress", "52.219.100.1", 443)  # S3
    assert not allowed(policies, sweep, "Egress", "169.254.169.254", 80)


def test_dist_writes_the_sweep_last(tmp_path):
    import yaml

    from charts.dist import write_dist

    config = load_config({**TWO_NODES, "sweep.variants": f"q17-k5:{Q17}:5"}, {})
    files = write_dist(config, BUCKET, tmp_path)
    assert [f.name for f in files][-2:] == ["0003-specbench.k8s.yaml", "0004-sweep.k8s.yaml"]
    objects = [o for o in yaml.safe_load_all(files[-1].read_text()) if o]
    assert [(o["kind"], o["metadata"]["name"]) for o in objects][2] == ("CronJob", "specbench-sweep")


def measure_unit(units_json: str, root: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """The client's script with the real zip application and ``units_json``'s unit 1 against an
    emulated server in place of the sidecar; its exit, output and results folder."""
    from specbench.emulator.server import EmulatorServer, default_profiles

    root.mkdir(parents=True)
    units = json.loads(units_json)
    with EmulatorServer(default_profiles(time_scale=0.1)["qwen-sd-vllm"]) as server:
        for point in units[1]["points"]:  # q17-k5: shorter, and against the emulator
            args = run_sweep_points_args(point["args"], server.url)
            point["args"] = args
        (root / "units.json").write_text(json.dumps(units))
        env = {
            "JOB_COMPLETION_INDEX": "1",
            "SWEEP_ID": "sweep-20261130",
            "SWEEP_RESULTS": str(root / "results"),
            "SWEEP_UNITS": str(root / "units.json"),
            "SWEEP_BUNDLE": str(root / "specbench.pyz"),
            "PATH": "/usr/bin:/bin",
        }
        done = subprocess.run(from_zip(root, RUNNER), env=env, capture_output=True, text=True, timeout=120)
    return done, root / "results"


@pytest.mark.long  # seconds of CPU: scheduled early (tests/conftest.py)
def test_a_pods_client_measures_its_units_points_into_the_sweeps_folder(tmp_path):
    """The client's script with the real zip application and the units.json synth wrote, against an
    emulated server in place of the sidecar: each point lands in results/sweeps/<job name>/<point id>/.
    Every pod layout's units.json is measured, each distinct one once: the layout changes where the
    server runs, not (today) what the client is given (issue 24)."""
    distinct = {by_kind(sweep_objects(small_sweep(layout)[2]))["ConfigMap"]["data"]["units.json"] for layout in LAYOUTS}
    for n, units in enumerate(sorted(distinct)):
        done, results = measure_unit(units, tmp_path / f"units-{n}")
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.splitlines()[-1] == "sweep sweep-20261130: 2 of 2 points measured"
        for point_name, wave, load in (("q17-k5-c1", 0, 1), ("q17-k5-c4", 0, 4)):
            run = json.loads((results / "sweeps" / "sweep-20261130" / point_name / "run.json").read_text())
            assert run["sweep"] == {
                "sweep_id": "sweep-20261130",
                "point_id": point_name,
                "wave": wave,
                "variant": {"name": "q17-k5", "draft_model": Q17, "k": 5, "method": "draft"},
                "load": {"kind": "concurrency", "value": load},
            }
            assert run["status"] == "completed" and run["plan"]["load"]["concurrency"] == load


def run_sweep_points_args(args: list[str], url: str) -> list[str]:
    """A point's flags made small and local: the emulator's URL, one test case, 2 requests of 20 tokens, no settings file."""
    out = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("--settings", "--output-tokens", "--requests"):
            skip = True
            continue
        out.append(arg.replace("http://127.0.0.1:8000", url) if i == 1 else arg)
    return [*out, "--test-case", "counting", "--output-tokens", "20", "--requests", "2"]


def test_every_run_stores_the_sweep_its_deployment_configured(small):
    """settings.json (run.json's plan.deployment) names the sweep and its SLOs; unchanged without one."""
    _, _, spec = small
    snapshot = json.loads(spec.benchmark.settings_json)
    assert snapshot["sweep"] == {
        "variants": [
            {"name": "q17-k5", "draft_model": Q17, "k": 5, "method": "draft"},
            {"name": "q17-k7", "draft_model": Q17, "k": 7, "method": "draft"},
        ],
        "loads": {"concurrencies": [1, 4], "request_rates": []},
        "slo": {"ttft_ms": 2000.0, "tpot_ms": 100.0},
        "class_weights": {"open-ended": 1.0, "structured": 1.0},  # the mix sweep-report's cheapest configuration is for
    }
    config = load_config({}, {})
    default = json.loads(benchmark_spec(config, serving_plan(config, BUCKET)).settings_json)
    assert set(default) == {"serving", "variants", "benchmark", "cost"}
