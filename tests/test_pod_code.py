"""No code in any ConfigMap (issue 35): every pod that runs project code gets it from the code asset,
through a ``fetch-code`` init container that checks the zip's sha256 before anything runs
(charts/code.py), and runs a module of that zip, standard library only.

- every ConfigMap of the synthesized default app, of a sweep in both pod layouts and of the
  token-reading model cache holds data only (the checker is shown to catch code, too);
- every container of those pods that runs project code either is the benchmark's own (its ``FETCH``,
  tests/test_code_asset.py) or comes after a ``fetch-code`` init container whose sha256 is the one of
  the zip the stack ships, and reads the zip read-only;
- each pod's own init container, its exact script and environment, against moto with a real AWS CLI:
  the zip lands and the pod's own command runs from it without site-packages; a wrong hash, a missing
  object or bucket, no location: one line, exit 1, no zip, so no later container starts;
- the pod modules import only the standard library (the images have none of our requirements).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from code_fetch import aws_cli, moto_server, run_consumer, run_fetch

from charts import benchmark, benchmark_spec, code, serving_plan
from charts.model_cache import model_cache_objects
from charts.sweep import sweep_objects, sweep_spec
from config import load_config
from conftest import BUCKET, HF_TOKEN_SECRET_ARN
from specbench import bundle
from templates import props, resources

# One worker for this file (its module fixtures: a moto server, the AWS CLI folder, the fetched sweep code, set up once, not in every worker; tests/conftest.py XdistGroups).
pytestmark = pytest.mark.xdist_group("pod-code")

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
REGION = "us-east-2"
SWEEP = {"neuron_nodes.desired_size": 2, "neuron_nodes.max_size": 2, "sweep.variants": "q17-k5:Qwen/Qwen3-1.7B:5"}
# A ConfigMap key naming a program file; its value is then code whatever it holds.
CODE_SUFFIXES = (".py", ".pyz", ".sh", ".zip", ".whl")


# --- objects ---------------------------------------------------------------------------------------


def synthesized(template: dict) -> list[dict]:
    """Every object of every manifest the stack applies, the data bucket's reference filled in."""
    objects = []
    for resource in resources(template, MANIFEST).values():
        manifest = props(resource)["Manifest"]
        parts = manifest["Fn::Join"][1] if isinstance(manifest, dict) else [manifest]
        objects += json.loads("".join(p if isinstance(p, str) else BUCKET for p in parts))
    return objects


def sweep(layout: str) -> tuple[dict, ...]:
    config = load_config({**SWEEP, "sweep.start_on_deploy": "true", "sweep.pod_layout": layout}, {})
    plan = serving_plan(config, BUCKET)
    return sweep_objects(sweep_spec(config, plan, benchmark_spec(config, plan)))


def token_reading_cache() -> tuple[dict, ...]:
    config = load_config({}, {})
    return model_cache_objects(dataclasses.replace(serving_plan(config, BUCKET).model_cache, hf_token_secret_arn=HF_TOKEN_SECRET_ARN))


def pods(objects) -> Iterator[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    for obj in objects:
        spec = obj.get("spec", {})
        if obj["kind"] in ("Deployment", "Job"):
            yield f"{obj['kind']}/{obj['metadata']['name']}", spec["template"]["spec"]
        elif obj["kind"] == "CronJob":
            yield f"CronJob/{obj['metadata']['name']}", spec["jobTemplate"]["spec"]["template"]["spec"]


def by_prefix(objects, prefix: str) -> dict:  # type: ignore[no-untyped-def]
    (pod,) = [p for name, p in pods(objects) if name.startswith(prefix)]
    return pod


def container(pod: dict, name: str) -> dict:
    (found,) = [c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == name]
    return found


# --- no code in a ConfigMap --------------------------------------------------------------------------


def code_in(config_map: dict) -> list[str]:
    """Why a ConfigMap carries code, one reason per key: binary data, a program file's name, or a
    value that parses as Python holding a definition or an import (JSON and requirement lists parse,
    if at all, as plain expressions; a script never gets by without one of these)."""
    found = [f"binaryData: {key}" for key in config_map.get("binaryData", {})]
    for key, value in config_map.get("data", {}).items():
        if key.endswith(CODE_SUFFIXES):
            found.append(f"{key}: a program file")
            continue
        try:
            tree = ast.parse(value)
        except (SyntaxError, ValueError):
            continue
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
        if any(isinstance(node, kinds) for node in ast.walk(tree)):
            found.append(f"{key}: Python code")
    return found


def test_the_checker_catches_code_in_a_config_map():
    """What the ConfigMaps held before issue 35, and what they hold now."""
    script = (bundle.PACKAGE_DIR / "hardware" / "facts.py").read_text()
    assert code_in({"data": {"hardware_facts.py": script}}) == ["hardware_facts.py: a program file"]
    assert code_in({"data": {"launcher": "import os\nos.execvp('vllm', ['vllm'])\n"}}) == ["launcher: Python code"]
    assert code_in({"binaryData": {"specbench.pyz": "UEsDBA=="}}) == ["binaryData: specbench.pyz"]
    data = {"settings.json": json.dumps({"a": [1, True, None]}), "requirements.txt": "aiohttp==3.9.5 \\\n  --hash=sha256:00\n"}
    assert code_in({"data": {**data, "units.json": "[]\n", "note": "def"}}) == []


@pytest.mark.parametrize("where", ["default app", "sweep server-container", "sweep sidecar"])
def test_no_config_map_carries_code(where, request):
    objects = {
        "default app": lambda: synthesized(request.getfixturevalue("platform")),
        "sweep server-container": lambda: sweep("server-container"),
        "sweep sidecar": lambda: sweep("sidecar"),
    }[where]()
    config_maps = [o for o in objects if o["kind"] == "ConfigMap"]
    # The benchmark's (requirements, settings) or the sweep's (units.json): data, not code.
    assert config_maps, where
    for config_map in config_maps:
        assert code_in(config_map) == [], config_map["metadata"]["name"]


def test_the_model_cache_chart_has_no_config_map_at_all():
    """Its only one held the fill script (model-cache-script); with or without the token reader."""
    config = load_config({}, {})
    for objects in (model_cache_objects(serving_plan(config, BUCKET).model_cache), token_reading_cache()):
        assert [o["kind"] for o in objects if o["kind"] == "ConfigMap"] == []


# --- every pod that runs project code fetches and checks it first ------------------------------------


def runs_project_code(c: dict) -> bool:
    """A Python command that names the package or its zip (the fetch itself runs no Python)."""
    text = " ".join(c.get("command", []) + c.get("args", []))
    return "python" in text and "specbench" in text


def check_pods(objects, sha256: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The pods that run project code, each checked; what a pod does wrong fails the assertion."""
    checked = []
    for name, pod in pods(objects):
        inits, containers = pod.get("initContainers", []), pod["containers"]
        runners = [c for c in [*inits, *containers] if runs_project_code(c)]
        if not runners:
            continue
        checked.append(name)
        own_fetch = [c for c in runners if {"name": benchmark.FETCH_ENV, "value": benchmark.FETCH} in c["env"]]
        if own_fetch == runners and not inits:  # the benchmark Job and its rerun template
            continue
        assert inits and inits[0]["name"] == code.FETCH_CONTAINER, f"{name}: the code is not fetched first"
        fetch = inits[0]
        assert fetch["command"] == ["sh", "-c", code.FETCH_SCRIPT], name
        assert {e["name"]: e.get("value") for e in fetch["env"]}[benchmark.BUNDLE_SHA256_ENV] == sha256, name
        for c in runners:
            assert code.mount() in c["volumeMounts"], f"{name}/{c['name']}: not the checked zip, read-only"
            assert code.ZIP in " ".join(c["command"]), f"{name}/{c['name']}"
        assert {"name": code.VOLUME, "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"], name
        # Nor does any of them run a file from a ConfigMap it mounts.
        config_maps = {v["name"] for v in pod["volumes"] if "configMap" in v}
        for c in runners:
            for mount in (m["mountPath"] for m in c["volumeMounts"] if m["name"] in config_maps):
                assert not re.search(rf"{re.escape(mount)}/\S+\.py\b", " ".join(c["command"] + c.get("args", []))), f"{name}/{c['name']}"
    return checked


def test_every_pod_of_the_default_app_runs_the_checked_code_asset(platform, cli_assembly):
    """The sha256 every pod checks is the one of the zip the stack ships as its asset."""
    (asset,) = [
        a
        for a in json.loads(cli_assembly.file("SpecDecodePlatform.assets.json").read_text())["files"].values()
        if a["source"]["path"].endswith(".pyz")
    ]
    sha256 = hashlib.sha256(cli_assembly.file(asset["source"]["path"]).read_bytes()).hexdigest()
    names = check_pods(synthesized(platform), sha256)
    assert sorted(n.split("-")[0] for n in names) == ["CronJob/specbench", "Job/model", "Job/specbench"]


@pytest.mark.parametrize("layout", ["server-container", "sidecar"])
def test_every_sweep_pod_runs_the_checked_code_asset(layout):
    sha256 = hashlib.sha256(bundle.zipapp_bytes()).hexdigest()
    names = check_pods(sweep(layout), sha256)
    assert sorted(n.split("-")[0] for n in names) == ["CronJob/specbench", "Job/hardware", "Job/specbench"]
    assert sorted(check_pods(token_reading_cache(), sha256)) == [n for n, _ in pods(token_reading_cache())]


def test_the_check_would_catch_a_pod_that_skips_the_fetch():
    objects = [dict(o) for o in sweep("server-container")]
    job = objects[-1]
    pod = job["spec"]["template"]["spec"]
    broken = {
        **job,
        "spec": {**job["spec"], "template": {**job["spec"]["template"], "spec": {**pod, "initContainers": pod["initContainers"][1:]}}},
    }
    with pytest.raises(AssertionError, match="the code is not fetched first"):
        check_pods([broken], hashlib.sha256(bundle.zipapp_bytes()).hexdigest())


# --- each pod's fetch, for real --------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto_url():
    yield from moto_server()


@pytest.fixture(scope="module")
def aws_bin(tmp_path_factory):
    return aws_cli(tmp_path_factory.mktemp("awscli"))


@pytest.fixture(scope="module")
def s3_client(moto_url):
    """One client for the module (each new one loads the S3 model again); ``_upload`` empties moto."""
    return boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        "s3", region_name=REGION, endpoint_url=moto_url
    )


def _s3(client: Any) -> Any:
    for existing in client.list_buckets()["Buckets"]:
        for obj in client.list_objects_v2(Bucket=existing["Name"]).get("Contents", []):
            client.delete_object(Bucket=existing["Name"], Key=obj["Key"])
        client.delete_bucket(Bucket=existing["Name"])
    return client


def _upload(client: Any, fetch: dict, body: bytes) -> dict[str, str]:
    env = {e["name"]: e["value"] for e in fetch["env"]}
    s3 = _s3(client)
    s3.create_bucket(Bucket=env["SPECBENCH_CODE_BUCKET"], CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket=env["SPECBENCH_CODE_BUCKET"], Key=env["SPECBENCH_CODE_KEY"], Body=body)
    return env


def _located(pod: dict, bucket: str = "code-bucket") -> dict:
    """The pod's fetch-code container with a location (the in-process charts have none: the stack and
    charts.dist fill it in)."""
    fetch = json.loads(json.dumps(pod["initContainers"][0]))
    for e in fetch["env"]:
        if e["name"] == "SPECBENCH_CODE_BUCKET":
            e["value"] = bucket
        elif e["name"] == "SPECBENCH_CODE_KEY":
            e["value"] = f"{e['value'] or 'asset'}.pyz"
    return fetch


def test_the_model_cache_job_fetches_its_asset_and_runs_the_fill_from_it(platform, cli_assembly, moto_url, s3_client, aws_bin, tmp_path):
    """The synthesized Job's own init container and fill command: the stack's asset object, then the
    fill (its --help: the Hub is out of reach) from the zip, without site-packages."""
    pod = by_prefix(synthesized(platform), "Job/model-cache-")
    fetch = pod["initContainers"][0]
    env = {e["name"]: e["value"] for e in fetch["env"]}
    (asset,) = [
        a
        for a in json.loads(cli_assembly.file("SpecDecodePlatform.assets.json").read_text())["files"].values()
        if a["source"]["path"].endswith(".pyz")
    ]
    body = cli_assembly.file(asset["source"]["path"]).read_bytes()
    assert env["SPECBENCH_CODE_BUCKET"] == f"cdk-hnb659fds-assets-123456789012-{REGION}" and env["SPECBENCH_CODE_KEY"] in json.dumps(asset)
    _upload(s3_client, fetch, body)
    fetched = run_fetch(fetch, tmp_path, moto_url, aws_bin)
    assert (fetched.returncode, fetched.stderr) == (0, "")
    assert (tmp_path / "code" / "specbench.pyz").read_bytes() == body and not list((tmp_path / "code").glob("*.part"))
    fill = container(pod, "fill")
    module_end = fill["command"].index("specbench.model_cache.fill") + 1
    ran = run_consumer({**fill, "command": [*fill["command"][:module_end], "--help"]}, tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "fill the bucket-backed model cache" in ran.stdout and "--eagle3-head" in ran.stdout


@pytest.fixture(scope="module")
def sweep_code(moto_url, s3_client, aws_bin, tmp_path_factory):
    """The sweep pods' fetch, run once: both layouts' init container is the same container (asserted:
    its script, environment and mounts), so a second run would run the same command on the same
    object. Its root holds the fetched /code; the consumers only read it."""
    pod = by_prefix(sweep("server-container"), "Job/specbench-sweep-")
    assert by_prefix(sweep("sidecar"), "Job/specbench-sweep-")["initContainers"][0] == pod["initContainers"][0]
    root = tmp_path_factory.mktemp("sweep-code")
    body = bundle.zipapp_bytes()
    fetch = _located(pod)
    _upload(s3_client, fetch, body)
    fetched = run_fetch(fetch, root, moto_url, aws_bin)
    assert (fetched.returncode, fetched.stderr) == (0, "") and (root / "code" / "specbench.pyz").read_bytes() == body
    assert [p.name for p in (root / "code").iterdir()] == ["specbench.pyz"]  # no .part left behind
    return root


@pytest.mark.parametrize("layout", ["server-container", "sidecar"])
def test_a_sweep_pod_and_its_hardware_facts_job_fetch_and_run_their_code(layout, sweep_code, tmp_path):
    """The sweep pod's fetch (``sweep_code``, one run for both layouts' identical init container),
    then its gate check (the exact command: no facts yet, so NO_FACTS) and its server's launcher
    (exec-ing a unit's command); the hardware-facts Job fetches with the sweep pod's own init
    container."""
    objects = sweep(layout)
    pod = by_prefix(objects, "Job/specbench-sweep-")
    facts = by_prefix(objects, "Job/hardware-facts-")
    assert facts["initContainers"][0] == pod["initContainers"][0]
    gate = tmp_path / "gate"
    gate.mkdir()
    check = run_consumer(container(pod, "check-hardware-facts"), sweep_code, ("/gate", str(gate)))
    assert check.returncode == 5 and check.stderr.startswith(f"hardware facts: none in {gate}"), check.stderr[-2000:]
    units, signal = tmp_path / "units.json", tmp_path / "signal"
    signal.mkdir()
    stand_in = {"variant": {"name": "v"}, "command": [sys.executable, "-c", "print('vllm stand-in')"], "args": [], "env": {}}
    units.write_text(json.dumps([stand_in]))
    server = {**container(pod, "vllm"), "env": [{"name": "JOB_COMPLETION_INDEX", "value": "0"}]}
    launched = run_consumer(
        {**server, "command": server["command"] + server["args"]},
        sweep_code,
        ("/opt/sweep/units.json", str(units)),
        ("/run/sweep", str(signal)),
    )
    assert "vllm stand-in" in launched.stdout, launched.stderr[-2000:]
    if layout == "sidecar":  # it execs the unit's command
        assert launched.returncode == 0
    else:  # it supervises the server, which exits before the client wrote done: the pod must fail
        assert launched.returncode == 1 and (signal / "server-exited").read_text() == "0\n"
        assert launched.stderr.splitlines()[-1] == "sweep server: vLLM exited with code 0 before the client was done"
    probe = container(facts, "probe")
    assert probe["command"][: probe["command"].index("collect")] == code.run_module("python3", "specbench.hardware.facts")


def test_a_wrong_hash_stops_the_pod_before_anything_runs(moto_url, s3_client, aws_bin, tmp_path):
    """Another zip under the key (tampered, or another deploy's): one line, exit 1, no zip and no
    partial file, so the consumer has nothing to run (and the kubelet starts no later container)."""
    pod = by_prefix(sweep("server-container"), "Job/specbench-sweep-")
    fetch = _located(pod)
    body = bundle.zipapp_bytes()
    env = _upload(s3_client, fetch, body + bytes(1))
    ran = run_fetch(fetch, tmp_path, moto_url, aws_bin)
    assert ran.returncode == 1 and ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    where = f"s3://{env['SPECBENCH_CODE_BUCKET']}/{env['SPECBENCH_CODE_KEY']}"
    actual, expected = hashlib.sha256(body + bytes(1)).hexdigest(), hashlib.sha256(body).hexdigest()
    assert line == f"specbench: {where} has sha256 {actual}, not {expected} (SPECBENCH_BUNDLE_SHA256): tampered or another deploy's"
    assert list((tmp_path / "code").iterdir()) == []
    gate = tmp_path / "gate"
    gate.mkdir()
    check = run_consumer(container(pod, "check-hardware-facts"), tmp_path, ("/gate", str(gate)))
    assert check.returncode != 0 and "hardware facts" not in check.stderr  # nothing of the module ran


@pytest.mark.parametrize("missing", ["object", "bucket", "location"])
def test_a_missing_object_bucket_or_location_fails_in_one_line(missing, moto_url, s3_client, aws_bin, tmp_path):
    pod = by_prefix(sweep("sidecar"), "Job/specbench-sweep-")
    fetch = _located(pod)
    env = _upload(s3_client, fetch, bundle.zipapp_bytes())
    override = {
        "object": {"SPECBENCH_CODE_KEY": "no-such-key.pyz"},
        "bucket": {"SPECBENCH_CODE_BUCKET": "no-such-bucket"},
        "location": {"SPECBENCH_CODE_BUCKET": ""},
    }[missing]
    ran = run_fetch(fetch, tmp_path, moto_url, aws_bin, override)
    assert ran.returncode == 1 and ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    if missing == "location":
        assert line.startswith("specbench: no code to fetch ") and "set SPECBENCH_CODE_BUCKET, _KEY and SPECBENCH_BUNDLE_SHA256" in line
    else:
        where = f"s3://{override.get('SPECBENCH_CODE_BUCKET', env['SPECBENCH_CODE_BUCKET'])}/{override.get('SPECBENCH_CODE_KEY', env['SPECBENCH_CODE_KEY'])}"
        assert line.startswith(f"specbench: cannot fetch the code {where} (") and "(404)" in line
        assert line.endswith("): missing or not readable by this pod's role; redeploy")
    assert list((tmp_path / "code").iterdir()) == []


# --- the pod modules: standard library only ----------------------------------------------------------


def test_the_pod_modules_import_only_the_standard_library():
    """Their import closure holds no other project module but specbench.jsonfile (the strict JSON
    writer, itself standard library only: checked below with them), and every import they can run is
    the standard library's, but the fill's huggingface_hub, which the serving image ships (imported
    only when the fill talks to the Hub)."""
    root = bundle.PACKAGE_DIR.parent
    closure = bundle.imported_closure(bundle.POD_MODULES, root)
    parents = {m.rpartition(".")[0] for m in bundle.POD_MODULES} | {bundle.PACKAGE}
    assert closure == set(bundle.POD_MODULES) | parents | {f"{bundle.PACKAGE}.jsonfile"}
    assert set(bundle.POD_MODULES) <= set(bundle.JOB_ENTRIES)
    for module in (*bundle.POD_MODULES, f"{bundle.PACKAGE}.jsonfile"):
        path = bundle.module_file(module, root)
        assert path is not None
        tree = ast.parse(path.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {
            node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module and not node.level
        }
        outside = imported - set(sys.stdlib_module_names) - {bundle.PACKAGE}
        assert outside == ({"huggingface_hub"} if module.endswith(".fill") else set()), module
