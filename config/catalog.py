"""Static facts the configuration is checked against: Trainium instance shapes and model families.

Pure data plus small pure functions; nothing here touches CDK, so it is cheap to test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TrainiumInstance:
    """One Trainium instance type as the Neuron device plugin sees it."""

    name: str
    neuron_devices: int
    physical_cores_per_device: int
    vcpus: int
    memory_gib: int
    # Logical NeuronCore configurations (LNC) the chip supports: Trainium1 has only 1,
    # Trainium2 groups 1 or 2 physical cores into one logical core.
    lnc_options: tuple[int, ...]
    # Device counts the Neuron scheduler extension allocates as a connected set: Trainium's 2D
    # torus takes 1, 4, 8 or all 16 devices (Neuron docs, "Neuron scheduler extension").
    schedulable_device_counts: tuple[int, ...] = (1, 4, 8, 16)

    def logical_cores_per_device(self, lnc: int) -> int:
        return self.physical_cores_per_device // lnc

    def logical_cores(self, lnc: int) -> int:
        return self.neuron_devices * self.logical_cores_per_device(lnc)


# Shapes from the EC2 accelerated-computing instance pages for Trn1/Trn2.
TRAINIUM_INSTANCES: dict[str, TrainiumInstance] = {
    t.name: t
    for t in (
        TrainiumInstance("trn1.2xlarge", 1, 2, 8, 32, (1,), (1,)),
        TrainiumInstance("trn1.32xlarge", 16, 2, 128, 512, (1,)),
        TrainiumInstance("trn1n.32xlarge", 16, 2, 128, 512, (1,)),
        # One Trainium2 chip (8 NeuronCore-v3, 96 GiB HBM; REFERENCE.md section 7), so the device plugin
        # advertises 1 `aws.amazon.com/neuron` device and the scheduler extension can place only 1.
        # 12 vCPUs and 128 GiB: the EC2 Trn2 instance page's figures as the project recorded them,
        # unchecked here (the stored Neuron architecture pages list only the 48xlarge sizes); the
        # node-fit rules take them as given, and preflight reads the vCPUs the account's EC2 API
        # reports (DescribeInstanceTypes) for the quota. No EFA is configured for any type here.
        TrainiumInstance("trn2.3xlarge", 1, 8, 12, 128, (1, 2), (1,)),
        TrainiumInstance("trn2.48xlarge", 16, 8, 192, 2048, (1, 2)),
        TrainiumInstance("trn2u.48xlarge", 16, 8, 192, 2048, (1, 2)),
    )
}

# Accelerated families that are not Trainium: named in the error so the mistake is obvious.
NON_TRAINIUM_ACCELERATOR_PREFIXES = ("inf1", "inf2", "p3", "p4", "p5", "p6", "g4", "g5", "g6", "dl1", "dl2")

# Kubernetes versions the pinned kubectl layer (kubectl 1.35) may drive: kubectl supports
# one minor version of skew either side of its own.
KUBECTL_LAYER_VERSION = "1.35"
SUPPORTED_KUBERNETES_VERSIONS = ("1.34", "1.35", "1.36")

# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)

CAPACITY_MODES = ("on-demand", "capacity-block", "reservation")
ENDPOINT_ACCESS_MODES = ("public-and-private", "private")
# Benchmark engines of `specbench run --engine`: the project's own streaming client, or llmperf.
BENCHMARK_ENGINES = ("native", "llmperf")
# Speculation methods and their k ranges are per serving stack: config/serving_stacks.py.

# Models known to share one tokenizer; a draft model must come from the target's family.
_KNOWN_FAMILIES: tuple[tuple[str, str], ...] = (
    (r"^Qwen/Qwen3-", "Qwen3"),
    (r"^Qwen/Qwen2\.5-", "Qwen2.5"),
    (r"^meta-llama/(Meta-)?Llama-3(\.\d+)?-", "Llama-3"),
    (r"^meta-llama/Llama-2-", "Llama-2"),
    (r"^mistralai/Mistral-", "Mistral"),
)
_SIZE = re.compile(r"-(\d+(?:\.\d+)?)B(?=\Z|[-_])", re.IGNORECASE | re.ASCII)
HF_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z", re.ASCII)


def model_family(model_id: str) -> str:
    """Tokenizer family of a Hugging Face model id.

    Known families come from the table above; otherwise the family is the id up to its size
    suffix ("org/Name-7B-Instruct" -> "org/Name"), which is how model families are named.
    """
    for pattern, family in _KNOWN_FAMILIES:
        if re.match(pattern, model_id, re.ASCII):
            return family
    match = _SIZE.search(model_id)
    return model_id[: match.start()] if match else model_id


# Mixture-of-experts ids: Qwen's "-30B-A3B" (total, then active parameters), Mixtral's "8x7B",
# and ids that say MoE.
_ACTIVE = re.compile(r"-A(\d+(?:\.\d+)?)B(?=\Z|[-_])", re.ASCII)
_EXPERTS = re.compile(r"(?<![A-Za-z0-9])(\d+)x(\d+(?:\.\d+)?)B(?=\Z|[-_])|moe(?![a-z])", re.ASCII | re.IGNORECASE)


def known_family(model_id: str) -> bool:
    """Whether the id is of a family in the table above (whose ids carry their size)."""
    return any(re.match(pattern, model_id, re.ASCII) for pattern, _ in _KNOWN_FAMILIES)


def mixture_of_experts(model_id: str) -> str:
    """How the id says it is a mixture of experts ("3B active", "8x7B experts", "MoE"), or ''."""
    active = _ACTIVE.search(model_id)
    if active:
        return f"{active.group(1)}B active of {model_size_billions(model_id) or '?'}B"
    experts = _EXPERTS.search(model_id)
    if experts:
        return f"{experts.group(1)} experts of {experts.group(2)}B" if experts.group(1) else "MoE"
    return ""


def model_size_billions(model_id: str) -> float | None:
    """Parameter count in billions parsed from the id ("Qwen3-1.7B" -> 1.7), None if absent."""
    match = _SIZE.search(model_id)
    return float(match.group(1)) if match else None


# The system node group runs this AMI type (stacks/cluster.py sets it), so its instance type must
# be of this architecture: an arm64 (Graviton) type on an x86_64 AMI never joins the cluster.
SYSTEM_NODE_AMI_TYPE = "AL2023_x86_64_STANDARD"
SYSTEM_NODE_ARCHITECTURE = "x86_64"

# Namespaces the app namespace must not be: the chart deletes its namespace on destroy, and these
# belong to someone else.
# - Kubernetes' initial namespaces, and the `kube-` prefix it reserves for system namespaces
#   (kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/, "Initial namespaces").
# - amazon-cloudwatch: the amazon-cloudwatch-observability add-on's (config/layout.py).
# - neuron-healthcheck-system: the Neuron Helm chart's node problem detector (chart 1.10.0
#   values.yaml `npd.namespaceOverride`, aws-neuron/neuron-helm-charts).
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "amazon-cloudwatch", "neuron-healthcheck-system")
RESERVED_NAMESPACE_PREFIX = "kube-"

# IPv4 ranges that can be neither a VPC nor a client on the internet (IANA special-purpose registry).
SPECIAL_IPV4_RANGES = (
    ("0.0.0.0/8", "the 'this network' range (RFC 1122)"),
    ("127.0.0.0/8", "the loopback range (RFC 1122)"),
    ("169.254.0.0/16", "the link-local range (RFC 3927)"),
    ("224.0.0.0/4", "the multicast range (RFC 5771)"),
    ("240.0.0.0/4", "the reserved range (RFC 1112)"),
)
# Addresses that never reach a public endpoint as a source: clients inside the VPC use the private
# endpoint, and other private networks are NATed before they reach the internet.
PRIVATE_IPV4_RANGES = (
    ("10.0.0.0/8", "a private range (RFC 1918)"),
    ("172.16.0.0/12", "a private range (RFC 1918)"),
    ("192.168.0.0/16", "a private range (RFC 1918)"),
    ("100.64.0.0/10", "the carrier-grade NAT range (RFC 6598)"),
)
WHOLE_INTERNET = ("0.0.0.0/0", "::/0")

# An image tag is taken as pinned when it names a version (has a digit); `latest`, `stable`,
# `main`... move under you.
FLOATING_TAG = re.compile(r"^[^0-9]*\Z", re.ASCII)

# kube-scheduler may be as new as the API server or one minor version older (Kubernetes version
# skew policy, kubernetes.io/releases/version-skew-policy/, "kube-controller-manager,
# kube-scheduler, and cloud-controller-manager").
SCHEDULER_MAX_MINOR_LAG = 1

# gp3: at most 0.25 MiB/s of throughput per provisioned IOPS (Amazon EBS User Guide, "General
# Purpose SSD volumes", gp3 performance).
GP3_MIBPS_PER_IOPS = 0.25


# Node prices: the price catalog, config/prices.py (by instance type, region and capacity mode).
