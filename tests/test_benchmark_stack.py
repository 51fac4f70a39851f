"""The benchmark inside the stacks: applied after every service and the Pod Identity association
(so deleted before them), and a role that may touch only results/ and its metrics namespace.
Reads the session's synthesized templates (tests/conftest.py); nothing is synthesized here."""

from __future__ import annotations

import json

from conftest import BUCKET
from templates import all_dependencies, direct_dependencies, only, props, resources

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


def _manifest_ids(template, prefix):
    return [lid for lid, r in resources(template, MANIFEST).items() if lid.startswith(prefix)]


def _benchmark_association(template):
    return only(template, "AWS::EKS::PodIdentityAssociation", lambda r: props(r)["ServiceAccount"] == "specbench")


def _benchmark_role(data):
    return only(
        data,
        "AWS::IAM::Role",
        lambda r: (
            props(r)["AssumeRolePolicyDocument"]["Statement"][0]
            .get("Condition", {})
            .get("StringEquals", {})
            .get("aws:RequestTag/kubernetes-service-account")
            == "specbench"
        ),
    )


def test_benchmark_manifest_depends_on_every_service_and_the_association(platform, variant_platform):
    for template, services in ((platform, 2), (variant_platform, 3)):
        (benchmark,) = _manifest_ids(template, "EksClusterBenchmarkChart")
        service_ids = _manifest_ids(template, "EksClusterService")
        assert len(service_ids) == services
        association, _ = _benchmark_association(template)
        assert set(service_ids) | {association} <= direct_dependencies(template, benchmark)
        # Nothing but a sweep (which uses its ConfigMap and service account) waits for the benchmark:
        # deploy applies it last, destroy deletes it first.
        waiting = {lid for lid in template["Resources"] if lid != benchmark and benchmark in all_dependencies(template, lid)}
        assert waiting == set(_manifest_ids(template, "EksClusterSweepChart"))


def test_association_binds_the_data_stacks_benchmark_role(platform, data):
    association_id, association = _benchmark_association(platform)
    p = props(association)
    assert (p["Namespace"], p["ServiceAccount"]) == ("specdecode", "specbench")
    agent, _ = only(platform, "AWS::EKS::Addon", lambda r: props(r)["AddonName"] == "eks-pod-identity-agent")
    assert agent in direct_dependencies(platform, association_id)
    output = data["Outputs"][p["RoleArn"]["Fn::GetStackOutput"]["OutputName"]]
    role_id, _ = _benchmark_role(data)
    assert output["Value"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_benchmark_role_may_touch_only_results_and_its_metrics_namespace(data):
    role_id, role = _benchmark_role(data)
    trust = props(role)["AssumeRolePolicyDocument"]["Statement"]
    assert trust[0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust[0]["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == "specdecode"
    (policy,) = [r for r in resources(data, "AWS::IAM::Policy").values() if {"Ref": role_id} in props(r)["Roles"]]
    assert not [r for r in resources(data, "AWS::IAM::ManagedPolicy").values() if {"Ref": role_id} in props(r).get("Roles", [])]
    assert "ManagedPolicyArns" not in props(role) and "Policies" not in props(role)
    bucket, _ = only(data, "AWS::S3::Bucket", lambda r: "LoggingConfiguration" in props(r))
    arn = {"Fn::GetAtt": [bucket, "Arn"]}
    statements = sorted(props(policy)["PolicyDocument"]["Statement"], key=lambda s: json.dumps(s["Action"]))
    assert statements == [
        {
            "Action": "cloudwatch:PutMetricData",
            "Condition": {"StringEquals": {"cloudwatch:namespace": "Qwen/LLMPerf"}},
            "Effect": "Allow",
            "Resource": "*",
        },
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["results/*", "datasets/*"]}},
            "Effect": "Allow",
            "Resource": arn,
        },
        {
            "Action": ["s3:GetObject", "s3:PutObject"],
            "Effect": "Allow",
            "Resource": [{"Fn::Join": ["", [arn, "/datasets/*"]]}, {"Fn::Join": ["", [arn, "/results/*"]]}],  # CDK sorts them
        },
    ]


def test_benchmark_manifest_names_the_bucket_region_and_every_endpoint(variant_platform):
    (benchmark,) = _manifest_ids(variant_platform, "EksClusterBenchmarkChart")
    manifest = props(variant_platform["Resources"][benchmark])["Manifest"]
    parts = manifest["Fn::Join"][1]
    intrinsics = [p for p in parts if not isinstance(p, str)]
    assert intrinsics and all(set(p) == {"Fn::GetStackOutput"} for p in intrinsics)  # the bucket name, nothing else
    objects = json.loads("".join(p if isinstance(p, str) else BUCKET for p in parts))
    (job,) = [o for o in objects if o["kind"] == "Job"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--results") + 1] == f"s3://{BUCKET}/results/"
    assert args[args.index("--dataset-cache") + 1] == f"s3://{BUCKET}/datasets/"
    assert args[args.index("--thinking") + 1] == "off"
    assert args[args.index("--region") + 1] == "us-east-2"
    endpoints = [v for k, v in zip(args, args[1:], strict=False) if k == "--endpoint"]
    assert endpoints == [f"{n}=http://{n}:8000" for n in ("qwen-vllm", "qwen-sd-vllm", "qwen-sd-k4")]
