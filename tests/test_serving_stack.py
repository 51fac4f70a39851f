"""The serving charts inside the platform stack: one manifest per chart, applied after the add-ons
they need and deleted before them, identical to dist/, and within the kubectl provider's limits.
The benchmark's own stack side (its role, association and ordering) is in test_benchmark_stack.py."""

from __future__ import annotations

import base64
import hashlib
import json
import lzma
import re
import subprocess
import sys
from pathlib import Path

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
    for name, template in (("default", platform), ("variant", variant_platform)):
        for lid, resource in _manifests(template).items():
            size = len(json.dumps(props(resource)["Manifest"]))
            budget = BENCHMARK_PAYLOAD_BUDGET if lid.startswith("EksClusterBenchmarkChart") else PAYLOAD_LIMIT / 4
            assert size < budget, f"{lid}: {size} bytes"
            if lid.startswith("EksClusterBenchmarkChart"):
                print(
                    f"\n{name}: benchmark manifest {size} bytes, {size / budget:.1%} of its budget ({size / PAYLOAD_LIMIT:.1%} of the limit)"
                )


def _benchmark_pod(template):
    """The benchmark Job's container and its ConfigMap, as the synthesized manifest holds them."""
    objects = {o["kind"]: o for o in _objects(template["Resources"][_by_prefix(template, "EksClusterBenchmarkChart")])}
    (container,) = objects["Job"]["spec"]["template"]["spec"]["containers"]
    return container, objects["ConfigMap"]


def _mount_config_map(config_map, folder, damage=None):
    """The ConfigMap as the kubelet mounts it: one read-only file per key (binaryData decoded)."""
    folder.mkdir()
    files = {
        **{k: v.encode() for k, v in config_map["data"].items()},
        **{k: base64.b64decode(v) for k, v in config_map["binaryData"].items()},
    }
    for key, data in files.items():
        if key == damage:
            data = data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0x01]) + data[len(data) // 2 + 1 :]
        (folder / key).write_bytes(data)
        (folder / key).chmod(0o444)
    folder.chmod(0o555)


def _run_pod_script(container, code, tmp, *args, env=None):
    """The container's own script with the ConfigMap at ``code`` and the /tmp emptyDir at ``tmp``
    (the only paths changed), without its pip line (the requirements are this environment's)."""
    assert container["command"][:2] == ["sh", "-c"] and container["command"][3] == "specbench"
    script = container["command"][2]
    (pip,) = [line for line in script.splitlines() if "pip install" in line]
    script = re.sub(
        "/opt/specbench/|/tmp/", lambda m: f"{code}/" if m.group() == "/opt/specbench/" else f"{tmp}/", script.replace(pip + "\n", "")
    )
    pod_env = {e["name"]: e["value"] for e in container["env"] if e["name"] != "PYTHONPATH"}
    pod_env.update(HOME=str(tmp), PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin", **(env or {}))
    return subprocess.run(["sh", "-c", script, "specbench", *args], env=pod_env, capture_output=True, text=True, timeout=120)


def test_the_benchmark_pod_unpacks_and_runs_the_zip_its_manifest_carries(platform, tmp_path):
    """The synthesized manifest's ConfigMap, mounted read-only, and the Job's exact script: the zip is
    unpacked to /tmp, checked against the sha256 of the pod template, and runs."""
    container, config_map = _benchmark_pod(platform)
    assert set(config_map["binaryData"]) == {"specbench.pyz.xz"}
    _mount_config_map(config_map, tmp_path / "code")
    (tmp_path / "tmp").mkdir()
    ran = _run_pod_script(container, tmp_path / "code", tmp_path / "tmp", "--help")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "--endpoint" in ran.stdout and "--results" in ran.stdout  # `specbench run --help`, from the zip
    unpacked = (tmp_path / "tmp" / "specbench.pyz").read_bytes()
    assert hashlib.sha256(unpacked).hexdigest() == {e["name"]: e["value"] for e in container["env"]}["SPECBENCH_BUNDLE_SHA256"]
    assert unpacked == lzma.decompress(base64.b64decode(config_map["binaryData"]["specbench.pyz.xz"]))


def test_a_damaged_or_foreign_bundle_stops_the_pod_in_one_line(platform, tmp_path):
    container, config_map = _benchmark_pod(platform)
    _mount_config_map(config_map, tmp_path / "code", damage="specbench.pyz.xz")  # one flipped bit
    (tmp_path / "tmp").mkdir()
    ran = _run_pod_script(container, tmp_path / "code", tmp_path / "tmp", "--help")
    assert ran.returncode == 1 and ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    assert line.startswith(f"specbench: cannot unpack {tmp_path}/code/specbench.pyz.xz (") and "redeploy" in line
    assert not (tmp_path / "tmp" / "specbench.pyz").exists()
    # An intact blob that is not the zip the pod template names (another deploy's ConfigMap).
    _mount_config_map(config_map, tmp_path / "intact")
    ran = _run_pod_script(container, tmp_path / "intact", tmp_path / "tmp", "--help", env={"SPECBENCH_BUNDLE_SHA256": "0" * 64})
    assert ran.returncode == 1 and ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    assert line.startswith(f"specbench: {tmp_path}/intact/specbench.pyz.xz unpacks to sha256 ") and f"not {'0' * 64}" in line
    assert not (tmp_path / "tmp" / "specbench.pyz").exists()


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
