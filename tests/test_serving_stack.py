"""The serving charts inside the platform stack: one manifest per chart, applied after the add-ons
they need and deleted before them, identical to dist/, and within the kubectl provider's limits.
The benchmark's own stack side (its role, association and ordering) is in test_benchmark_stack.py."""

from __future__ import annotations

import hashlib
import json
import re

import boto3
from code_fetch import moto_server, run_pod

from conftest import BUCKET, HF_TOKEN_SECRET_ARN
from scripts import manifest_sizes
from templates import all_dependencies, only, props, resources

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


def _manifests(template):
    """The serving charts' manifests (cluster.add_cdk8s_chart), not the add-ons' own (a namespace)."""
    return {lid: r for lid, r in resources(template, MANIFEST).items() if lid.startswith("EksCluster")}


def _by_prefix(template, prefix):
    (found,) = [lid for lid in _manifests(template) if lid.startswith(prefix)]
    return found


def _objects(resource, bucket=BUCKET):
    """The manifest's objects with the bucket reference filled in and the prune label removed."""
    manifest = props(resource)["Manifest"]
    parts = manifest["Fn::Join"][1] if isinstance(manifest, dict) else [manifest]
    text = "".join(p if isinstance(p, str) else bucket for p in parts)
    objects = json.loads(text)
    for obj in objects:
        labels = obj["metadata"]["labels"]
        for label in [k for k in labels if k.startswith("aws.cdk.eks/prune-")]:
            del labels[label]
    return objects


def test_one_manifest_per_chart_with_the_same_objects_as_dist(platform, dist):
    names = {
        "EksClusterModelCacheChart": "0000-model-cache.k8s.yaml",
        "EksClusterServiceqwenvllm": "0001-qwen-vllm.k8s.yaml",
        "EksClusterServiceqwensdvllm": "0002-qwen-sd-vllm.k8s.yaml",
        "EksClusterBenchmarkChart": "0003-specbench.k8s.yaml",
    }
    assert len(_manifests(platform)) == len(names)
    for prefix, dist_file in names.items():
        assert _code_location_blanked(_objects(platform["Resources"][_by_prefix(platform, prefix)])) == _code_location_blanked(
            dist[dist_file]
        )


def _code_location_blanked(objects):
    """The objects with the code's bucket and key blanked: the CDK asset's in the stack, the data
    bucket's results/code/ in dist (charts/dist.py); the sha256 the pods check stays compared."""
    text = json.dumps(objects)
    for name in ("SPECBENCH_CODE_BUCKET", "SPECBENCH_CODE_KEY"):
        text = re.sub(rf'("name": "{name}", "value": )"[^"]*"', r'\1""', text)
    return json.loads(text)


def test_bucket_is_the_data_stacks_bucket(platform, data):
    resource = platform["Resources"][_by_prefix(platform, "EksClusterModelCacheChart")]
    intrinsics = [p for p in props(resource)["Manifest"]["Fn::Join"][1] if not isinstance(p, str)]
    assert intrinsics and all(set(p) == {"Fn::GetStackOutput"} for p in intrinsics)
    outputs = {p["Fn::GetStackOutput"]["OutputName"] for p in intrinsics}
    assert all(data["Outputs"][o]["Value"] == {"Ref": only(data, "AWS::S3::Bucket", _is_data_bucket)[0]} for o in outputs)


def _is_data_bucket(resource):
    return "LoggingConfiguration" in props(resource)


def test_charts_apply_after_their_add_ons_and_are_deleted_first(platform):
    cache = _by_prefix(platform, "EksClusterModelCacheChart")
    before_cache = all_dependencies(platform, cache)
    helm, _ = only(platform, "Custom::AWSCDK-EKS-HelmChart")
    mountpoint, _ = only(platform, "AWS::EKS::Addon", lambda r: props(r)["AddonName"] == "aws-mountpoint-s3-csi-driver")
    assert {helm, mountpoint} | set(resources(platform, "AWS::EKS::Nodegroup")) <= before_cache
    for prefix in ("EksClusterServiceqwenvllm", "EksClusterServiceqwensdvllm"):
        assert cache in all_dependencies(platform, _by_prefix(platform, prefix))


def test_every_chart_fits_the_kubectl_payload_limit(platform, variant_platform):
    """What `make manifest-sizes` prints, for both apps: every manifest, the benchmark's too (it
    carries no code now), within a quarter of the payload limit."""
    for name, template in (("default", platform), ("variant", variant_platform)):
        lines, fits = manifest_sizes.report({name: template})
        print("\n" + "\n".join(lines))
        assert fits, lines
        assert set(manifest_sizes.manifest_sizes(template)) >= set(_manifests(template))
        assert all(size < manifest_sizes.BUDGET for size in manifest_sizes.manifest_sizes(template).values())


def _benchmark_pod(template):
    """The benchmark Job's container and its ConfigMap, as the synthesized manifest holds them."""
    objects = {o["kind"]: o for o in _objects(template["Resources"][_by_prefix(template, "EksClusterBenchmarkChart")])}
    (container,) = objects["Job"]["spec"]["template"]["spec"]["containers"]
    return container, objects["ConfigMap"]


def test_no_manifest_carries_code(platform):
    for lid, resource in _manifests(platform).items():
        for obj in _objects(resource):
            if obj["kind"] == "ConfigMap":
                assert "binaryData" not in obj, lid
                assert not [k for k in obj["data"] if k.endswith(".pyz")], lid


def _assets(assembly):
    """The platform stack's file assets, as the cloud assembly lists them for upload."""
    return json.loads(assembly.file("SpecDecodePlatform.assets.json").read_text())["files"].values()


def _code_read_policy(template):
    """The one statement of the benchmark role's code-read policy (stacks/benchmark.py)."""
    (policy,) = [r for lid, r in resources(template, "AWS::IAM::Policy").items() if "CodeRead" in lid]
    (statement,) = props(policy)["PolicyDocument"]["Statement"]
    (role,) = props(policy)["Roles"]
    assert "DataBenchmarkRole" in json.dumps(role)  # the data stack's benchmark role, the pods' identity
    return statement


def test_the_synthesized_benchmark_pod_fetches_its_code_asset_and_runs_it(platform, cli_assembly, tmp_path):
    """The manifest's Job container, its exact script (but pip) and environment, against moto: the
    object the stack's asset names is fetched, checked against the sha256 the pod template records,
    and runs; the role may get that one object."""
    container, config_map = _benchmark_pod(platform)
    assert "binaryData" not in config_map
    env = {e["name"]: e["value"] for e in container["env"]}
    # The default synthesizer's file asset: key <asset hash>.pyz, the file's extension kept.
    assert re.fullmatch(r"[0-9a-f]{64}\.pyz", env["SPECBENCH_CODE_KEY"])
    (asset,) = [a for a in _assets(cli_assembly) if a["source"]["path"].endswith(".pyz")]
    assert asset["source"]["packaging"] == "file" and env["SPECBENCH_CODE_KEY"] in json.dumps(asset["destinations"])
    policy = _code_read_policy(platform)
    assert (
        policy["Action"] == "s3:GetObject"
        and policy["Resource"] == f"arn:aws:s3:::cdk-hnb659fds-assets-123456789012-us-east-2/{env['SPECBENCH_CODE_KEY']}"
    )
    bundle = cli_assembly.file(asset["source"]["path"]).read_bytes()
    assert hashlib.sha256(bundle).hexdigest() == env["SPECBENCH_BUNDLE_SHA256"]
    for url in moto_server():
        s3 = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
            "s3", region_name="us-east-2", endpoint_url=url
        )
        s3.create_bucket(Bucket="code", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
        s3.put_object(Bucket="code", Key=env["SPECBENCH_CODE_KEY"], Body=bundle)
        ran = run_pod(container, tmp_path, url, "--help", env={"SPECBENCH_CODE_BUCKET": "code"})
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "--endpoint" in ran.stdout and "--results" in ran.stdout  # `specbench run --help`, from the fetched zip


def test_variant_adds_its_extra_service(variant_platform):
    services = [lid for lid in _manifests(variant_platform) if lid.startswith("EksClusterService")]
    assert len(services) == 3
    extra = _objects(variant_platform["Resources"][_by_prefix(variant_platform, "EksClusterServiceqwensdk4")])
    assert [o["kind"] for o in extra] == ["Deployment", "Service"]
    assert extra[0]["metadata"]["labels"]["specdecode/speculative-tokens"] == "4"


def _model_cache_job_policy(template):
    """The model-cache Job's association (its service account's Pod Identity role) and that role's
    policy statements; the association is applied before the chart."""
    association_id, association = only(template, "AWS::EKS::PodIdentityAssociation", lambda r: props(r)["ServiceAccount"] == "model-cache")
    p = props(association)
    assert (p["Namespace"], p["ServiceAccount"]) == ("specdecode", "model-cache")
    role_id = p["RoleArn"]["Fn::GetAtt"][0]
    trust = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust[0]["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "model-cache"
    (policy_id, policy), *others = [
        (lid, r) for lid, r in resources(template, "AWS::IAM::Policy").items() if {"Ref": role_id} in props(r)["Roles"]
    ]
    assert others == []
    before_chart = all_dependencies(template, _by_prefix(template, "EksClusterModelCacheChart"))
    assert {association_id, policy_id} <= before_chart
    return props(policy)["PolicyDocument"]["Statement"]


def _code_object_statement(template):
    """The Job's code read: the one code object (the CDK asset the chart names, or charts.dist's
    upload of the same zip under the data bucket's results/code/), nothing else of either bucket."""
    chart = template["Resources"][_by_prefix(template, "EksClusterModelCacheChart")]
    (job,) = [o for o in _objects(chart) if o["kind"] == "Job"]
    (fetch,) = job["spec"]["template"]["spec"]["initContainers"][:1]
    env = {e["name"]: e["value"] for e in fetch["env"]}
    asset = f"arn:aws:s3:::{env['SPECBENCH_CODE_BUCKET']}/{env['SPECBENCH_CODE_KEY']}"
    # The data bucket as the chart's manifest names it (a reference to the data stack's output).
    (data_bucket,) = {json.dumps(p) for p in props(chart)["Manifest"]["Fn::Join"][1] if not isinstance(p, str)}
    dist = {"Fn::Join": ["", ["arn:aws:s3:::", json.loads(data_bucket), f"/results/code/{env['SPECBENCH_BUNDLE_SHA256']}.pyz"]]}
    return {"Action": "s3:GetObject", "Effect": "Allow", "Resource": [asset, dist]}


def test_the_model_cache_job_may_get_the_code_and_read_only_the_configured_secret(variant_platform):
    assert _model_cache_job_policy(variant_platform) == [
        _code_object_statement(variant_platform),
        {"Action": "secretsmanager:GetSecretValue", "Effect": "Allow", "Resource": HF_TOKEN_SECRET_ARN},
    ]


def test_without_a_secret_the_model_cache_job_may_only_get_the_code(platform):
    associations = resources(platform, "AWS::EKS::PodIdentityAssociation").values()
    assert sorted(props(a)["ServiceAccount"] for a in associations) == ["model-cache", "specbench"]
    assert _model_cache_job_policy(platform) == [_code_object_statement(platform)]
