"""Every bad setting stops synth with exactly one line, naming the field: a wide table of bad
values, the sources the rules are checked against, and the endpoint warning."""

from __future__ import annotations

import json

import pytest

from config import ConfigError, catalog, ec2, layout, load_config, subnets
from config.validate import config_warnings

SCHEDULER = "registry.k8s.io/kube-scheduler"
ARN = "arn:aws:iam::123456789012:role/Admin"
AZS4 = "us-east-2a,us-east-2b,us-east-2c,us-east-2d"

# (context, the field the one line must name, a phrase of that line)
BAD: list[tuple[dict[str, object], str, str]] = [
    # misspelt keys and sections
    ({"neuron_node.max_size": 2}, "neuron_node.max_size", "did you mean neuron_nodes.max_size?"),
    ({"servings.image": "x"}, "servings.image", "no section 'servings'"),
    ({"clustr.name": "x"}, "clustr.name", "did you mean cluster.name?"),
    ({"serving.tensor_paralel_size": 32}, "serving.tensor_paralel_size", "did you mean serving.tensor_parallel_size?"),
    ({"neuron_nodes": {"max_size": 2}}, "neuron_nodes", "is a section, not a setting"),
    # environment
    ({"env.account": "12345"}, "env.account", "is not an AWS account id"),
    ({"env.account": "abcdefghijkl"}, "env.account", "is not an AWS account id"),
    ({"env.region": "Ohio"}, "env.region", "is not an AWS region name"),
    ({"env.region": "us-east-2x"}, "env.region", "is not an AWS region name"),
    ({"env.availability_zones": "us-east-2a"}, "env.availability_zones", "at least two AZs"),
    ({"env.availability_zones": "us-east-2a,us-east-2a"}, "env.availability_zones", "at least two AZs"),
    ({"env.availability_zones": "us-east-2a,us-west-2b"}, "env.availability_zones", "is not an availability zone of us-east-2"),
    ({"env.availability_zones": AZS4}, "env.availability_zones", "allowed: at most 3 AZs"),
    ({"env.availability_zones": AZS4 + ",us-east-2e,us-east-2f"}, "env.availability_zones", "more than network.vpc_cidr=10.40.0.0/16"),
    ({"env.availability_zones": AZS4, "network.vpc_cidr": "10.40.0.0/20"}, "env.availability_zones", "a /26 public and a /22 private"),
    # network
    ({"network.vpc_cidr": "10.0.0.300/16"}, "network.vpc_cidr", "is not an IPv4 CIDR"),
    ({"network.vpc_cidr": "10.40.0.1/16"}, "network.vpc_cidr", "has host bits set"),
    ({"network.vpc_cidr": "10.0.0.0/24"}, "network.vpc_cidr", "/16 to /20"),
    ({"network.vpc_cidr": "10.0.0.0/8"}, "network.vpc_cidr", "/16 to /20"),
    ({"network.vpc_cidr": "224.1.0.0/16"}, "network.vpc_cidr", "multicast"),
    ({"network.vpc_cidr": "127.0.0.0/16"}, "network.vpc_cidr", "loopback"),
    ({"network.vpc_cidr": "169.254.0.0/16"}, "network.vpc_cidr", "link-local"),
    ({"network.vpc_cidr": "240.0.0.0/16"}, "network.vpc_cidr", "reserved range"),
    ({"network.vpc_cidr": "0.0.0.0/16"}, "network.vpc_cidr", "'this network'"),
    ({"network.nat_gateways": 0}, "network.nat_gateways", "allowed: 1 to 3"),
    ({"network.nat_gateways": 4}, "network.nat_gateways", "allowed: 1 to 3"),
    # cluster
    ({"cluster.name": "-bad"}, "cluster.name", "is not a valid EKS cluster name"),
    ({"cluster.kubernetes_version": "1.30"}, "cluster.kubernetes_version", "allowed: 1.34, 1.35, 1.36"),
    ({"cluster.kubernetes_version": "abc"}, "cluster.kubernetes_version", "pinned kubectl layer"),
    ({"cluster.endpoint_access": "public"}, "cluster.endpoint_access", "is not an endpoint mode"),
    ({"cluster.public_access_cidrs": "10.0.0.0/33"}, "cluster.public_access_cidrs", "is not an IPv4 CIDR"),
    ({"cluster.public_access_cidrs": "::/0"}, "cluster.public_access_cidrs", "takes no IPv6"),
    ({"cluster.public_access_cidrs": "224.0.0.0/4"}, "cluster.public_access_cidrs", "multicast"),
    ({"cluster.public_access_cidrs": "240.0.0.0/4"}, "cluster.public_access_cidrs", "reserved range"),
    ({"cluster.public_access_cidrs": "127.0.0.1/32"}, "cluster.public_access_cidrs", "loopback"),
    ({"cluster.public_access_cidrs": "169.254.169.254/32"}, "cluster.public_access_cidrs", "link-local"),
    ({"cluster.public_access_cidrs": "10.0.0.0/8"}, "cluster.public_access_cidrs", "private range (RFC 1918)"),
    ({"cluster.public_access_cidrs": "192.168.1.0/24"}, "cluster.public_access_cidrs", "private range (RFC 1918)"),
    ({"cluster.public_access_cidrs": "100.64.0.0/10"}, "cluster.public_access_cidrs", "carrier-grade NAT"),
    ({"cluster.public_access_cidrs": "198.51.100.7/32,10.1.0.0/16"}, "cluster.public_access_cidrs", "'10.1.0.0/16'"),
    ({"cluster.public_access_cidrs": ""}, "cluster.public_access_cidrs", "is empty while the public endpoint is on"),
    ({"cluster.require_restricted_endpoint": "true"}, "cluster.public_access_cidrs", "refused by cluster.require_restricted_endpoint"),
    (
        {"cluster.require_restricted_endpoint": "yes", "cluster.public_access_cidrs": "198.51.100.7/32,::/0"},
        "cluster.public_access_cidrs",
        "'::/0': opens the API endpoint to the whole internet",
    ),
    ({"cluster.require_restricted_endpoint": "strict"}, "cluster.require_restricted_endpoint", "expected true or false"),
    ({"cluster.admin_principal_arns": f"{ARN},{ARN}"}, "cluster.admin_principal_arns", "names the same principal twice"),
    ({"cluster.admin_principal_arns": f"{ARN},{ARN.lower()}"}, "cluster.admin_principal_arns", "names the same principal twice"),
    ({"cluster.admin_principal_arns": "arn:aws:sts::123456789012:assumed-role/Admin/me"}, "cluster.admin_principal_arns", "session"),
    # system nodes
    ({"system_nodes.instance_type": "m7g.xlarge"}, "system_nodes.instance_type", "is arm64, but the system nodes run the AL2023_x86_64"),
    ({"system_nodes.instance_type": "c7gn.large"}, "system_nodes.instance_type", "is arm64"),
    ({"system_nodes.instance_type": "a1.large"}, "system_nodes.instance_type", "is arm64"),
    ({"system_nodes.instance_type": "t4g.medium"}, "system_nodes.instance_type", "is arm64"),
    ({"system_nodes.instance_type": "m7i.xlarg"}, "system_nodes.instance_type", "did you mean m7i.xlarge"),
    ({"system_nodes.instance_type": "m9i.xlarge"}, "system_nodes.instance_type", "is not an EC2 instance type"),
    ({"system_nodes.instance_type": "xlarge"}, "system_nodes.instance_type", "is not an EC2 instance type"),
    ({"system_nodes.instance_type": "M7I.XLARGE"}, "system_nodes.instance_type", "is not an EC2 instance type"),
    ({"system_nodes.instance_type": "trn2.48xlarge"}, "system_nodes.instance_type", "is an accelerator instance"),
    ({"system_nodes.instance_type": "p5.48xlarge"}, "system_nodes.instance_type", "is an accelerator instance"),
    ({"system_nodes.max_size": 0}, "system_nodes.max_size", "allowed: 1 to 20"),
    ({"system_nodes.min_size": 0}, "system_nodes.min_size", "nowhere to run"),
    ({"system_nodes.min_size": 4}, "system_nodes.min_size", "is above max_size=3"),
    ({"system_nodes.desired_size": 5}, "system_nodes.desired_size", "must lie between min_size=2 and max_size=3"),
    ({"system_nodes.disk_size_gib": 10}, "system_nodes.disk_size_gib", "allowed: 20 to 1000"),
    # Neuron nodes
    ({"neuron_nodes.instance_type": "inf2.48xlarge"}, "neuron_nodes.instance_type", "is an accelerator but not Trainium"),
    ({"neuron_nodes.instance_type": "trn9.huge"}, "neuron_nodes.instance_type", "is not an EC2 instance type"),
    ({"neuron_nodes.instance_type": "trn2.48xlarg"}, "neuron_nodes.instance_type", "did you mean trn2.48xlarge"),
    ({"neuron_nodes.instance_type": "m7i.xlarge"}, "neuron_nodes.instance_type", "whose Neuron shape is known"),
    ({"neuron_nodes.max_size": 0}, "neuron_nodes.max_size", "allowed: 1 to 64"),
    ({"neuron_nodes.max_size": 65}, "neuron_nodes.max_size", "allowed: 1 to 64"),
    ({"neuron_nodes.min_size": -1}, "neuron_nodes.min_size", "is negative"),
    ({"neuron_nodes.desired_size": 3}, "neuron_nodes.desired_size", "must lie between min_size=0 and max_size=1"),
    ({"neuron_nodes.root_volume_iops": 20000}, "neuron_nodes.root_volume_iops", "allowed: 3000 to 16000"),
    (
        {"neuron_nodes.root_volume_iops": 3000, "neuron_nodes.root_volume_throughput_mibps": 1000},
        "neuron_nodes.root_volume_throughput_mibps",
        "(3000 IOPS allow 750); allowed: <= 750, or neuron_nodes.root_volume_iops >= 4000",
    ),
    ({"neuron_nodes.root_volume_throughput_mibps": 2000}, "neuron_nodes.root_volume_throughput_mibps", "allowed: 125 to 1000"),
    ({"neuron_nodes.root_volume_gib": 50}, "neuron_nodes.root_volume_gib", "allowed: 100 to 16384"),
    ({"neuron_nodes.capacity_mode": "spot"}, "neuron_nodes.capacity_mode", "is not a capacity mode"),
    ({"neuron_nodes.capacity_mode": "reservation"}, "neuron_nodes.capacity_reservation_id", "is required"),
    ({"neuron_nodes.availability_zone": "us-east-2d"}, "neuron_nodes.availability_zone", "is not one of env.availability_zones"),
    ({"neuron_nodes.logical_nc_config": 3}, "neuron_nodes.logical_nc_config", "is not supported on trn2.48xlarge"),
    # serving
    ({"serving.namespace": "kube-system"}, "serving.namespace", "belongs to Kubernetes or an add-on"),
    ({"serving.namespace": "kube-public"}, "serving.namespace", "belongs to Kubernetes or an add-on"),
    ({"serving.namespace": "kube-node-lease"}, "serving.namespace", "belongs to Kubernetes or an add-on"),
    ({"serving.namespace": "kube-tools"}, "serving.namespace", "belongs to Kubernetes or an add-on"),
    ({"serving.namespace": "default"}, "serving.namespace", "belongs to Kubernetes or an add-on"),
    ({"serving.namespace": "amazon-cloudwatch"}, "serving.namespace", "belongs to Kubernetes or an add-on"),
    ({"serving.namespace": "neuron-healthcheck-system"}, "serving.namespace", "belongs to Kubernetes or an add-on"),
    ({"serving.namespace": "Spec_Decode"}, "serving.namespace", "is not a Kubernetes namespace name"),
    ({"serving.image": "public.ecr.aws/neuron/vllm:latest"}, "serving.image", "has a tag that moves"),
    ({"serving.image": "public.ecr.aws/neuron/vllm:stable"}, "serving.image", "has a tag that moves"),
    ({"serving.image": "public.ecr.aws/neuron/vllm"}, "serving.image", "pinned by tag or digest"),
    ({"serving.image": "vllm:0.9.1"}, "serving.image", "pinned by tag or digest"),
    ({"serving.aws_cli_image": "public.ecr.aws/aws-cli/aws-cli:latest"}, "serving.aws_cli_image", "has a tag that moves"),
    ({"serving.aws_cli_image": "public.ecr.aws/aws-cli/aws-cli"}, "serving.aws_cli_image", "pinned by tag or digest"),
    ({"serving.target_model": "qwen3"}, "serving.target_model", "is not a Hugging Face model id"),
    ({"serving.draft_model": "meta-llama/Llama-3.2-1B"}, "serving.draft_model", "must share the target's tokenizer"),
    ({"serving.tensor_parallel_size": 30}, "serving.tensor_parallel_size", "whole number of Neuron devices"),
    ({"serving.memory_gib_per_service": 8}, "serving.memory_gib_per_service", "allowed: 16 to 16384"),
    ({"serving.shm_gib": 0}, "serving.shm_gib", "must be at least 1"),
    ({"serving.max_model_len": 600}, "serving.max_model_len", "allowed: >= 664"),
    ({"serving.max_num_seqs": "four"}, "serving.max_num_seqs", "expected a whole number"),
    # benchmark
    ({"benchmark.output_tokens": 200000}, "benchmark.output_tokens", "allowed: 1 to 131072"),
    ({"benchmark.input_tokens": 0}, "benchmark.input_tokens", "allowed: 1 to 131072"),
    ({"benchmark.image": "public.ecr.aws/docker/library/python:latest"}, "benchmark.image", "has a tag that moves"),
    ({"benchmark.image": "public.ecr.aws/docker/library/python:slim"}, "benchmark.image", "has a tag that moves"),
    ({"benchmark.image": "python"}, "benchmark.image", "pinned by tag or digest"),
    ({"benchmark.max_consecutive_failures": -1}, "benchmark.max_consecutive_failures", "allowed: 0 to 100000"),
    (
        {"benchmark.engine": "llmperf", "benchmark.max_consecutive_failures": 3},
        "benchmark.max_consecutive_failures",
        "has no effect: only the native engine has a circuit breaker",
    ),
    # add-ons
    ({"addons.neuron_scheduler_image": f"{SCHEDULER}:v1.31.0"}, "addons.neuron_scheduler_image", "is kube-scheduler 1.31, outside"),
    ({"addons.neuron_scheduler_image": f"{SCHEDULER}:v1.33.5"}, "addons.neuron_scheduler_image", "allowed: a kube-scheduler tag v1.34.x"),
    ({"addons.neuron_scheduler_image": f"{SCHEDULER}:v1.36.0"}, "addons.neuron_scheduler_image", "is kube-scheduler 1.36, outside"),
    ({"cluster.kubernetes_version": "1.34"}, "addons.neuron_scheduler_image", "n/a"),  # replaced below
    ({"addons.neuron_scheduler_image": f"{SCHEDULER}:latest"}, "addons.neuron_scheduler_image", "has a tag that moves"),
    ({"addons.neuron_scheduler_image": f"{SCHEDULER}:build-7"}, "addons.neuron_scheduler_image", "names no Kubernetes version"),
    ({"addons.neuron_scheduler_image": f"{SCHEDULER}@sha256:" + "a" * 64}, "addons.neuron_scheduler_image", "pinned by tag"),
    ({"addons.neuron_helm_chart_version": "latest"}, "addons.neuron_helm_chart_version", "helm pull needs one"),
    ({"addons.mountpoint_s3_csi_version": "2.0"}, "addons.mountpoint_s3_csi_version", "is not an EKS add-on version"),
    # data
    ({"data.log_retention_days": 10}, "data.log_retention_days", "retention period"),
]
# A scheduler pinned for 1.35 does not run with a 1.36 cluster (one minor version behind at most
# going forward, never ahead): the explicit image is checked against the cluster version.
BAD = [case for case in BAD if case[2] != "n/a"] + [
    (
        {"cluster.kubernetes_version": "1.34", "addons.neuron_scheduler_image": f"{SCHEDULER}:v1.35.0"},
        "addons.neuron_scheduler_image",
        "outside the version skew supported with Kubernetes 1.34",
    ),
]


def problems_of(context: dict[str, object]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_config(context, {})
    return [str(p) for p in err.value.problems]


def test_the_table_is_wide():
    assert len(BAD) >= 100


@pytest.mark.parametrize("context, key, phrase", BAD, ids=[f"{k}:{i}" for i, (_, k, _) in enumerate(BAD)])
def test_each_bad_setting_gives_exactly_one_line_naming_its_field(context, key, phrase):
    found = problems_of(context)
    assert len(found) == 1, found
    assert found[0].startswith(f"{key}=") and phrase in found[0], found[0]


def test_the_cli_shows_one_line_per_bad_setting():
    """What app.py prints: 'config error: ' and the problem, one line each."""
    with pytest.raises(ConfigError) as err:
        load_config({"neuron_nodes.max_size": 0, "servings.image": "x"}, {})
    assert str(err.value).splitlines() == [
        "config error: servings.image='x': is not a setting (there is no section 'servings'); allowed: did you mean serving.image?",
        "config error: neuron_nodes.max_size=0: is out of range; allowed: 1 to 64",
    ]


GOOD: list[dict[str, object]] = [
    {"system_nodes.instance_type": "c7a.large"},  # AMD, x86_64
    {"system_nodes.instance_type": "m7i-flex.xlarge"},
    {"cluster.public_access_cidrs": "198.51.100.7/32,203.0.113.0/24"},
    {"cluster.require_restricted_endpoint": "true", "cluster.public_access_cidrs": "198.51.100.7/32"},
    {"cluster.require_restricted_endpoint": "true", "cluster.endpoint_access": "private"},
    {"cluster.endpoint_access": "private", "cluster.public_access_cidrs": ""},
    {"cluster.admin_principal_arns": f"{ARN},arn:aws:iam::123456789012:user/alice"},
    {"addons.neuron_scheduler_image": f"{SCHEDULER}:v1.34.2"},
    {"addons.neuron_scheduler_image": "public.ecr.aws/eks-distro/kubernetes/kube-scheduler:v1.35.0-eks-1-35-3"},
    {"cluster.kubernetes_version": "1.36"},  # the derived scheduler image follows
    {"serving.namespace": "specdecode-dev"},
    {"serving.image": "123456789012.dkr.ecr.us-east-2.amazonaws.com/vllm@sha256:" + "a" * 64},
    {"network.vpc_cidr": "10.40.0.0/20", "env.availability_zones": "us-east-2a,us-east-2b,us-east-2c"},
    {"network.vpc_cidr": "100.64.0.0/16"},  # AWS allows the shared range as a VPC CIDR
    {"neuron_nodes.root_volume_iops": 4000, "neuron_nodes.root_volume_throughput_mibps": 1000},
]


@pytest.mark.parametrize("context", GOOD)
def test_good_values_pass(context):
    load_config(context, {})


# --- the sources the rules follow ---------------------------------------------------------------


def test_the_instance_type_list_is_the_installed_botocore_list():
    """config/ec2_instance_types.json is what `python -m config.ec2` writes from the pinned botocore."""
    import botocore

    data = json.loads(ec2.DATA.read_text())
    assert data["families"] == ec2.from_botocore(), "stale: run `python -m config.ec2`"
    assert data["source"] == f"the EC2 API's InstanceType enum in botocore {botocore.__version__}"
    assert {"m7i.xlarge", "trn2.48xlarge", "trn1.32xlarge"} <= ec2.instance_types()


def test_architecture_rule_agrees_with_aws_cdk_lib():
    """One type per family: the pure rule equals aws-cdk-lib's InstanceType.architecture."""
    from aws_cdk import aws_ec2

    families = json.loads(ec2.DATA.read_text())["families"]
    names = [f"{family}.{sizes[0]}" for family, sizes in families.items()]
    parsed = [name for name in names if ec2.architecture(name) != "unknown"]
    assert len(parsed) > 180  # mac-m4, u-6tb1, p6-b200...: names outside the naming scheme
    cdk = {name: aws_ec2.InstanceType(name).architecture.value for name in parsed}
    ours = {name: {"arm64": "ARM_64", "x86_64": "X86_64"}[ec2.architecture(name)] for name in parsed}
    assert ours == cdk


@pytest.mark.parametrize("cidr, azs", [("10.40.0.0/16", 3), ("10.40.0.0/20", 2), ("10.40.0.0/18", 4)])
def test_subnet_allocation_is_the_one_aws_cdk_makes(cidr, azs):
    from aws_cdk import App, Environment, Stack
    from aws_cdk import aws_logs as logs

    from stacks.network import Network, NetworkProps

    zones = tuple(f"us-east-2{letter}" for letter in "abcd"[:azs])
    stack = Stack(App(), "S", env=Environment(account="123456789012", region="us-east-2"))
    expected = subnets.allocate(cidr, azs)
    if expected is None:
        with pytest.raises(RuntimeError, match="exceeds remaining space"):
            Network(stack, "N", NetworkProps(cidr, zones, 1, logs.RetentionDays.ONE_MONTH))
        return
    vpc = Network(stack, "N", NetworkProps(cidr, zones, 1, logs.RetentionDays.ONE_MONTH)).vpc
    assert [s.ipv4_cidr_block for s in vpc.public_subnets + vpc.private_subnets] == expected


def test_max_azs_of_the_layout():
    assert [subnets.max_azs(f"10.40.0.0/{prefix}") for prefix in (16, 18, 20)] == [3, 3, 3]


def test_system_nodes_run_the_ami_type_the_rule_assumes(platform):
    groups = [r["Properties"] for r in platform["Resources"].values() if r["Type"] == "AWS::EKS::Nodegroup"]
    system = [g for g in groups if g.get("Labels", {}).get(layout.NODE_POOL_LABEL) == layout.SYSTEM_POOL]
    assert [g["AmiType"] for g in system] == [catalog.SYSTEM_NODE_AMI_TYPE]


# --- the open endpoint: a warning by default, an error in the strict posture --------------------


def test_default_endpoint_is_warned_about_once():
    assert config_warnings(load_config({}, {})) == [
        "cluster.public_access_cidrs=0.0.0.0/0: the public API endpoint accepts any address (only IAM authentication "
        "guards it); restrict it with -c cluster.public_access_cidrs=<your CIDR>/32 or use -c cluster.endpoint_access=private "
        '(README, "API endpoint access")'
    ]


@pytest.mark.parametrize(
    "context",
    [{"cluster.public_access_cidrs": "198.51.100.7/32"}, {"cluster.endpoint_access": "private"}],
)
def test_restricted_or_private_endpoint_is_not_warned_about(context):
    assert config_warnings(load_config(context, {})) == []


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    """app.py, imported by the tests that run it: it imports aws_cdk (seconds of jsii start-up),
    which at module level every xdist worker would pay while collecting (issue 24)."""
    import app

    return app


def test_synth_prints_the_warning_on_stderr_and_still_succeeds(app, monkeypatch, capsys, tmp_path):
    class _AppWithoutSynth(app.App):
        """The stacks are not what these tests are about; even an empty App takes seconds to synth."""

        def synth(self, **_kwargs):
            return None

    built = []
    monkeypatch.setattr(app, "build_app", lambda _app, config: built.append(config))
    monkeypatch.setattr(app, "App", _AppWithoutSynth)
    assert app.main(["--outdir", str(tmp_path)]) == 0
    assert len(built) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("config")]
    assert lines == [f"config warning: {config_warnings(built[0])[0]}"]
    assert app.main(["--outdir", str(tmp_path), "-c", "cluster.public_access_cidrs=198.51.100.7/32"]) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("config")] == []


def test_strict_posture_stops_synth_with_one_line(app, capsys, tmp_path):
    assert app.main(["--outdir", str(tmp_path), "-c", "cluster.require_restricted_endpoint=true"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line for line in lines if line.startswith("config")] == [
        "config error: cluster.public_access_cidrs='0.0.0.0/0': opens the API endpoint to the whole internet, refused by "
        "cluster.require_restricted_endpoint=true; allowed: your own CIDRs (e.g. 198.51.100.7/32), or cluster.endpoint_access=private"
    ]
