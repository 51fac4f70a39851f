"""The pods' code as an S3 asset (charts/benchmark.py FETCH, stacks/benchmark.py code_asset): the
pod's exact fetch-and-check step against moto, and manifests whose size does not depend on the code."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import boto3
import pytest
from code_fetch import moto_server, run_pod

from charts.benchmark import benchmark_objects
from charts.spec import benchmark_spec, serving_plan
from charts.sweep import sweep_objects, sweep_spec
from config import load_config
from conftest import BUCKET
from scripts import manifest_sizes
from specbench import bundle

# One worker for this file (its module fixtures: a moto server and its client, set up once, not in every worker; tests/conftest.py XdistGroups).
pytestmark = pytest.mark.xdist_group("code-asset")

CODE_BUCKET = "cdk-hnb659fds-assets-123456789012-us-east-2"
REGION = "us-east-2"
SWEEP_CONTEXT = {"neuron_nodes.desired_size": 2, "neuron_nodes.max_size": 2, "sweep.variants": "q17-k5:Qwen/Qwen3-1.7B:5"}


@pytest.fixture(scope="module")
def moto_url():
    yield from moto_server()


@pytest.fixture(scope="module")
def spec():
    config = load_config({}, {})
    bench = benchmark_spec(config, serving_plan(config, BUCKET))
    key = f"{hashlib.sha256(bench.bundle).hexdigest()}.pyz"
    return dataclasses.replace(bench, code_bucket=CODE_BUCKET, code_key=key)


@pytest.fixture(scope="module")
def s3_client(moto_url):
    """One client for the module (each new one loads the S3 model again); ``s3`` empties moto."""
    return boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        "s3", region_name=REGION, endpoint_url=moto_url
    )


@pytest.fixture
def s3(s3_client):
    client = s3_client
    for existing in client.list_buckets()["Buckets"]:
        for obj in client.list_objects_v2(Bucket=existing["Name"]).get("Contents", []):
            client.delete_object(Bucket=existing["Name"], Key=obj["Key"])
        client.delete_bucket(Bucket=existing["Name"])
    client.create_bucket(Bucket=CODE_BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    return client


def _job_container(spec):
    (job,) = [o for o in benchmark_objects(spec) if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


def test_the_pod_fetches_checks_and_runs_the_code_asset(spec, s3, moto_url, tmp_path):
    s3.put_object(Bucket=CODE_BUCKET, Key=spec.code_key, Body=spec.bundle)
    ran = run_pod(_job_container(spec), tmp_path, moto_url, "--help")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "--endpoint" in ran.stdout and "--results" in ran.stdout  # `specbench run --help`, from the fetched zip
    assert (tmp_path / "specbench.pyz").read_bytes() == spec.bundle


def test_a_tampered_object_is_refused_before_anything_runs(spec, s3, moto_url, tmp_path):
    s3.put_object(Bucket=CODE_BUCKET, Key=spec.code_key, Body=spec.bundle + b"\0")
    ran = run_pod(_job_container(spec), tmp_path, moto_url, "--help")
    assert ran.returncode == 1 and ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    expected = hashlib.sha256(spec.bundle).hexdigest()
    assert line.startswith(f"specbench: s3://{CODE_BUCKET}/{spec.code_key} has sha256 ") and f"not {expected}" in line
    assert "tampered" in line and not list(tmp_path.glob("specbench.pyz*"))


@pytest.mark.parametrize(("missing", "code"), [("key", "NoSuchKey"), ("bucket", "NoSuchBucket")], ids=["missing-object", "missing-bucket"])
def test_a_missing_object_or_bucket_fails_in_one_line(spec, s3, moto_url, tmp_path, missing, code):
    env = {"SPECBENCH_CODE_BUCKET": "no-such-bucket"} if missing == "bucket" else {}
    where = f"s3://{env.get('SPECBENCH_CODE_BUCKET', CODE_BUCKET)}/{spec.code_key}"
    ran = run_pod(_job_container(spec), tmp_path, moto_url, "--help", env=env)
    assert ran.returncode == 1 and ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    assert line == f"specbench: cannot fetch the code {where} ({code}): missing or not readable by this pod's role; redeploy"


def test_a_pod_spec_without_a_code_location_says_so(spec, s3, moto_url, tmp_path):
    ran = run_pod(_job_container(dataclasses.replace(spec, code_bucket="", code_key="")), tmp_path, moto_url, "--help")
    assert ran.returncode == 1 and ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    assert line.startswith("specbench: no code to fetch") and "SPECBENCH_CODE_BUCKET" in line


def _sizes(objects):
    return {(o["kind"], len(o["metadata"]["name"])): len(json.dumps(o)) for o in objects}


def test_the_manifests_do_not_grow_with_the_package(spec):
    """A package a megabyte larger: the same objects, of the same sizes (only the hashes in names
    and the sha256 differ), and no byte of the zip anywhere in them."""
    larger = dataclasses.replace(spec, bundle=spec.bundle + bytes(1 << 20))
    assert _sizes(benchmark_objects(larger)) == _sizes(benchmark_objects(spec))
    text = json.dumps(benchmark_objects(spec))
    assert "binaryData" not in text and bundle.MAIN not in text
    config = load_config(SWEEP_CONTEXT, {})
    sweep = sweep_spec(config, serving_plan(config, BUCKET), spec)
    grown = dataclasses.replace(sweep, benchmark=larger)
    assert _sizes(sweep_objects(grown)) == _sizes(sweep_objects(sweep))


def test_a_code_change_renames_the_job_and_the_location_does_not(spec):
    """The Job is named by the code's sha256 (a change reruns it); the asset's bucket and key,
    tokens in the CDK app, are not hashed."""
    (job,) = [o for o in benchmark_objects(spec) if o["kind"] == "Job"]
    changed = dataclasses.replace(spec, bundle=spec.bundle + b"\0")
    (other,) = [o for o in benchmark_objects(changed) if o["kind"] == "Job"]
    assert job["metadata"]["name"] != other["metadata"]["name"]
    moved = dataclasses.replace(spec, code_bucket="${Token[TOKEN.1234]}", code_key="${Token[TOKEN.1235]}")
    (same,) = [o for o in benchmark_objects(moved) if o["kind"] == "Job"]
    assert same["metadata"]["name"] == job["metadata"]["name"]
    config = load_config(SWEEP_CONTEXT, {})
    sweep = sweep_spec(config, serving_plan(config, BUCKET), spec)
    names = [o["metadata"]["name"] for o in sweep_objects(sweep)]
    assert [o["metadata"]["name"] for o in sweep_objects(dataclasses.replace(sweep, benchmark=moved))] == names


def test_manifest_sizes_reports_each_manifest_and_fails_over_budget(tmp_path, capsys):
    manifest = "Custom::AWSCDK-EKS-KubernetesResource"
    small = {"Type": manifest, "Properties": {"Manifest": "x" * 100}}
    large = {"Type": manifest, "Properties": {"Manifest": "x" * manifest_sizes.BUDGET}}
    other = {"Type": "AWS::S3::Bucket", "Properties": {}}
    (tmp_path / "Stack.template.json").write_text(json.dumps({"Resources": {"Small": small, "Bucket": other}}))
    assert manifest_sizes.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out == "Stack Small: 102 bytes, 0.2% of the 65,536-byte budget\n"
    (tmp_path / "Big.template.json").write_text(json.dumps({"Resources": {"Large": large}}))
    assert manifest_sizes.main([str(tmp_path)]) == 1
    assert "Big Large: 65,538 bytes, 100.0% of the 65,536-byte budget OVER" in capsys.readouterr().out
    assert manifest_sizes.main([str(tmp_path / "none")]) == 2
    assert "run `make synth` first" in capsys.readouterr().err


def test_dist_ships_the_code_beside_the_yaml_and_points_the_pods_at_it(tmp_path, spec):
    from charts.dist import code_key, write_dist

    config = load_config({}, {})
    files = write_dist(config, BUCKET, tmp_path)
    assert (tmp_path / "specbench.pyz").read_bytes() == spec.bundle
    text = "".join(path.read_text() for path in files)
    assert (
        f"value: {code_key(spec.bundle)}" in text and code_key(spec.bundle) == f"results/code/{hashlib.sha256(spec.bundle).hexdigest()}.pyz"
    )
