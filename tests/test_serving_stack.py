"""The serving charts inside the platform stack: one manifest per chart, applied after the add-ons
they need and deleted before them, identical to dist/, and within the kubectl provider's limits.
The benchmark's own stack side (its role, association and ordering) is in test_benchmark_stack.py."""

from __future__ import annotations

import json

from conftest import BUCKET, HF_TOKEN_SECRET_ARN
from templates import all_dependencies, only, props, resources

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
# The kubectl provider passes a manifest to its Lambda inline: 256 KB payload limit.
PAYLOAD_LIMIT = 256 * 1024
# The benchmark's manifest carries the specbench package (a zip, base64): it may use more, but an
# update sends the old and the new manifest in one event, so two must still fit with room to spare.
BENCHMARK_PAYLOAD_BUDGET = PAYLOAD_LIMIT * 0.4


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
        assert _objects(platform["Resources"][_by_prefix(platform, prefix)]) == dist[dist_file]


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
    for template in (platform, variant_platform):
        for lid, resource in _manifests(template).items():
            size = len(json.dumps(props(resource)["Manifest"]))
            budget = BENCHMARK_PAYLOAD_BUDGET if lid.startswith("EksClusterBenchmarkChart") else PAYLOAD_LIMIT / 4
            assert size < budget, f"{lid}: {size} bytes"


def test_variant_adds_its_extra_service(variant_platform):
    services = [lid for lid in _manifests(variant_platform) if lid.startswith("EksClusterService")]
    assert len(services) == 3
    extra = _objects(variant_platform["Resources"][_by_prefix(variant_platform, "EksClusterServiceqwensdk4")])
    assert [o["kind"] for o in extra] == ["Deployment", "Service"]
    assert extra[0]["metadata"]["labels"]["specdecode/speculative-tokens"] == "4"


def test_token_reader_may_read_only_the_configured_secret(variant_platform):
    association_id, association = only(
        variant_platform, "AWS::EKS::PodIdentityAssociation", lambda r: props(r)["ServiceAccount"] == "model-cache"
    )
    p = props(association)
    assert (p["Namespace"], p["ServiceAccount"]) == ("specdecode", "model-cache")
    role_id = p["RoleArn"]["Fn::GetAtt"][0]
    trust = variant_platform["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust[0]["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "model-cache"
    (policy,) = [r for r in resources(variant_platform, "AWS::IAM::Policy").values() if {"Ref": role_id} in props(r)["Roles"]]
    assert props(policy)["PolicyDocument"]["Statement"] == [
        {"Action": "secretsmanager:GetSecretValue", "Effect": "Allow", "Resource": HF_TOKEN_SECRET_ARN}
    ]
    assert association_id in all_dependencies(variant_platform, _by_prefix(variant_platform, "EksClusterModelCacheChart"))


def test_no_token_reader_without_a_secret(platform):
    associations = resources(platform, "AWS::EKS::PodIdentityAssociation").values()
    assert [props(a)["ServiceAccount"] for a in associations] == ["specbench"]
