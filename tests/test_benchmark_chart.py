"""The benchmark Job and its rerun template: flags equal to the configuration, endpoints equal to the
plan's services, bounded and placed on the system nodes, strict Kubernetes schemas, and the code
bundle that reaches the pod. Rendered in-process (no CDK synth); the stack side (role, association,
ordering) is in test_benchmark_stack.py."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import subprocess
import sys
import zipfile

import kubernetes_validate
import pytest

from charts import BenchmarkSpec, benchmark_spec, serving_plan
from charts.benchmark import CODE_MOUNT, FETCH, benchmark_job, benchmark_objects, install_and_run, job_spec, rerun_cronjob, run_args
from charts.spec import MAX_SUITE_SECONDS, SETUP_SECONDS, benchmark_deadline_seconds
from config import catalog, layout, load_config
from conftest import BUCKET, ROOT, VARIANT_CONTEXT
from specbench import bundle

DEFAULT_FLAGS = [
    "--endpoint",
    "qwen-vllm=http://qwen-vllm:8000",
    "--endpoint",
    "qwen-sd-vllm=http://qwen-sd-vllm:8000",
    "--model",
    "Qwen/Qwen3-32B",
    "--engine",
    "native",
    "--input-tokens",
    "64",
    "--output-tokens",
    "600",
    "--concurrency",
    "4",
    "--requests",
    "8",
    "--temperature",
    "0.0",
    "--seed",
    "11111",
    "--request-timeout",
    "1200",
    "--ready-timeout",
    "18000",
    "--results",
    f"s3://{BUCKET}/results/",
    "--dataset-cache",
    f"s3://{BUCKET}/datasets/",  # the dataset cache: reruns read the same bytes
    "--thinking",
    "off",  # Qwen3 thinking mode, set explicitly
    "--namespace",
    "Qwen/LLMPerf",
    "--region",
    "us-east-2",
    "--settings",
    "/opt/specbench/settings.json",
]
CUSTOM_SUITE = {
    "name": "sql",
    "test_cases": [
        {"name": "select", "prompt_class": "structured", "text": "SELECT * FROM t; "},
        {"name": "poem", "prompt_class": "open-ended", "text": "Write a poem "},
    ],
}


def _spec(context: dict | None = None) -> BenchmarkSpec:
    config = load_config(context or {}, {})
    return benchmark_spec(config, serving_plan(config, BUCKET))


@pytest.fixture(scope="module")
def spec(config, plan) -> BenchmarkSpec:
    return benchmark_spec(config, plan)


@pytest.fixture
def suite_file(tmp_path):
    path = tmp_path / "sql-suite.json"
    path.write_text(json.dumps(CUSTOM_SUITE))
    return path


def _flag(args: list[str], flag: str) -> list[str]:
    return [value for name, value in zip(args, args[1:], strict=False) if name == flag]


def _container(obj: dict) -> dict:
    pod = obj["spec"]["jobTemplate"]["spec"]["template"] if obj["kind"] == "CronJob" else obj["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    return container


def _by_kind(objects) -> dict[str, dict]:
    return {o["kind"]: o for o in objects}


# --- Kubernetes schemas ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", catalog.SUPPORTED_KUBERNETES_VERSIONS)
def test_every_benchmark_object_passes_strict_schema_validation(spec, suite_file, version):
    variants = (
        spec,
        _spec({"benchmark.suite_file": str(suite_file), "benchmark.engine": "llmperf"}),
        dataclasses.replace(spec, run_on_deploy=False),
    )
    for variant in variants:
        for obj in benchmark_objects(variant):
            kubernetes_validate.validate(obj, f"{version}.0", strict=True)


def test_schema_validation_rejects_a_misspelt_job_field(spec):
    broken = benchmark_job(spec)
    broken["spec"]["activeDeadline"] = broken["spec"].pop("activeDeadlineSeconds")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.35.0", strict=True)


# --- the command ----------------------------------------------------------------------------------


def test_defaults_give_the_reference_run_flags(spec):
    container = _container(benchmark_job(spec))
    script = install_and_run("native")
    assert container["command"] == ["sh", "-c", script, "specbench"]
    assert container["args"] == DEFAULT_FLAGS
    assert "--no-progress" not in container["args"] and "--suite" not in container["args"]
    assert "pip install --no-cache-dir" in script and "--require-hashes --target /deps -r /opt/specbench/requirements.txt" in script
    # The pinned, hashed install first (it brings boto3), then the zip is fetched from S3 to the
    # writable /tmp (checked against the sha256 in the environment); then it runs from there.
    lines = script.splitlines()
    assert "pip install" in lines[1] and len(lines) == 4
    assert lines[2] == (
        'python -c "$SPECBENCH_FETCH" "$SPECBENCH_CODE_BUCKET" "$SPECBENCH_CODE_KEY" "$AWS_REGION" "$SPECBENCH_BUNDLE_SHA256" /tmp/specbench.pyz'
    )
    assert lines[-1] == 'exec python /tmp/specbench.pyz run "$@"'
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PYTHONPATH"] == "/deps" and env["HOME"] == "/home/specbench"
    assert env["SPECBENCH_BUNDLE_SHA256"] == hashlib.sha256(bundle.zipapp_bytes()).hexdigest()
    assert env["SPECBENCH_FETCH"] == FETCH and env["AWS_REGION"] == spec.region
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


@pytest.mark.parametrize(
    "key, value, flag, expected",
    [
        ("benchmark.engine", "llmperf", "--engine", "llmperf"),
        ("benchmark.input_tokens", "128", "--input-tokens", "128"),
        ("benchmark.output_tokens", "300", "--output-tokens", "300"),
        ("benchmark.concurrent_requests", "2", "--concurrency", "2"),
        ("benchmark.requests_per_test_case", "16", "--requests", "16"),
        ("benchmark.temperature", "0.7", "--temperature", "0.7"),
        ("benchmark.seed", "7", "--seed", "7"),
        ("benchmark.request_timeout_seconds", "600", "--request-timeout", "600"),
        ("benchmark.max_consecutive_failures", "3", "--max-consecutive-failures", "3"),  # absent by default: the CLI's default
        ("benchmark.metrics_namespace", "Team/SpecDecode", "--namespace", "Team/SpecDecode"),
        ("serving.startup_timeout_minutes", "45", "--ready-timeout", str((45 + 15) * 60)),
        ("serving.target_model", "Qwen/Qwen3-14B", "--model", "Qwen/Qwen3-14B"),
        ("env.region", "us-west-2", "--region", "us-west-2"),
        ("serving.speculative_service", "qwen-sd", "--endpoint", "qwen-sd=http://qwen-sd:8000"),
    ],
)
def test_a_changed_setting_changes_its_flag_and_the_job(spec, key, value, flag, expected):
    changed = _spec({key: value})
    assert expected in _flag(run_args(changed), flag)
    assert expected not in _flag(run_args(spec), flag)
    assert benchmark_job(changed)["metadata"]["name"] != benchmark_job(spec)["metadata"]["name"]


def test_a_custom_suite_reaches_the_pod_as_suite_json(spec, suite_file):
    custom = _spec({"benchmark.suite_file": str(suite_file)})
    assert _flag(run_args(custom), "--suite") == [f"{CODE_MOUNT}/suite.json"]
    config_map = _by_kind(benchmark_objects(custom))["ConfigMap"]
    assert json.loads(config_map["data"]["suite.json"]) == CUSTOM_SUITE
    assert "suite.json" not in _by_kind(benchmark_objects(spec))["ConfigMap"]["data"]
    assert json.loads(config_map["data"]["settings.json"])["benchmark"]["test_cases"] == ["select", "poem"]
    # Two test cases instead of eight: a shorter deadline, and a new Job.
    assert custom.active_deadline_seconds < spec.active_deadline_seconds
    assert custom.digest() != spec.digest()


def test_endpoints_are_every_service_of_the_plan_baseline_first():
    context = {k: v for k, v in VARIANT_CONTEXT.items() if k.startswith(("serving.extra", "serving.stack", "neuron_nodes.max"))}
    config = load_config(context, {})
    plan = serving_plan(config, BUCKET)
    extra = benchmark_spec(config, plan)
    assert _flag(run_args(extra), "--endpoint") == [f"{s.name}=http://{s.name}:{layout.SERVING_PORT}" for s in plan.services]
    assert [s.name for s in plan.services] == ["qwen-vllm", "qwen-sd-vllm", "qwen-sd-k4"]
    settings = json.loads(extra.settings_json)
    assert [(v["name"], v["draft_model"], v["num_speculative_tokens"], v["method"]) for v in settings["variants"]] == [
        ("qwen-vllm", "", 0, "none"),
        ("qwen-sd-vllm", "RedHatAI/Qwen3-32B-speculator.eagle3", 7, "eagle3"),
        ("qwen-sd-k4", "thoughtworks/Qwen3-32B-Eagle3", 4, "eagle3"),
    ]


def test_flags_are_accepted_by_the_specbench_command_line(spec, suite_file):
    """The contract with ``specbench run``: every flag the Job passes parses, with its value."""
    if not (ROOT / "specbench" / "cli.py").exists():
        pytest.skip("specbench/cli.py is not written yet")
    from specbench import cli

    for variant in (spec, _spec({"benchmark.suite_file": str(suite_file), "benchmark.engine": "llmperf"})):
        args = cli.parser().parse_args(["run", *run_args(variant)])
        assert [(e.name, e.url) for e in args.endpoint] == list(variant.endpoints)
        assert (args.engine, args.model, args.concurrency, args.requests) == (
            variant.engine,
            variant.model,
            [variant.concurrency],  # --concurrency repeats for load levels; the Job passes one
            variant.requests,
        )
        assert (args.results, args.namespace, args.region, args.no_progress) == (
            variant.results_uri,
            variant.metrics_namespace,
            variant.region,
            False,
        )


# --- bounds and placement -------------------------------------------------------------------------


def test_job_is_bounded_by_retries_deadline_and_ttl(spec):
    job = benchmark_job(spec)["spec"]
    assert job["backoffLimit"] == 0 and job["template"]["spec"]["restartPolicy"] == "Never"
    assert job["ttlSecondsAfterFinished"] == 24 * 3600
    # Ready: the 285-minute startup budget + 15 minutes; suite: 8 cases x 2 services x 2 waves x 1200 s.
    assert spec.ready_timeout_seconds == 300 * 60
    assert job["activeDeadlineSeconds"] == 300 * 60 + SETUP_SECONDS + 8 * 2 * 2 * 1200 == 57300


def test_deadline_formula_counts_waves_and_is_capped():
    assert benchmark_deadline_seconds(100, 1, 2, 5, 4, 10) == 100 + SETUP_SECONDS + 1 * 2 * 2 * 10
    assert benchmark_deadline_seconds(100, 8, 2, 100000, 1, 1200) == 100 + SETUP_SECONDS + MAX_SUITE_SECONDS
    assert _spec({"benchmark.requests_per_test_case": "16"}).active_deadline_seconds > _spec().active_deadline_seconds


def test_pod_runs_on_system_nodes_without_neuron_resources_and_locked_down(spec):
    pod = benchmark_job(spec)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {layout.NODE_POOL_LABEL: layout.SYSTEM_POOL}
    assert "tolerations" not in pod and "affinity" not in pod and "schedulerName" not in pod
    (container,) = pod["containers"]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"cpu": "1", "memory": "4Gi"}}
    assert _spec({"benchmark.cpu": "2", "benchmark.memory_gib": "6"}).cpu == 2
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for path in ("/deps", "/tmp", "/home/specbench"):
        assert "emptyDir" in volumes[mounts[path]], path
    assert volumes[mounts[CODE_MOUNT]] == {"name": "code", "configMap": {"name": "specbench"}}
    assert pod["serviceAccountName"] == "specbench" and pod["automountServiceAccountToken"] is False


def test_job_and_rerun_template_share_one_pod_template(spec):
    assert benchmark_job(spec)["spec"] == rerun_cronjob(spec)["spec"]["jobTemplate"]["spec"] == job_spec(spec)
    cron = rerun_cronjob(spec)
    assert cron["metadata"]["name"] == "specbench" and cron["spec"]["suspend"] is True


def test_run_on_deploy_false_leaves_only_the_rerun_template(spec):
    kinds = [o["kind"] for o in benchmark_objects(_spec({"benchmark.run_on_deploy": "false"}))]
    assert kinds == ["ServiceAccount", "ConfigMap", "CronJob"]
    assert [o["kind"] for o in benchmark_objects(spec)] == ["ServiceAccount", "ConfigMap", "CronJob", "Job"]


def test_docs_document_the_rerun_command_and_the_cli():
    benchmark = (ROOT / "docs" / "benchmark.md").read_text()
    assert "kubectl -n specdecode create job specbench-rerun-$(date +%s) --from=cronjob/specbench" in benchmark
    assert (ROOT / "docs" / "cli.md").read_text().startswith("# The specbench CLI\n")


# --- Job name -------------------------------------------------------------------------------------


def test_job_name_is_a_stable_hash_of_the_spec_without_the_bucket(spec):
    name = benchmark_job(spec)["metadata"]["name"]
    assert name == f"specbench-{spec.digest()}" and len(spec.digest()) == 8
    assert benchmark_job(_spec())["metadata"]["name"] == name
    assert dataclasses.replace(spec, bucket_name="${Token[TOKEN.123]}").digest() == spec.digest()
    assert dataclasses.replace(spec, bundle=spec.bundle + b"x").digest() != spec.digest()
    # Named by a hash of the zip the pod runs (the blob is a function of it).
    assert spec.bundle == bundle.zipapp_bytes() and dataclasses.replace(spec, bundle=bytes(spec.bundle)).digest() == spec.digest()
    assert dataclasses.replace(spec, requirements=spec.requirements + "x\n").digest() != spec.digest()


# --- what the pod gets ----------------------------------------------------------------------------


def test_config_map_carries_the_requirements_and_settings_and_no_code(spec):
    config_map = _by_kind(benchmark_objects(spec))["ConfigMap"]
    assert "binaryData" not in config_map and set(config_map["data"]) == {"requirements.txt", "settings.json"}
    assert config_map["data"]["requirements.txt"] == (ROOT / "specbench" / "requirements.lock").read_text()


# --- the bundle -----------------------------------------------------------------------------------


def test_bundle_is_byte_stable_and_sorted():
    first, second = bundle.zipapp_bytes(), bundle.zipapp_bytes()
    assert first == second
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        infos = archive.infolist()
        names = [i.filename for i in infos]
        assert names == sorted(names) and names[0] == "__main__.py"
        assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
        assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
        # What the commands the pods run (`run`, `publish`, `sweep control`) import, and the built-in
        # suites; not a laptop's commands (`emulate`, `report`, `sweep next`, ...: the emulator, the
        # report and its charts, config/) nor the aggregation Lambda's modules.
        assert names[1:] == [f"specbench/{name}" for name in JOB_FILES]
        source = (ROOT / "specbench" / "prompts" / "suite.py").read_bytes()
        assert archive.read("specbench/prompts/suite.py") == source  # as in the repository: a pod's traceback quotes its lines
        suite = ROOT / "specbench" / "prompts" / "suites" / "reference.json"
        assert archive.read("specbench/prompts/suites/reference.json") == suite.read_bytes()


def test_the_job_zip_holds_every_module_as_it_is_in_the_repository():
    with zipfile.ZipFile(io.BytesIO(bundle.zipapp_bytes())) as archive:
        modules = [name for name in archive.namelist() if name.startswith("specbench/") and name.endswith(".py")]
        assert modules and all(archive.read(name) == (ROOT / name).read_bytes() for name in modules)


JOB_FILES = (
    "__init__.py",
    "__main__.py",
    "analysis/__init__.py",
    "analysis/acceptance.py",
    "analysis/cost.py",  # run.json defines busy; run and publish: tokens/s per node and cost per million tokens
    "analysis/loads.py",  # the run's printout: each load per server and per node
    "analysis/prices.py",  # the bounds of the price and servers per node a run's settings and flags give
    "analysis/stats.py",  # stream_acceptance's pooled figures
    "analysis/stream_acceptance.py",  # publish: StreamAcceptanceLength where the self-check passed
    "analysis/sweep.py",  # sweep control: the stored points' analysis
    "analysis/sweep_mix.py",  # sweep control: the cheapest configuration for the traffic mix
    "analysis/theory.py",
    "aws_retry.py",
    "cli.py",  # the dispatcher: imports a command's module only when it is chosen
    "commands/__init__.py",
    "commands/common.py",
    "commands/publish.py",
    "commands/run.py",
    "commands/sweep.py",  # `sweep control`; `sweep next` and `sweep stage-job` (commands/sweep_next.py) are a laptop's
    "flags.py",  # the command line's strict values
    "hardware/__init__.py",
    "hardware/facts.py",  # the hardware-facts Job's probe and the sweep pods' gate check (bundle.POD_MODULES)
    "jsonfile.py",
    "load/__init__.py",
    "load/endpoints.py",
    "load/llmperf_actor.py",
    "load/llmperf_engine.py",
    "load/native.py",
    "load/types.py",
    # The other pods' modules (bundle.POD_MODULES), run from this zip by charts/code.py run_module.
    "model_cache/__init__.py",
    "model_cache/fill.py",  # the model-cache Job's fill
    "names.py",  # the one safe-name rule (run ids, endpoints, test cases)
    "outputs/__init__.py",
    "outputs/cloudwatch.py",
    "outputs/deployment_state.py",  # run: the services' state metrics for the dashboard's deployment row
    "outputs/publish.py",
    "outputs/readiness.py",  # run: publishes the readiness wait's service states
    "outputs/stage_job.py",  # sweep control: the next stage's Job
    "outputs/sweep_controller.py",  # sweep control: the staged sweep's loop in the cluster
    "outputs/sweep_next.py",
    "outputs/sweep_report.py",  # sweep control reads the points with load_sweep_folders (not its matplotlib chart)
    "prompts/__init__.py",
    "prompts/datasets.py",
    "prompts/fixtures/classes.jsonl",  # the offline fixtures: the suite that names them runs from the zip
    "prompts/suite.py",
    "prompts/suites/classes-offline.json",
    "prompts/suites/classes.json",
    "prompts/suites/reference.json",
    "prompts/suites/rehearsal.json",  # the rehearsal profile's short suite (benchmark.suite_file=builtin:rehearsal)
    "results/__init__.py",
    "results/llmperf_format.py",
    "results/records.py",
    "results/roles.py",  # run --role: what each endpoint serves, recorded in run.json
    "results/runfiles.py",
    "results/store.py",
    "results/validity.py",
    "runner.py",
    # `run --sweep-id --sweep-point` (a sweep point's metadata) and `sweep control` (the staged sweep's controller).
    "sweep/__init__.py",
    "sweep/checked.py",
    "sweep/evidence.py",
    "sweep/jobs_api.py",
    "sweep/pinning.py",
    "sweep/plan.py",
    "sweep/point_runner.py",  # a sweep pod's client
    "sweep/points.py",
    "sweep/staged.py",
    "sweep/vllm_supervisor.py",  # a sweep pod's server launcher
)


def test_every_module_of_the_bundle_imports_from_the_zip(tmp_path):
    """What the walk of the imports found is enough: each module loads from the zip (its lazy
    imports are in the zip too: the walk follows them, tests/test_structure.py tests the walk)."""
    target = tmp_path / "specbench.pyz"
    target.write_bytes(bundle.zipapp_bytes())  # the zip as the pod fetches it
    modules = [n.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for n in bundle.sources() if n.endswith(".py")]
    # llmperf_actor needs ray and llmperf (the llmperf engine's own environment); __main__ runs the CLI.
    modules = [m for m in modules if not m.endswith(("llmperf_actor", "__main__"))]
    code = f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}]; "
    code += "assert all(m.__file__.startswith(sys.argv[1]) for n, m in sys.modules.items() if n.startswith('specbench') and getattr(m, '__file__', None)), 'not from the zip'"
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, "-c", code, str(target)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_bundle_imports_from_the_zip_alone(tmp_path):
    """The package works from the zip, away from the source tree (no cli needed for this)."""
    target = tmp_path / "specbench.pyz"
    target.write_bytes(bundle.zipapp_bytes())  # the zip as the pod fetches it
    code = (
        "import specbench.prompts.suite as s; print(s.__file__, len(s.DEFAULT_SUITE.test_cases), "
        "len(s.load_suite('builtin:classes-offline').materialize().test_cases[0].items))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {code}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(str(target)) and result.stdout.split()[-2:] == ["8", "3"]


def test_bundle_runs_as_a_zip_application(tmp_path):
    target = tmp_path / "specbench.pyz"
    target.write_bytes(bundle.zipapp_bytes())  # the zip as the pod fetches it
    # Not isolated (-I): the benchmark's requirements come from this environment, as from /deps in the pod.
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, str(target), "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "run" in result.stdout
    result = subprocess.run(
        [sys.executable, str(target), "run", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    for flag in {a for a in DEFAULT_FLAGS if a.startswith("--")} | {"--suite"}:
        assert flag in result.stdout, flag


def test_the_suite_module_needs_only_the_standard_library():
    """config/ validates suite files with specbench.prompts.suite, and the CDK app's environment does not
    install the benchmark's requirements (aiohttp, prometheus-client, tqdm)."""
    code = (
        "import sys, specbench.prompts.suite, specbench.bundle; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'aiohttp', 'prometheus_client', 'tqdm', 'boto3', 'botocore'}))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout.strip()) == (0, "[]"), result.stderr
