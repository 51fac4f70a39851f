"""The configuration rules to the letter: every numeric limit at the limit (accepted) and one past
(refused with its exact line), and the full line of each bad setting of tests/test_config_rules.py's
table, so a changed bound, a changed number in a hint or a garbled message fails a test (found by
`make mutation`). Quick: nothing here synthesizes or imports the CDK app."""

from __future__ import annotations

import pytest

from config import ConfigError, load_config, subnets
from config.errors import Problem, echo, one_line_each


def lines(context: dict[str, object]) -> list[str]:
    """The problem lines the context gives (none when it loads)."""
    try:
        load_config(context, {})
    except ConfigError as err:
        return [str(p) for p in err.problems]
    return []


# (setting, lowest, highest, other settings the extremes need to stay clear of other rules)
RANGES: list[tuple[str, int, int, dict[str, object]]] = [
    ("system_nodes.max_size", 1, 20, {"system_nodes.min_size": 1, "system_nodes.desired_size": 1}),
    ("system_nodes.disk_size_gib", 20, 1000, {}),
    ("neuron_nodes.max_size", 1, 64, {"neuron_nodes.min_size": 0, "neuron_nodes.desired_size": 0}),
    ("neuron_nodes.root_volume_gib", 100, 16384, {}),
    ("neuron_nodes.root_volume_iops", 3000, 16000, {}),
    ("neuron_nodes.root_volume_throughput_mibps", 125, 1000, {"neuron_nodes.root_volume_iops": 4000}),
    ("serving.max_num_seqs", 1, 256, {}),
    ("serving.max_model_len", 128, 131072, {"benchmark.input_tokens": 64, "benchmark.output_tokens": 64}),
    ("serving.memory_gib_per_service", 16, 16384, {"serving.shm_gib": 8}),
    ("serving.startup_timeout_minutes", 5, 1440, {}),
    ("benchmark.input_tokens", 1, 131072, {"serving.max_model_len": 131072, "serving.max_num_seqs": 1, "benchmark.output_tokens": 1}),
    ("benchmark.output_tokens", 1, 131072, {"serving.max_model_len": 131072, "serving.max_num_seqs": 1, "benchmark.input_tokens": 1}),
    ("benchmark.concurrent_requests", 1, 1024, {}),
    ("benchmark.requests_per_test_case", 1, 100000, {}),
    ("benchmark.seed", 0, 2**32 - 1, {}),
    ("benchmark.request_timeout_seconds", 10, 7200, {}),
    ("benchmark.cpu", 1, 16, {}),
    ("benchmark.memory_gib", 1, 64, {}),
    ("benchmark.ttl_after_finished_hours", 1, 720, {}),
    ("results.refresh_minutes", 1, 1440, {}),
    ("results.lookback_hours", 1, 360, {}),
    ("results.bootstrap_resamples", 100, 100000, {}),
]


@pytest.mark.parametrize(("key", "low", "high", "context"), RANGES, ids=[r[0] for r in RANGES])
def test_range_accepts_its_limits_and_refuses_one_past(key: str, low: int, high: int, context: dict[str, object]) -> None:
    for limit in (low, high):  # a limit may break another rule (memory to fit a node), never its range
        assert [line for line in lines({**context, key: limit}) if line.startswith(f"{key}={limit}: is out of range")] == []
    for past in (low - 1, high + 1):
        assert lines({**context, key: past}) == [f"{key}={past}: is out of range; allowed: {low} to {high}"]


def test_speculative_tokens_limits() -> None:
    assert lines({"serving.num_speculative_tokens": 1}) == lines({"serving.num_speculative_tokens": 15}) == []
    assert lines({"serving.num_speculative_tokens": 16}) == ["serving.num_speculative_tokens=16: is out of range; allowed: 1 to 15"]
    assert lines({"serving.num_speculative_tokens": -1}) == ["serving.num_speculative_tokens=-1: is out of range; allowed: 1 to 15"]
    assert lines({"serving.num_speculative_tokens": 0}) == [
        "serving.num_speculative_tokens=0: is missing: the draft model Qwen/Qwen3-1.7B needs a number of tokens to propose; allowed: 1 to 15"
    ]


# (settings, the exact lines they give): each limit at the limit and one past, and the cases the
# issue found untested (a Service name starting with a digit, a bad extra variant before a good one).
CASES: list[tuple[dict[str, object], list[str]]] = [
    ({"benchmark.temperature": 0.0}, []),
    ({"benchmark.temperature": 2.0}, []),
    ({"benchmark.temperature": 2.000001}, ["benchmark.temperature=2.000001: is out of range; allowed: 0.0 to 2.0"]),
    ({"benchmark.temperature": -1e-06}, ["benchmark.temperature=-1e-06: is out of range; allowed: 0.0 to 2.0"]),
    ({"results.draft_cost_ratio": 1e-06}, []),
    ({"results.draft_cost_ratio": 0.999999}, []),
    ({"results.draft_cost_ratio": 0.0}, ["results.draft_cost_ratio=0.0: is out of range; allowed: greater than 0.0 and less than 1.0"]),
    ({"results.draft_cost_ratio": 1.0}, ["results.draft_cost_ratio=1.0: is out of range; allowed: greater than 0.0 and less than 1.0"]),
    ({"network.vpc_cidr": "10.40.0.0/16"}, []),
    ({"network.vpc_cidr": "10.40.0.0/20", "env.availability_zones": "us-east-2a,us-east-2b"}, []),
    ({"network.vpc_cidr": "10.40.0.0/15"}, ["network.vpc_cidr='10.40.0.0/15': leaves too few pod IPs; allowed: /16 to /20"]),
    ({"network.vpc_cidr": "10.40.0.0/21"}, ["network.vpc_cidr='10.40.0.0/21': leaves too few pod IPs; allowed: /16 to /20"]),
    ({"network.nat_gateways": 1}, []),
    ({"network.nat_gateways": 3}, []),
    ({"system_nodes.min_size": 1, "system_nodes.desired_size": 1}, []),
    (
        {"system_nodes.min_size": 0, "system_nodes.desired_size": 0},
        ["system_nodes.min_size=0: leaves CoreDNS and the add-ons nowhere to run; allowed: >= 1"],
    ),
    ({"system_nodes.min_size": -1}, ["system_nodes.min_size=-1: is negative; allowed: 0 to max_size=3"]),
    ({"system_nodes.min_size": 3, "system_nodes.max_size": 3, "system_nodes.desired_size": 3}, []),
    (
        {"system_nodes.min_size": 3, "system_nodes.max_size": 2, "system_nodes.desired_size": 2},
        ["system_nodes.min_size=3: is above max_size=2; allowed: 0 <= min_size <= desired_size <= max_size"],
    ),
    (
        {"system_nodes.desired_size": 5, "system_nodes.max_size": 4},
        ["system_nodes.desired_size=5: must lie between min_size=2 and max_size=4; allowed: 0 <= min_size <= desired_size <= max_size"],
    ),
    (
        {"system_nodes.desired_size": 0, "system_nodes.min_size": 1},
        ["system_nodes.desired_size=0: must lie between min_size=1 and max_size=3; allowed: 0 <= min_size <= desired_size <= max_size"],
    ),
    ({"serving.shm_gib": 1}, []),
    ({"serving.shm_gib": 63, "serving.memory_gib_per_service": 64}, []),
    ({"serving.shm_gib": 0}, ["serving.shm_gib=0: must be at least 1 and below serving.memory_gib_per_service; allowed: 1 to 899"]),
    (
        {"serving.shm_gib": 64, "serving.memory_gib_per_service": 64},
        ["serving.shm_gib=64: must be at least 1 and below serving.memory_gib_per_service; allowed: 1 to 63"],
    ),
    ({"neuron_nodes.root_volume_iops": 4000, "neuron_nodes.root_volume_throughput_mibps": 1000}, []),
    (
        {"neuron_nodes.root_volume_iops": 3999, "neuron_nodes.root_volume_throughput_mibps": 1000},
        [
            "neuron_nodes.root_volume_throughput_mibps=1000: exceeds gp3's 0.25 MiB/s per provisioned IOPS (3999 IOPS allow 999); "
            "allowed: <= 999, or neuron_nodes.root_volume_iops >= 4000"
        ],
    ),
    ({"serving.baseline_service": "a" * 63}, []),
    (
        {"serving.baseline_service": "a" * 64},
        [
            f"serving.baseline_service='{'a' * 64}': is not a Kubernetes Service name; allowed: 1-63 lowercase letters, digits or '-', "
            "starting and ending alphanumeric, starting with a letter"
        ],
    ),
    (
        {"serving.baseline_service": "1qwen"},
        [
            "serving.baseline_service='1qwen': is not a Kubernetes Service name; allowed: 1-63 lowercase letters, digits or '-', "
            "starting and ending alphanumeric, starting with a letter"
        ],
    ),
    (
        {"serving.speculative_service": "qwen-"},
        [
            "serving.speculative_service='qwen-': is not a Kubernetes Service name; allowed: 1-63 lowercase letters, digits or '-', "
            "starting and ending alphanumeric, starting with a letter"
        ],
    ),
    (
        {"serving.extra_speculative_variants": "bad,qwen-sd-k4:Qwen/Qwen3-1.7B:4"},
        [
            "serving.extra_speculative_variants='bad': is not NAME:SPECULATOR:K; allowed: NAME:SPECULATOR:K, e.g. qwen-sd-k5:Qwen/Qwen3-1.7B:5"
        ],
    ),
    (
        {"serving.extra_speculative_variants": "qwen-sd-k4:Qwen/Qwen3-1.7B:16,qwen-sd-k5:Qwen/Qwen3-1.7B:5"},
        ["serving.extra_speculative_variants=16: is out of range; allowed: 1 to 15"],
    ),
    ({"cluster.name": "a" * 100}, []),
    ({"cluster.name": "1abc"}, []),
    (
        {"cluster.name": "a" * 101},
        [
            f"cluster.name={echo('a' * 101)}: is not a valid EKS cluster name; allowed: 1-100 letters, digits, '-' or '_', starting alphanumeric"
        ],
    ),
    ({"results.dashboard_name": "a" * 255}, []),
    (
        {"results.dashboard_name": "a" * 256},
        [f"results.dashboard_name={echo('a' * 256)}: is not a CloudWatch dashboard name; allowed: 1-255 of A-Z a-z 0-9 - _"],
    ),
    (
        {"cluster.admin_principal_arns": "arn:aws:iam::123456789012:role/A,arn:aws:iam::123456789012:role/a"},
        [
            "cluster.admin_principal_arns='arn:aws:iam::123456789012:role/a': names the same principal twice; allowed: each role or user once"
        ],
    ),
    (
        {"cluster.admin_principal_arns": "arn:aws:sts::123456789012:assumed-role/A/s"},
        [
            "cluster.admin_principal_arns='arn:aws:sts::123456789012:assumed-role/A/s': is not an IAM role or user ARN (use the role's ARN, "
            "not an assumed-role session); allowed: arn:aws:iam::<12 digits>:role/<name> or :user/<name>"
        ],
    ),
]


@pytest.mark.parametrize(("context", "expected"), CASES)
def test_exact_lines_at_and_past_the_limits(context: dict[str, object], expected: list[str]) -> None:
    assert lines(context) == expected


# The full line of each bad setting of tests/test_config_rules.py's table (which checks a phrase of it).
MESSAGES: list[tuple[dict[str, object], str]] = [
    (
        {"neuron_node.max_size": 2},
        "neuron_node.max_size=2: is not a setting (there is no section 'neuron_node'); allowed: did you mean neuron_nodes.max_size?",
    ),
    (
        {"servings.image": "x"},
        "servings.image='x': is not a setting (there is no section 'servings'); allowed: did you mean serving.image?",
    ),
    ({"clustr.name": "x"}, "clustr.name='x': is not a setting (there is no section 'clustr'); allowed: did you mean cluster.name?"),
    (
        {"serving.tensor_paralel_size": 32},
        "serving.tensor_paralel_size=32: is not a setting; allowed: did you mean serving.tensor_parallel_size?",
    ),
    (
        {"neuron_nodes": {"max_size": 2}},
        "neuron_nodes={'max_size': 2}: is a section, not a setting; allowed: one key per field, e.g. neuron_nodes.instance_type",
    ),
    ({"env.account": "12345"}, "env.account='12345': is not an AWS account id; allowed: 12 digits"),
    ({"env.account": "abcdefghijkl"}, "env.account='abcdefghijkl': is not an AWS account id; allowed: 12 digits"),
    ({"env.region": "Ohio"}, "env.region='Ohio': is not an AWS region name; allowed: e.g. us-east-2"),
    ({"env.region": "us-east-2x"}, "env.region='us-east-2x': is not an AWS region name; allowed: e.g. us-east-2"),
    (
        {"env.availability_zones": "us-east-2a"},
        "env.availability_zones='us-east-2a': EKS needs subnets in at least two AZs; allowed: 2 or more distinct AZs",
    ),
    (
        {"env.availability_zones": "us-east-2a,us-east-2a"},
        "env.availability_zones='us-east-2a,us-east-2a': EKS needs subnets in at least two AZs; allowed: 2 or more distinct AZs",
    ),
    (
        {"env.availability_zones": "us-east-2a,us-west-2b"},
        "env.availability_zones='us-west-2b': is not an availability zone of us-east-2; allowed: us-east-2a, us-east-2b, ...",
    ),
    (
        {"env.availability_zones": "us-east-2a,us-east-2b,us-east-2c,us-east-2d"},
        "env.availability_zones='us-east-2a,us-east-2b,us-east-2c,us-east-2d': needs a /22 public and a /18 private subnet per AZ, more than network.vpc_cidr=10.40.0.0/16 holds (each private subnet takes a quarter of it); allowed: at most 3 AZs",
    ),
    (
        {"env.availability_zones": "us-east-2a,us-east-2b,us-east-2c,us-east-2d,us-east-2e,us-east-2f"},
        "env.availability_zones='us-east-2a,us-east-2b,us-east-2c,us-east-2d,us-east-2e,us-east-2f': needs a /22 public and a /18 private subnet per AZ, more than network.vpc_cidr=10.40.0.0/16 holds (each private subnet takes a quarter of it); allowed: at most 3 AZs",
    ),
    (
        {"env.availability_zones": "us-east-2a,us-east-2b,us-east-2c,us-east-2d", "network.vpc_cidr": "10.40.0.0/20"},
        "env.availability_zones='us-east-2a,us-east-2b,us-east-2c,us-east-2d': needs a /26 public and a /22 private subnet per AZ, more than network.vpc_cidr=10.40.0.0/20 holds (each private subnet takes a quarter of it); allowed: at most 3 AZs",
    ),
    ({"network.vpc_cidr": "10.0.0.300/16"}, "network.vpc_cidr='10.0.0.300/16': is not an IPv4 CIDR; allowed: e.g. 10.40.0.0/16"),
    (
        {"network.vpc_cidr": "10.40.0.1/16"},
        "network.vpc_cidr='10.40.0.1/16': has host bits set (the address is not the first of its /16); allowed: the network itself: 10.40.0.0/16",
    ),
    ({"network.vpc_cidr": "10.0.0.0/24"}, "network.vpc_cidr='10.0.0.0/24': leaves too few pod IPs; allowed: /16 to /20"),
    ({"network.vpc_cidr": "10.0.0.0/8"}, "network.vpc_cidr='10.0.0.0/8': leaves too few pod IPs; allowed: /16 to /20"),
    (
        {"network.vpc_cidr": "224.1.0.0/16"},
        "network.vpc_cidr='224.1.0.0/16': overlaps the multicast range (RFC 5771); allowed: a private range such as 10.40.0.0/16",
    ),
    (
        {"network.vpc_cidr": "127.0.0.0/16"},
        "network.vpc_cidr='127.0.0.0/16': overlaps the loopback range (RFC 1122); allowed: a private range such as 10.40.0.0/16",
    ),
    (
        {"network.vpc_cidr": "169.254.0.0/16"},
        "network.vpc_cidr='169.254.0.0/16': overlaps the link-local range (RFC 3927); allowed: a private range such as 10.40.0.0/16",
    ),
    (
        {"network.vpc_cidr": "240.0.0.0/16"},
        "network.vpc_cidr='240.0.0.0/16': overlaps the reserved range (RFC 1112); allowed: a private range such as 10.40.0.0/16",
    ),
    (
        {"network.vpc_cidr": "0.0.0.0/16"},
        "network.vpc_cidr='0.0.0.0/16': overlaps the 'this network' range (RFC 1122); allowed: a private range such as 10.40.0.0/16",
    ),
    ({"network.nat_gateways": 0}, "network.nat_gateways=0: is out of range; allowed: 1 to 3"),
    ({"network.nat_gateways": 4}, "network.nat_gateways=4: is out of range; allowed: 1 to 3"),
    (
        {"cluster.name": "-bad"},
        "cluster.name='-bad': is not a valid EKS cluster name; allowed: 1-100 letters, digits, '-' or '_', starting alphanumeric",
    ),
    (
        {"cluster.kubernetes_version": "1.30"},
        "cluster.kubernetes_version='1.30': is not supported by the pinned kubectl layer (v1.35); allowed: 1.34, 1.35, 1.36",
    ),
    (
        {"cluster.kubernetes_version": "abc"},
        "cluster.kubernetes_version='abc': is not supported by the pinned kubectl layer (v1.35); allowed: 1.34, 1.35, 1.36",
    ),
    (
        {"cluster.endpoint_access": "public"},
        "cluster.endpoint_access='public': is not an endpoint mode; allowed: public-and-private, private",
    ),
    (
        {"cluster.public_access_cidrs": "10.0.0.0/33"},
        "cluster.public_access_cidrs='10.0.0.0/33': is not an IPv4 CIDR (an IPv4 cluster takes no IPv6 ones); allowed: e.g. 198.51.100.0/24",
    ),
    (
        {"cluster.public_access_cidrs": "::/0"},
        "cluster.public_access_cidrs='::/0': is not an IPv4 CIDR (an IPv4 cluster takes no IPv6 ones); allowed: e.g. 198.51.100.0/24",
    ),
    (
        {"cluster.public_access_cidrs": "224.0.0.0/4"},
        "cluster.public_access_cidrs='224.0.0.0/4': overlaps the multicast range (RFC 5771), which no client on the internet has; allowed: public IPv4 CIDRs",
    ),
    (
        {"cluster.public_access_cidrs": "240.0.0.0/4"},
        "cluster.public_access_cidrs='240.0.0.0/4': overlaps the reserved range (RFC 1112), which no client on the internet has; allowed: public IPv4 CIDRs",
    ),
    (
        {"cluster.public_access_cidrs": "127.0.0.1/32"},
        "cluster.public_access_cidrs='127.0.0.1/32': overlaps the loopback range (RFC 1122), which no client on the internet has; allowed: public IPv4 CIDRs",
    ),
    (
        {"cluster.public_access_cidrs": "169.254.169.254/32"},
        "cluster.public_access_cidrs='169.254.169.254/32': overlaps the link-local range (RFC 3927), which no client on the internet has; allowed: public IPv4 CIDRs",
    ),
    (
        {"cluster.public_access_cidrs": "10.0.0.0/8"},
        "cluster.public_access_cidrs='10.0.0.0/8': is a private range (RFC 1918): it never reaches the public endpoint (in-VPC clients use the private one); allowed: public IPv4 CIDRs",
    ),
    (
        {"cluster.public_access_cidrs": "192.168.1.0/24"},
        "cluster.public_access_cidrs='192.168.1.0/24': is a private range (RFC 1918): it never reaches the public endpoint (in-VPC clients use the private one); allowed: public IPv4 CIDRs",
    ),
    (
        {"cluster.public_access_cidrs": "100.64.0.0/10"},
        "cluster.public_access_cidrs='100.64.0.0/10': is the carrier-grade NAT range (RFC 6598): it never reaches the public endpoint (in-VPC clients use the private one); allowed: public IPv4 CIDRs",
    ),
    (
        {"cluster.public_access_cidrs": "198.51.100.7/32,10.1.0.0/16"},
        "cluster.public_access_cidrs='10.1.0.0/16': is a private range (RFC 1918): it never reaches the public endpoint (in-VPC clients use the private one); allowed: public IPv4 CIDRs",
    ),
    (
        {"cluster.public_access_cidrs": ""},
        "cluster.public_access_cidrs='': is empty while the public endpoint is on; allowed: one or more CIDRs, or cluster.endpoint_access=private",
    ),
    (
        {"cluster.require_restricted_endpoint": "true"},
        "cluster.public_access_cidrs='0.0.0.0/0': opens the API endpoint to the whole internet, refused by cluster.require_restricted_endpoint=true; allowed: your own CIDRs (e.g. 198.51.100.7/32), or cluster.endpoint_access=private",
    ),
    (
        {"cluster.require_restricted_endpoint": "yes", "cluster.public_access_cidrs": "198.51.100.7/32,::/0"},
        "cluster.public_access_cidrs='::/0': opens the API endpoint to the whole internet, refused by cluster.require_restricted_endpoint=true; allowed: your own CIDRs (e.g. 198.51.100.7/32), or cluster.endpoint_access=private",
    ),
    ({"cluster.require_restricted_endpoint": "strict"}, "cluster.require_restricted_endpoint='strict': expected true or false"),
    (
        {"cluster.admin_principal_arns": "arn:aws:iam::123456789012:role/Admin,arn:aws:iam::123456789012:role/Admin"},
        "cluster.admin_principal_arns='arn:aws:iam::123456789012:role/Admin': names the same principal twice; allowed: each role or user once",
    ),
    (
        {"cluster.admin_principal_arns": "arn:aws:iam::123456789012:role/Admin,arn:aws:iam::123456789012:role/admin"},
        "cluster.admin_principal_arns='arn:aws:iam::123456789012:role/admin': names the same principal twice; allowed: each role or user once",
    ),
    (
        {"cluster.admin_principal_arns": "arn:aws:sts::123456789012:assumed-role/Admin/me"},
        "cluster.admin_principal_arns='arn:aws:sts::123456789012:assumed-role/Admin/me': is not an IAM role or user ARN (use the role's ARN, not an assumed-role session); allowed: arn:aws:iam::<12 digits>:role/<name> or :user/<name>",
    ),
    (
        {"system_nodes.instance_type": "m7g.xlarge"},
        "system_nodes.instance_type='m7g.xlarge': is arm64, but the system nodes run the AL2023_x86_64_STANDARD AMI; allowed: an x86_64 type such as m7i.xlarge (no Graviton 'g' in the family)",
    ),
    (
        {"system_nodes.instance_type": "c7gn.large"},
        "system_nodes.instance_type='c7gn.large': is arm64, but the system nodes run the AL2023_x86_64_STANDARD AMI; allowed: an x86_64 type such as m7i.xlarge (no Graviton 'g' in the family)",
    ),
    (
        {"system_nodes.instance_type": "a1.large"},
        "system_nodes.instance_type='a1.large': is arm64, but the system nodes run the AL2023_x86_64_STANDARD AMI; allowed: an x86_64 type such as m7i.xlarge (no Graviton 'g' in the family)",
    ),
    (
        {"system_nodes.instance_type": "t4g.medium"},
        "system_nodes.instance_type='t4g.medium': is arm64, but the system nodes run the AL2023_x86_64_STANDARD AMI; allowed: an x86_64 type such as m7i.xlarge (no Graviton 'g' in the family)",
    ),
    (
        {"system_nodes.instance_type": "m7i.xlarg"},
        "system_nodes.instance_type='m7i.xlarg': is not an EC2 instance type (not in the EC2 API's InstanceType enum in botocore 1.44.8); allowed: did you mean m7i.xlarge or m7i.8xlarge or m7i.4xlarge?",
    ),
    (
        {"system_nodes.instance_type": "m9i.xlarge"},
        "system_nodes.instance_type='m9i.xlarge': is not an EC2 instance type (not in the EC2 API's InstanceType enum in botocore 1.44.8); allowed: did you mean m9g.xlarge or m8i.xlarge or m7i.xlarge?",
    ),
    (
        {"system_nodes.instance_type": "xlarge"},
        "system_nodes.instance_type='xlarge': is not an EC2 instance type (not in the EC2 API's InstanceType enum in botocore 1.44.8); allowed: did you mean x8i.large or x8g.large or t3.xlarge?",
    ),
    (
        {"system_nodes.instance_type": "M7I.XLARGE"},
        "system_nodes.instance_type='M7I.XLARGE': is not an EC2 instance type (not in the EC2 API's InstanceType enum in botocore 1.44.8); allowed: an EC2 instance type, family.size, e.g. m7i.xlarge",
    ),
    (
        {"system_nodes.instance_type": "trn2.48xlarge"},
        "system_nodes.instance_type='trn2.48xlarge': is an accelerator instance; the system group runs add-ons; allowed: a general-purpose type such as m7i.xlarge",
    ),
    (
        {"system_nodes.instance_type": "p5.48xlarge"},
        "system_nodes.instance_type='p5.48xlarge': is an accelerator instance; the system group runs add-ons; allowed: a general-purpose type such as m7i.xlarge",
    ),
    ({"system_nodes.max_size": 0}, "system_nodes.max_size=0: is out of range; allowed: 1 to 20"),
    ({"system_nodes.min_size": 0}, "system_nodes.min_size=0: leaves CoreDNS and the add-ons nowhere to run; allowed: >= 1"),
    ({"system_nodes.min_size": 4}, "system_nodes.min_size=4: is above max_size=3; allowed: 0 <= min_size <= desired_size <= max_size"),
    (
        {"system_nodes.desired_size": 5},
        "system_nodes.desired_size=5: must lie between min_size=2 and max_size=3; allowed: 0 <= min_size <= desired_size <= max_size",
    ),
    ({"system_nodes.disk_size_gib": 10}, "system_nodes.disk_size_gib=10: is out of range; allowed: 20 to 1000"),
    (
        {"neuron_nodes.instance_type": "inf2.48xlarge"},
        "neuron_nodes.instance_type='inf2.48xlarge': is an accelerator but not Trainium; allowed: trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge",
    ),
    (
        {"neuron_nodes.instance_type": "trn9.huge"},
        "neuron_nodes.instance_type='trn9.huge': is not an EC2 instance type (not in the EC2 API's InstanceType enum in botocore 1.44.8); allowed: trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge",
    ),
    (
        {"neuron_nodes.instance_type": "trn2.48xlarg"},
        "neuron_nodes.instance_type='trn2.48xlarg': is not an EC2 instance type (not in the EC2 API's InstanceType enum in botocore 1.44.8); allowed: did you mean trn2.48xlarge or trn2.3xlarge?",
    ),
    (
        {"neuron_nodes.instance_type": "m7i.xlarge"},
        "neuron_nodes.instance_type='m7i.xlarge': is not a Trainium instance type whose Neuron shape is known; allowed: trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge",
    ),
    ({"neuron_nodes.max_size": 0}, "neuron_nodes.max_size=0: is out of range; allowed: 1 to 64"),
    ({"neuron_nodes.max_size": 65}, "neuron_nodes.max_size=65: is out of range; allowed: 1 to 64"),
    ({"neuron_nodes.min_size": -1}, "neuron_nodes.min_size=-1: is negative; allowed: 0 to max_size=1"),
    (
        {"neuron_nodes.desired_size": 3},
        "neuron_nodes.desired_size=3: must lie between min_size=0 and max_size=1; allowed: 0 <= min_size <= desired_size <= max_size",
    ),
    ({"neuron_nodes.root_volume_iops": 20000}, "neuron_nodes.root_volume_iops=20000: is out of range; allowed: 3000 to 16000"),
    (
        {"neuron_nodes.root_volume_iops": 3000, "neuron_nodes.root_volume_throughput_mibps": 1000},
        "neuron_nodes.root_volume_throughput_mibps=1000: exceeds gp3's 0.25 MiB/s per provisioned IOPS (3000 IOPS allow 750); allowed: <= 750, or neuron_nodes.root_volume_iops >= 4000",
    ),
    (
        {"neuron_nodes.root_volume_throughput_mibps": 2000},
        "neuron_nodes.root_volume_throughput_mibps=2000: is out of range; allowed: 125 to 1000",
    ),
    ({"neuron_nodes.root_volume_gib": 50}, "neuron_nodes.root_volume_gib=50: is out of range; allowed: 100 to 16384"),
    (
        {"neuron_nodes.capacity_mode": "spot"},
        "neuron_nodes.capacity_mode='spot': is not a capacity mode; allowed: on-demand, capacity-block, reservation",
    ),
    (
        {"neuron_nodes.capacity_mode": "reservation"},
        "neuron_nodes.capacity_reservation_id='': is required with capacity_mode=reservation; allowed: the reservation id, cr-<17 hex digits>",
    ),
    (
        {"neuron_nodes.availability_zone": "us-east-2d"},
        "neuron_nodes.availability_zone='us-east-2d': is not one of env.availability_zones; allowed: us-east-2a, us-east-2b, us-east-2c",
    ),
    ({"neuron_nodes.logical_nc_config": 3}, "neuron_nodes.logical_nc_config=3: is not supported on trn2.48xlarge; allowed: 1, 2"),
    (
        {"serving.namespace": "kube-system"},
        "serving.namespace='kube-system': belongs to Kubernetes or an add-on, and the app's namespace is deleted on destroy; allowed: a namespace of your own, not default, kube-system, kube-public, kube-node-lease, amazon-cloudwatch, neuron-healthcheck-system or kube-*",
    ),
    (
        {"serving.namespace": "kube-public"},
        "serving.namespace='kube-public': belongs to Kubernetes or an add-on, and the app's namespace is deleted on destroy; allowed: a namespace of your own, not default, kube-system, kube-public, kube-node-lease, amazon-cloudwatch, neuron-healthcheck-system or kube-*",
    ),
    (
        {"serving.namespace": "kube-node-lease"},
        "serving.namespace='kube-node-lease': belongs to Kubernetes or an add-on, and the app's namespace is deleted on destroy; allowed: a namespace of your own, not default, kube-system, kube-public, kube-node-lease, amazon-cloudwatch, neuron-healthcheck-system or kube-*",
    ),
    (
        {"serving.namespace": "kube-tools"},
        "serving.namespace='kube-tools': belongs to Kubernetes or an add-on, and the app's namespace is deleted on destroy; allowed: a namespace of your own, not default, kube-system, kube-public, kube-node-lease, amazon-cloudwatch, neuron-healthcheck-system or kube-*",
    ),
    (
        {"serving.namespace": "default"},
        "serving.namespace='default': belongs to Kubernetes or an add-on, and the app's namespace is deleted on destroy; allowed: a namespace of your own, not default, kube-system, kube-public, kube-node-lease, amazon-cloudwatch, neuron-healthcheck-system or kube-*",
    ),
    (
        {"serving.namespace": "amazon-cloudwatch"},
        "serving.namespace='amazon-cloudwatch': belongs to Kubernetes or an add-on, and the app's namespace is deleted on destroy; allowed: a namespace of your own, not default, kube-system, kube-public, kube-node-lease, amazon-cloudwatch, neuron-healthcheck-system or kube-*",
    ),
    (
        {"serving.namespace": "neuron-healthcheck-system"},
        "serving.namespace='neuron-healthcheck-system': belongs to Kubernetes or an add-on, and the app's namespace is deleted on destroy; allowed: a namespace of your own, not default, kube-system, kube-public, kube-node-lease, amazon-cloudwatch, neuron-healthcheck-system or kube-*",
    ),
    (
        {"serving.namespace": "Spec_Decode"},
        "serving.namespace='Spec_Decode': is not a Kubernetes namespace name; allowed: 1-63 lowercase letters, digits or '-', starting and ending alphanumeric",
    ),
    (
        {"serving.image": "public.ecr.aws/neuron/vllm:latest"},
        "serving.image='public.ecr.aws/neuron/vllm:latest': has a tag that moves (no version in it); allowed: a version tag or digest, registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"serving.image": "public.ecr.aws/neuron/vllm:stable"},
        "serving.image='public.ecr.aws/neuron/vllm:stable': has a tag that moves (no version in it); allowed: a version tag or digest, registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"serving.image": "public.ecr.aws/neuron/vllm"},
        "serving.image='public.ecr.aws/neuron/vllm': is not an image reference pinned by tag or digest; allowed: registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"serving.image": "vllm:0.9.1"},
        "serving.image='vllm:0.9.1': is not an image reference pinned by tag or digest; allowed: registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"serving.aws_cli_image": "public.ecr.aws/aws-cli/aws-cli:latest"},
        "serving.aws_cli_image='public.ecr.aws/aws-cli/aws-cli:latest': has a tag that moves (no version in it); allowed: a version tag or digest, registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"serving.aws_cli_image": "public.ecr.aws/aws-cli/aws-cli"},
        "serving.aws_cli_image='public.ecr.aws/aws-cli/aws-cli': is not an image reference pinned by tag or digest; allowed: registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"serving.target_model": "qwen3"},
        "serving.target_model='qwen3': is not a Hugging Face model id; allowed: <org>/<name>, e.g. Qwen/Qwen3-32B",
    ),
    (
        {"serving.draft_model": "meta-llama/Llama-3.2-1B"},
        "serving.draft_model='meta-llama/Llama-3.2-1B': is from family 'Llama-3' but the target Qwen/Qwen3-32B is 'Qwen3'; a draft must share the target's tokenizer; allowed: a smaller Qwen3 model",
    ),
    (
        {"serving.tensor_parallel_size": 30},
        "serving.tensor_parallel_size=30: is not a whole number of Neuron devices; allowed: a multiple of 4 up to 64 on trn2.48xlarge at LNC=2",
    ),
    ({"serving.memory_gib_per_service": 8}, "serving.memory_gib_per_service=8: is out of range; allowed: 16 to 16384"),
    ({"serving.shm_gib": 0}, "serving.shm_gib=0: must be at least 1 and below serving.memory_gib_per_service; allowed: 1 to 899"),
    (
        {"serving.max_model_len": 600},
        "serving.max_model_len=600: is shorter than benchmark input + output tokens (64 + 600); allowed: >= 664",
    ),
    ({"serving.max_num_seqs": "four"}, "serving.max_num_seqs='four': expected a whole number"),
    ({"benchmark.output_tokens": 200000}, "benchmark.output_tokens=200000: is out of range; allowed: 1 to 131072"),
    ({"benchmark.input_tokens": 0}, "benchmark.input_tokens=0: is out of range; allowed: 1 to 131072"),
    (
        {"benchmark.image": "public.ecr.aws/docker/library/python:latest"},
        "benchmark.image='public.ecr.aws/docker/library/python:latest': has a tag that moves (no version in it); allowed: a version tag or digest, registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"benchmark.image": "public.ecr.aws/docker/library/python:slim"},
        "benchmark.image='public.ecr.aws/docker/library/python:slim': has a tag that moves (no version in it); allowed: a version tag or digest, registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"benchmark.image": "python"},
        "benchmark.image='python': is not an image reference pinned by tag or digest; allowed: registry/repository:tag or registry/repository@sha256:<digest>",
    ),
    (
        {"addons.neuron_scheduler_image": "registry.k8s.io/kube-scheduler:v1.31.0"},
        "addons.neuron_scheduler_image='registry.k8s.io/kube-scheduler:v1.31.0': is kube-scheduler 1.31, outside the version skew supported with Kubernetes 1.35; allowed: a kube-scheduler tag v1.34.x or v1.35.x (at most one minor version behind cluster.kubernetes_version)",
    ),
    (
        {"addons.neuron_scheduler_image": "registry.k8s.io/kube-scheduler:v1.33.5"},
        "addons.neuron_scheduler_image='registry.k8s.io/kube-scheduler:v1.33.5': is kube-scheduler 1.33, outside the version skew supported with Kubernetes 1.35; allowed: a kube-scheduler tag v1.34.x or v1.35.x (at most one minor version behind cluster.kubernetes_version)",
    ),
    (
        {"addons.neuron_scheduler_image": "registry.k8s.io/kube-scheduler:v1.36.0"},
        "addons.neuron_scheduler_image='registry.k8s.io/kube-scheduler:v1.36.0': is kube-scheduler 1.36, outside the version skew supported with Kubernetes 1.35; allowed: a kube-scheduler tag v1.34.x or v1.35.x (at most one minor version behind cluster.kubernetes_version)",
    ),
    (
        {"addons.neuron_scheduler_image": "registry.k8s.io/kube-scheduler:latest"},
        "addons.neuron_scheduler_image='registry.k8s.io/kube-scheduler:latest': has a tag that moves (no version in it); allowed: a version tag or digest, registry/repository:tag",
    ),
    (
        {"addons.neuron_scheduler_image": "registry.k8s.io/kube-scheduler:build-7"},
        "addons.neuron_scheduler_image='registry.k8s.io/kube-scheduler:build-7': has a tag that names no Kubernetes version (vX.Y.Z); allowed: a kube-scheduler tag v1.34.x or v1.35.x (at most one minor version behind cluster.kubernetes_version)",
    ),
    (
        {
            "addons.neuron_scheduler_image": "registry.k8s.io/kube-scheduler@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        },
        f"addons.neuron_scheduler_image={echo('registry.k8s.io/kube-scheduler@sha256:' + 'a' * 64)}: "
        "is not an image reference pinned by tag; allowed: registry/repository:tag",
    ),
    (
        {"addons.neuron_helm_chart_version": "latest"},
        "addons.neuron_helm_chart_version='latest': is not a chart version (helm pull needs one); allowed: a published version such as 1.10.0",
    ),
    (
        {"addons.mountpoint_s3_csi_version": "2.0"},
        "addons.mountpoint_s3_csi_version='2.0': is not an EKS add-on version; allowed: v<major>.<minor>.<patch>-eksbuild.<n>",
    ),
    (
        {"data.log_retention_days": 10},
        "data.log_retention_days=10: is not a CloudWatch Logs retention period; allowed: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653",
    ),
    (
        {"cluster.kubernetes_version": "1.34", "addons.neuron_scheduler_image": "registry.k8s.io/kube-scheduler:v1.35.0"},
        "addons.neuron_scheduler_image='registry.k8s.io/kube-scheduler:v1.35.0': is kube-scheduler 1.35, outside the version skew supported with Kubernetes 1.34; allowed: a kube-scheduler tag v1.33.x or v1.34.x (at most one minor version behind cluster.kubernetes_version)",
    ),
]


@pytest.mark.parametrize(("context", "line"), MESSAGES, ids=[next(iter(c)) for c, _ in MESSAGES])
def test_each_bad_setting_line_in_full(context: dict[str, object], line: str) -> None:
    assert lines(context) == [line]


# --- the subnet layout and the problem lines themselves ------------------------------------------


def test_subnet_layout_pinned() -> None:
    assert subnets.subnet_masks("10.40.0.0/16") == (18, 22)
    assert subnets.subnet_masks("10.40.0.0/20") == (22, 26)
    # Three /18 private subnets fill the /16 to its last address: the fit is tested at the limit.
    assert subnets.allocate("10.40.0.0/16", 3) == [
        "10.40.0.0/22",
        "10.40.4.0/22",
        "10.40.8.0/22",
        "10.40.64.0/18",
        "10.40.128.0/18",
        "10.40.192.0/18",
    ]
    assert subnets.allocate("10.40.0.0/16", 4) is None
    assert subnets.allocate("10.40.0.0/20", 2) == ["10.40.0.0/26", "10.40.0.64/26", "10.40.4.0/22", "10.40.8.0/22"]
    assert subnets.allocate("10.40.0.0/18", 1) == ["10.40.0.0/24", "10.40.16.0/20"]
    assert [subnets.max_azs(f"10.40.0.0/{prefix}") for prefix in (16, 17, 18, 19, 20)] == [3, 3, 3, 3, 3]


def test_problem_lines() -> None:
    assert str(Problem("a.b", 3, "is out of range", "1 to 2")) == "a.b=3: is out of range; allowed: 1 to 2"
    assert str(Problem("a.b", "x", "is wrong")) == "a.b='x': is wrong"
    assert str(Problem("a.azs", ("us-east-2a", "us-east-2b"), "lists an AZ twice", "distinct AZs")) == (
        "a.azs='us-east-2a,us-east-2b': lists an AZ twice; allowed: distinct AZs"
    )
    assert Problem("k", 1, "p") == Problem("k", 1, "p", "", ())
    error = ConfigError([Problem("a", 1, "p", "q"), Problem("b", "x", "r")])
    assert str(error) == "config error: a=1: p; allowed: q\nconfig error: b='x': r"
    assert error.keys() == ["a", "b"]
    assert error.problems == [Problem("a", 1, "p", "q"), Problem("b", "x", "r")]


def test_one_line_each_drops_derived_and_repeated_problems() -> None:
    first, again = Problem("a", 1, "first"), Problem("a", 1, "again")
    derived = Problem("c", 5, "needs a", depends_on=("a",))
    independent = Problem("d", 7, "needs b", depends_on=("b",))
    own = Problem("e", 2, "needs e", depends_on=("e",))
    assert one_line_each([first, again, derived, independent, own]) == [first, independent, own]
    assert one_line_each([first, independent], reported=["a"]) == [independent]
    assert one_line_each([independent], reported=["b"]) == []
    assert one_line_each([Problem("a", 1, "x"), Problem("a", 2, "y")]) == [Problem("a", 1, "x"), Problem("a", 2, "y")]


# Found by `make mutation`: hints with numbers, a second bad value after the first, derived lines
# dropped when their input is bad, addon versions at the lowest accepted and one below.
MORE_CASES: list[tuple[dict[str, object], list[str]]] = [
    (
        {"env.availability_zones": "us-east-2a,us-east-2b,us-east-2a"},
        ["env.availability_zones='us-east-2a,us-east-2b,us-east-2a': lists an AZ twice; allowed: distinct AZs"],
    ),
    (
        {"neuron_nodes.capacity_reservation_id": "cr-0123456789abcdef0"},
        [
            "neuron_nodes.capacity_reservation_id='cr-0123456789abcdef0': is set but capacity_mode is on-demand; allowed: empty, or set capacity_mode to capacity-block or reservation"
        ],
    ),
    (
        {
            "neuron_nodes.capacity_mode": "capacity-block",
            "neuron_nodes.capacity_reservation_id": "cr-01234567",
            "neuron_nodes.availability_zone": "us-east-2c",
        },
        [],
    ),
    (
        {
            "neuron_nodes.capacity_mode": "capacity-block",
            "neuron_nodes.capacity_reservation_id": "cr-0123",
            "neuron_nodes.availability_zone": "us-east-2c",
        },
        ["neuron_nodes.capacity_reservation_id='cr-0123': is not a capacity reservation id; allowed: cr-<17 hex digits>"],
    ),
    (
        {"serving.draft_model": "notanid"},
        ["serving.draft_model='notanid': is not a Hugging Face model id; allowed: <org>/<name>, e.g. Qwen/Qwen3-1.7B"],
    ),
    (
        {"serving.draft_model": "Qwen/Qwen3-32B"},
        ["serving.draft_model='Qwen/Qwen3-32B': is not smaller than the target (32B >= 32B); allowed: a Qwen3 model under 32B"],
    ),
    (
        {"serving.tensor_parallel_size": 128},
        [
            "serving.tensor_parallel_size=128: exceeds the 64 logical NeuronCores of one trn2.48xlarge; allowed: a multiple of 4 up to 64 on trn2.48xlarge at LNC=2"
        ],
    ),
    (
        {"serving.speculation_method": "foo"},
        ["serving.speculation_method='foo': is not supported by serving.stack=nxdi-draft; allowed: draft"],
    ),
    ({"serving.max_model_len": 1024, "benchmark.input_tokens": 512, "benchmark.output_tokens": 512}, []),
    (
        {"serving.max_model_len": 1023, "benchmark.input_tokens": 512, "benchmark.output_tokens": 512},
        ["serving.max_model_len=1023: is shorter than benchmark input + output tokens (512 + 512); allowed: >= 1024"],
    ),
    (
        {"serving.hf_token_secret_arn": "arn:aws:secretsmanager:us-east-2:123456789012:secret:hf"},
        [
            "serving.hf_token_secret_arn='arn:aws:secretsmanager:us-east-2:123456789012:secret:hf': is not the full ARN of a Secrets Manager secret; allowed: arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>"
        ],
    ),
    ({"serving.cpu_per_service": 0}, ["serving.cpu_per_service=0: is out of range; allowed: 1 to 1024"]),
    ({"serving.cpu_per_service": 1025}, ["serving.cpu_per_service=1025: is out of range; allowed: 1 to 1024"]),
    (
        {"serving.shm_gib": 1, "serving.memory_gib_per_service": 1},
        ["serving.memory_gib_per_service=1: is out of range; allowed: 16 to 16384"],
    ),
    (
        {"serving.speculative_service": "qwen-vllm"},
        ["serving.speculative_service='qwen-vllm': names a service twice; allowed: a distinct name per service"],
    ),
    (
        {"serving.cpu_per_service": 183},
        [
            "neuron_nodes.max_size=1: fits 1 service(s) (1 per node: 8 devices, 183 vCPU, 900 GiB each), but 2 are configured; allowed: >= 2 (or smaller services, or fewer variants)"
        ],
    ),
    (
        {"serving.cpu_per_service": 184},
        ["serving.cpu_per_service=184: does not fit one trn2.48xlarge next to its daemons and the model-cache Job; allowed: <= 183"],
    ),
    (
        {"serving.memory_gib_per_service": 2008},
        [
            "serving.memory_gib_per_service=2008: does not fit one trn2.48xlarge next to its daemons and the model-cache Job; allowed: <= 2007"
        ],
    ),
    (
        {"neuron_nodes.max_size": 1, "serving.extra_speculative_variants": "qwen-sd-k4:Qwen/Qwen3-1.7B:4"},
        [
            "neuron_nodes.max_size=1: fits 2 service(s) (2 per node: 8 devices, 90 vCPU, 900 GiB each), but 3 are configured; allowed: >= 2 (or smaller services, or fewer variants)"
        ],
    ),
    ({"neuron_nodes.max_size": 2, "serving.extra_speculative_variants": "qwen-sd-k4:Qwen/Qwen3-1.7B:4"}, []),
    (
        {"cluster.admin_principal_arns": "arn:aws:iam::123:role/x"},
        [
            "cluster.admin_principal_arns='arn:aws:iam::123:role/x': is not an IAM role or user ARN; "
            "allowed: arn:aws:iam::<12 digits>:role/<name> or :user/<name>"
        ],
    ),
    (
        {"benchmark.metrics_namespace": "AWS/x"},
        [
            "benchmark.metrics_namespace='AWS/x': is not a CloudWatch custom namespace; allowed: 1-255 of A-Z a-z 0-9 . - _ / # : space, not starting with AWS/"
        ],
    ),
    (
        {"addons.cloudwatch_observability_version": "v3.0.9-eksbuild.1"},
        [
            "addons.cloudwatch_observability_version='v3.0.9-eksbuild.1': is too old (Pod Identity needs v3.1+); allowed: v3.1.0-eksbuild.1 or later"
        ],
    ),
    ({"addons.cloudwatch_observability_version": "v3.1.0-eksbuild.1"}, []),
    (
        {"addons.mountpoint_s3_csi_version": "v1.9.0-eksbuild.1"},
        [
            "addons.mountpoint_s3_csi_version='v1.9.0-eksbuild.1': is too old (only v2 accepts Pod Identity); allowed: v2.0.0-eksbuild.1 or later"
        ],
    ),
    ({"addons.mountpoint_s3_csi_version": "v2.0.0-eksbuild.1"}, []),
    (
        {"addons.vpc_cni_version": "v1.15.0-eksbuild.9"},
        [
            "addons.vpc_cni_version='v1.15.0-eksbuild.9': is too old (the egress policy's ipBlock.except needs v1.15.1+); "
            "allowed: v1.15.1-eksbuild.1 or later"
        ],
    ),
    ({"addons.vpc_cni_version": "v1.15.1-eksbuild.1"}, []),
    ({"addons.neuron_scheduler_image": "registry.example.com:5000/kube-scheduler:v1.34.2"}, []),
    (
        {"serving.image": "registry.example.com:5000/vllm:latest"},
        [
            "serving.image='registry.example.com:5000/vllm:latest': has a tag that moves (no version in it); allowed: a version tag or digest, registry/repository:tag or registry/repository@sha256:<digest>"
        ],
    ),
    (
        {"cluster.public_access_cidrs": "::/0,10.0.0.0/8"},
        [
            "cluster.public_access_cidrs='::/0': is not an IPv4 CIDR (an IPv4 cluster takes no IPv6 ones); allowed: e.g. 198.51.100.0/24",
            "cluster.public_access_cidrs='10.0.0.0/8': is a private range (RFC 1918): it never reaches the public endpoint (in-VPC clients use the private one); allowed: public IPv4 CIDRs",
        ],
    ),
    (
        {"cluster.public_access_cidrs": "0.0.0.0/0,10.0.0.0/8"},
        [
            "cluster.public_access_cidrs='10.0.0.0/8': is a private range (RFC 1918): it never reaches the public endpoint (in-VPC clients use the private one); allowed: public IPv4 CIDRs"
        ],
    ),
    (
        {"cluster.require_restricted_endpoint": "true", "cluster.public_access_cidrs": "0.0.0.0/0,10.0.0.0/8"},
        [
            "cluster.public_access_cidrs='0.0.0.0/0': opens the API endpoint to the whole internet, refused by cluster.require_restricted_endpoint=true; allowed: your own CIDRs (e.g. 198.51.100.7/32), or cluster.endpoint_access=private",
            "cluster.public_access_cidrs='10.0.0.0/8': is a private range (RFC 1918): it never reaches the public endpoint (in-VPC clients use the private one); allowed: public IPv4 CIDRs",
        ],
    ),
    (
        {"serving.extra_speculative_variants": "bad,qwen-sd-k4:Qwen/Qwen3-1.7B:16"},
        [
            "serving.extra_speculative_variants='bad': is not NAME:SPECULATOR:K; allowed: NAME:SPECULATOR:K, e.g. qwen-sd-k5:Qwen/Qwen3-1.7B:5",
            "serving.extra_speculative_variants=16: is out of range; allowed: 1 to 15",
        ],
    ),
    (
        {"env.availability_zones": "us-east-2a,us-east-2a", "network.nat_gateways": 2},
        ["env.availability_zones='us-east-2a,us-east-2a': EKS needs subnets in at least two AZs; allowed: 2 or more distinct AZs"],
    ),
    ({"system_nodes.min_size": -1, "system_nodes.desired_size": 5}, ["system_nodes.min_size=-1: is negative; allowed: 0 to max_size=3"]),
    (
        {"neuron_nodes.root_volume_iops": 2000, "neuron_nodes.root_volume_throughput_mibps": 600},
        ["neuron_nodes.root_volume_iops=2000: is out of range; allowed: 3000 to 16000"],
    ),
]


@pytest.mark.parametrize(("context", "expected"), MORE_CASES)
def test_more_exact_lines(context: dict[str, object], expected: list[str]) -> None:
    assert lines(context) == expected


# Qwen3-32B (64 layers, 8 KV heads x 128, BF16): 64 x 8 x 128 x 2 (K, V) x 2 bytes = 262,144 bytes of KV
# a token, 1 KV head of 8 per rank at TP 32: 32,768 bytes a rank; Qwen3-1.7B (28 layers, 8 x 128):
# 114,688 bytes a token, 14,336 a rank. 4 sequences x 32,768 tokens = 131,072 tokens: 4.00 GiB target
# KV + 1.75 GiB draft KV per rank, with 2.03 + 0.15 GiB of weights and the 2.19 GiB reserve: 10.12 GiB
# of a logical core's 24 GiB (96 GiB / 4). 131,072 tokens a sequence is 4x that KV: 27.37 GiB.
def test_services_must_fit_hbm_per_rank() -> None:
    assert lines({"serving.max_model_len": 32768}) == []
    refused = lines({"serving.max_model_len": 131072})
    assert len(refused) == 1
    assert refused[0].startswith("serving.max_model_len=131072: with serving.max_num_seqs=4 at TP 32, service qwen-sd-vllm")
    assert "KV 16.00 (524288 tokens, 1 KV head(s) per rank) + draft weights 0.15 + draft KV 7.00" in refused[0]
    assert "= 27.37 GiB > 24.00 GiB HBM per logical core" in refused[0]
    # The baseline alone at that length fits (2.03 + 16.00 + 2.19 = 20.22 GiB): only the speculative service is named.
    assert "qwen-vllm " not in refused[0]
    # One sequence of 131,072 tokens fits beside the draft.
    assert lines({"serving.max_model_len": 131072, "serving.max_num_seqs": 1}) == []
