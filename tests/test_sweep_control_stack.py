"""The staged sweep's controller inside the stacks (stacks/sweep_control.py): the variant synthesis
(tests/conftest.py, a staged sweep started on deploy) has its role in the data stack (results/sweeps/
only), its Pod Identity association and code read in the platform stack, and the sweep's manifest
waits for both; the default synthesis has none of it. Reads the session's synthesized templates."""

from __future__ import annotations

import json

from charts.sweep_control import NAME as ACCOUNT
from conftest import BUCKET
from scripts import manifest_sizes
from templates import direct_dependencies, only, props, resources

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
ASSOCIATION = "AWS::EKS::PodIdentityAssociation"


def _trusts(role: dict, account: str) -> bool:
    conditions = props(role)["AssumeRolePolicyDocument"]["Statement"][0].get("Condition", {}).get("StringEquals", {})
    return conditions.get("aws:RequestTag/kubernetes-service-account") == account


def _controller_objects(template: dict) -> list[dict]:
    """The sweep manifest's last objects, from the controller's ServiceAccount on (charts/sweep_control.py)."""
    objects = _sweep_objects(template)
    return objects[[(o["kind"], o["metadata"]["name"]) for o in objects].index(("ServiceAccount", ACCOUNT)) :]


def _sweep_objects(template: dict) -> list[dict]:
    (sweep,) = [lid for lid in resources(template, MANIFEST) if lid.startswith("EksClusterSweepChart")]
    separator, parts = props(template["Resources"][sweep])["Manifest"]["Fn::Join"]
    return json.loads(separator.join(p if isinstance(p, str) else BUCKET for p in parts))


def test_the_default_deployment_has_no_controller(platform, data):
    assert not [r for r in resources(platform, ASSOCIATION).values() if props(r)["ServiceAccount"] == ACCOUNT]
    assert not [r for r in resources(data, "AWS::IAM::Role").values() if _trusts(r, ACCOUNT)]
    # Its egress policy is one of the namespace's (the namespace-wide one leaves its label out); no other object.
    named = [o for text in _manifest_texts(platform) for o in json.loads(text) if ACCOUNT in o["metadata"]["name"]]
    assert [(o["kind"], o["metadata"]["name"]) for o in named] == [("NetworkPolicy", f"{ACCOUNT}-egress")]


def _manifest_texts(template: dict) -> list[str]:
    texts = []
    for r in resources(template, MANIFEST).values():
        manifest = props(r)["Manifest"]
        if isinstance(manifest, dict):
            separator, parts = manifest["Fn::Join"]
            manifest = separator.join(p if isinstance(p, str) else BUCKET for p in parts)
        texts.append(manifest)
    return texts


def test_the_association_binds_the_controllers_account_to_its_own_role(variant_platform, variant_data):
    association_id, association = only(variant_platform, ASSOCIATION, lambda r: props(r)["ServiceAccount"] == ACCOUNT)
    p = props(association)
    assert (p["Namespace"], p["ServiceAccount"]) == ("specdecode", ACCOUNT)
    agent, _ = only(variant_platform, "AWS::EKS::Addon", lambda r: props(r)["AddonName"] == "eks-pod-identity-agent")
    assert agent in direct_dependencies(variant_platform, association_id)
    role_id, role = only(variant_data, "AWS::IAM::Role", lambda r: _trusts(r, ACCOUNT))
    assert variant_data["Outputs"][p["RoleArn"]["Fn::GetStackOutput"]["OutputName"]]["Value"] == {"Fn::GetAtt": [role_id, "Arn"]}
    trust = props(role)["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == "specdecode"
    # No other service account is bound to it.
    bound = [props(r)["ServiceAccount"] for r in resources(variant_platform, ASSOCIATION).values() if props(r)["RoleArn"] == p["RoleArn"]]
    assert bound == [ACCOUNT]


def test_the_role_may_touch_only_the_sweeps_folders_and_get_its_code(variant_platform, variant_data):
    role_id, role = only(variant_data, "AWS::IAM::Role", lambda r: _trusts(r, ACCOUNT))
    assert "ManagedPolicyArns" not in props(role) and "Policies" not in props(role)
    (policy,) = [r for r in resources(variant_data, "AWS::IAM::Policy").values() if {"Ref": role_id} in props(r)["Roles"]]
    bucket, _ = only(variant_data, "AWS::S3::Bucket", lambda r: "LoggingConfiguration" in props(r))
    arn = {"Fn::GetAtt": [bucket, "Arn"]}
    assert sorted(props(policy)["PolicyDocument"]["Statement"], key=lambda s: json.dumps(s["Action"])) == [
        {"Action": "s3:ListBucket", "Condition": {"StringLike": {"s3:prefix": ["results/sweeps/*"]}}, "Effect": "Allow", "Resource": arn},
        {"Action": ["s3:GetObject", "s3:PutObject"], "Effect": "Allow", "Resource": {"Fn::Join": ["", [arn, "/results/sweeps/*"]]}},
    ]
    # In the platform stack: get the one code object (the asset, and dist's copy of it), nothing else.
    role_refs = [r for r in resources(variant_platform, "AWS::IAM::Policy").values() if _names_role(r, role_id)]
    (code_read,) = role_refs
    (statement,) = props(code_read)["PolicyDocument"]["Statement"]
    assert statement["Action"] == "s3:GetObject" and statement["Effect"] == "Allow" and len(statement["Resource"]) == 2
    asset, dist = statement["Resource"]
    assert asset.startswith("arn:aws:s3:::cdk-") and asset.endswith(".pyz") and "*" not in asset
    assert dist["Fn::Join"][1][-1].startswith("/results/code/") and "*" not in json.dumps(dist)
    assert not [r for r in resources(variant_platform, "AWS::IAM::ManagedPolicy").values() if _names_role(r, role_id)]


def _names_role(policy: dict, role_id: str) -> bool:
    """A platform-stack policy attached to the data stack's role (by its exported name)."""
    return any("Fn::GetStackOutput" in r and role_id in r["Fn::GetStackOutput"]["OutputName"] for r in props(policy).get("Roles", []))


def test_its_one_acknowledgment_names_exactly_the_wildcard_of_its_policy(variant_assembly, variant_data):
    """The controller's role exists only in a staged sweep's synthesis, so its cdk-nag
    acknowledgment stays on in the variant (tests/synth_apps.py): it must name the one
    wildcard resource of the role's policy, rendered as cdk-nag renders it, and nothing else."""
    # Imported here: stacks imports aws_cdk, whose jsii runtime would start in every pytest-xdist
    # worker at collection (0.8 s of CPU each), not only in the one that runs this test.
    from stacks.nag import _rendered

    role_id, _ = only(variant_data, "AWS::IAM::Role", lambda r: _trusts(r, ACCOUNT))
    (policy,) = [r for r in resources(variant_data, "AWS::IAM::Policy").values() if {"Ref": role_id} in props(r)["Roles"]]
    wildcards = {
        f"AwsSolutions-IAM5[Resource::{_rendered(s['Resource'])}]"
        for s in props(policy)["PolicyDocument"]["Statement"]
        if "*" in json.dumps(s["Resource"])
    }
    assert wildcards == {
        f"AwsSolutions-IAM5[Resource::<{only(variant_data, 'AWS::S3::Bucket', lambda r: 'LoggingConfiguration' in props(r))[0]}.Arn>/results/sweeps/*]"
    }
    metadata = json.loads(variant_assembly.file("SpecDecodeData.metadata.json").read_text())
    acknowledged = {
        rule.removeprefix("Annotation::")
        for path, entries in metadata.items()
        if "SweepControl" in path
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule in entry["data"]
    }
    assert acknowledged == wildcards
    report = json.loads(variant_assembly.file("validation-report.json").read_text())
    flagged = [c["constructPath"] for p in report["pluginReports"] for v in p["violations"] for c in v["violatingConstructs"]]
    assert not [path for path in flagged if "SweepControl" in path]


def test_the_sweep_manifest_holds_the_controller_and_waits_for_its_credentials(variant_platform):
    (sweep,) = [lid for lid in resources(variant_platform, MANIFEST) if lid.startswith("EksClusterSweepChart")]
    association, _ = only(variant_platform, ASSOCIATION, lambda r: props(r)["ServiceAccount"] == ACCOUNT)
    code_read = [lid for lid, r in resources(variant_platform, "AWS::IAM::Policy").items() if lid.startswith("ServingSweepControlCodeRead")]
    assert code_read and {association, *code_read} <= direct_dependencies(variant_platform, sweep)
    objects = _sweep_objects(variant_platform)
    first = next(o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].startswith("specbench-sweep-"))
    (job,) = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"] == f"{first['metadata']['name']}-control"]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == ACCOUNT and pod["automountServiceAccountToken"] is True
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SWEEP_RESULTS"] == f"s3://{BUCKET}/results/" and env["AWS_REGION"] == "us-east-2"
    assert [o["kind"] for o in _controller_objects(variant_platform)] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "CronJob",
        "Job",
    ]


def test_the_sweep_manifest_with_its_controller_fits_the_payload_budget(variant_platform):
    sizes = manifest_sizes.manifest_sizes(variant_platform)
    (sweep,) = [lid for lid in sizes if lid.startswith("EksClusterSweepChart")]
    controller = sum(len(json.dumps(json.dumps(o))) for o in _controller_objects(variant_platform))
    print(
        f"\nsweep manifest {sizes[sweep]:,} bytes ({sizes[sweep] / manifest_sizes.BUDGET:.1%} of {manifest_sizes.BUDGET:,}); controller {controller:,}"
    )
    assert sizes[sweep] <= manifest_sizes.BUDGET


def test_synth_says_how_to_start_the_controller_only_for_a_staged_sweep(variant_assembly, cli_assembly):
    variant_assembly.wait()
    printed = variant_assembly.outdir.with_name(variant_assembly.outdir.name + ".stderr").read_text()
    assert "start its controller: kubectl -n <serving.namespace> create job <the sweep's job name>-control" in printed
    cli_assembly.wait()
    assert "start its controller" not in cli_assembly.outdir.with_name(cli_assembly.outdir.name + ".stderr").read_text()
