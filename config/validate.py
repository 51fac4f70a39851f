"""Cross-field rules. Each rule is a small pure function returning the problems it finds."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Iterable

# Only the suite parser and the cost inputs' bounds (standard library only): the CDK app's
# environment does not install the benchmark's own requirements.
from specbench.analysis import candidates as cand
from specbench.analysis import prices
from specbench.analysis import serving_model as sm
from specbench.prompts.suite import SuiteError, load_suite

from . import capacity, catalog, ec2, profiles, serving_stacks, subnets, sweep
from .errors import Problem, echo, one_line_each
from .model import PlatformConfig, ServingSettings
from .variants import parse_extra_variant, service_variants, speculator_target

# The reference stack's method: what a caller that names no method checks against.
REFERENCE_METHOD = serving_stacks.STACKS[serving_stacks.REFERENCE_STACK].methods[0]

ACCOUNT = re.compile(r"^\d{12}\Z", re.ASCII)
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d\Z", re.ASCII)
CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}\Z", re.ASCII)
# Access entries take the IAM role or user ARN; a session ARN (sts assumed-role) is a classic mistake.
PRINCIPAL_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::\d{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}\Z", re.ASCII)
RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8}([0-9a-f]{9})?\Z", re.ASCII)
IMAGE = re.compile(r"^[a-z0-9.-]+(:\d+)?(/[a-z0-9._-]+)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})\Z", re.ASCII)
SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?\Z", re.ASCII)
ADDON_VERSION = re.compile(r"^v(?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)-eksbuild\.\d+\Z", re.ASCII)
# CloudWatch namespaces: printable ASCII without ':' first, not starting with 'AWS/'.
NAMESPACE = re.compile(r"^(?!AWS/)[A-Za-z0-9._/#:-][A-Za-z0-9 ._/#:-]{0,254}\Z", re.ASCII)
DASHBOARD_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}\Z", re.ASCII)

# Kubernetes object names (RFC 1123 labels): namespaces, Services, Deployments.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z", re.ASCII)
DNS_LABEL_RULE = "1-63 lowercase letters, digits or '-', starting and ending alphanumeric"
# The full ARN (with the 6 characters Secrets Manager appends), so IAM can name the one secret.
SECRET_ARN = re.compile(
    r"^arn:aws(-cn|-us-gov)?:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}-[A-Za-z0-9]{6}\Z", re.ASCII
)

Rule = Callable[[PlatformConfig], Iterable[Problem]]


def _range(key: str, value: int, low: int, high: int) -> Iterable[Problem]:
    if not low <= value <= high:
        yield Problem(key, value, "is out of range", f"{low} to {high}")


def _special_range(net: ipaddress.IPv4Network, ranges: tuple[tuple[str, str], ...]) -> str:
    """What ``net`` overlaps of ``ranges``, or ''."""
    return next((what for cidr, what in ranges if net.overlaps(ipaddress.IPv4Network(cidr))), "")


def cidr_problem(cidr: str, version_hint: str) -> tuple[ipaddress.IPv4Network | None, str, str]:
    """``cidr`` as a network, or None with the reason that applies and what would be allowed:
    host bits set (the network it meant, e.g. 10.40.0.1/16 -> 10.40.0.0/16) is not "not a CIDR"."""
    try:
        return ipaddress.IPv4Network(cidr), "", ""
    except ValueError:
        pass
    try:
        loose = ipaddress.IPv4Network(cidr, strict=False)
    except ValueError:
        try:
            ipaddress.IPv6Network(cidr, strict=False)
        except ValueError:
            return None, "is not an IPv4 CIDR", f"e.g. {version_hint}"
        return None, "is an IPv6 CIDR; only IPv4 ones are taken here", f"e.g. {version_hint}"
    return None, f"has host bits set (the address is not the first of its /{loose.prefixlen})", f"the network itself: {loose}"


def image_problems(key: str, image: str, *, digest: bool = True) -> Iterable[Problem]:
    """An image must name its registry and be pinned: a version tag (one with a digit) or, where
    the consumer takes one, a digest. ``latest`` and other words-only tags move under you."""
    shape = "registry/repository:tag or registry/repository@sha256:<digest>" if digest else "registry/repository:tag"
    if not IMAGE.match(image) or (not digest and "@" in image):
        pinned = "pinned by tag or digest" if digest else "pinned by tag"
        yield Problem(key, image, f"is not an image reference {pinned}", shape)
    elif "@" not in image and catalog.FLOATING_TAG.match(image.rsplit(":", 1)[1]):
        yield Problem(key, image, "has a tag that moves (no version in it)", f"a version tag or digest, {shape}")


def env_rules(c: PlatformConfig) -> Iterable[Problem]:
    env = c.env
    if env.profile and env.profile not in profiles.PROFILES:
        yield Problem("env.profile", env.profile, "is not a profile", f"{', '.join(profiles.PROFILES)}, or empty")
    if not ACCOUNT.match(env.account):
        yield Problem("env.account", env.account, "is not an AWS account id", "12 digits")
    if not REGION.match(env.region):
        yield Problem("env.region", env.region, "is not an AWS region name", "e.g. us-east-2")
        return
    az_pattern = re.compile(rf"^{re.escape(env.region)}[a-z]\Z", re.ASCII)
    for az in env.availability_zones:
        if not az_pattern.match(az):
            yield Problem(
                "env.availability_zones", az, f"is not an availability zone of {env.region}", f"{env.region}a, {env.region}b, ..."
            )
    if len(set(env.availability_zones)) < 2:
        yield Problem("env.availability_zones", env.availability_zones, "EKS needs subnets in at least two AZs", "2 or more distinct AZs")
    if len(set(env.availability_zones)) != len(env.availability_zones):
        yield Problem("env.availability_zones", env.availability_zones, "lists an AZ twice", "distinct AZs")


def network_rules(c: PlatformConfig) -> Iterable[Problem]:
    net, why, allowed = cidr_problem(c.network.vpc_cidr, "10.40.0.0/16")
    if net is None:
        yield Problem("network.vpc_cidr", c.network.vpc_cidr, why, allowed)
    else:
        if not 16 <= net.prefixlen <= 20:
            yield Problem("network.vpc_cidr", c.network.vpc_cidr, "leaves too few pod IPs", "/16 to /20")
        else:
            special = _special_range(net, catalog.SPECIAL_IPV4_RANGES)
            if special:
                yield Problem("network.vpc_cidr", c.network.vpc_cidr, f"overlaps {special}", "a private range such as 10.40.0.0/16")
            elif subnets.allocate(str(net), len(c.env.availability_zones)) is None:
                private, public = subnets.subnet_masks(str(net))
                yield Problem(
                    "env.availability_zones",
                    c.env.availability_zones,
                    f"needs a /{public} public and a /{private} private subnet per AZ, more than "
                    f"network.vpc_cidr={c.network.vpc_cidr} holds (each private subnet takes a quarter of it)",
                    f"at most {subnets.max_azs(str(net))} AZs",
                    depends_on=("network.vpc_cidr",),
                )
    if c.network.nat_gateways < 1:
        yield Problem("network.nat_gateways", c.network.nat_gateways, "is out of range", f"1 to {len(c.env.availability_zones)}")
    elif c.network.nat_gateways > len(c.env.availability_zones):
        yield Problem(
            "network.nat_gateways",
            c.network.nat_gateways,
            "is out of range",
            f"1 to {len(c.env.availability_zones)}",
            depends_on=("env.availability_zones",),
        )


def cluster_rules(c: PlatformConfig) -> Iterable[Problem]:
    cl = c.cluster
    if not CLUSTER_NAME.match(cl.name):
        yield Problem(
            "cluster.name", cl.name, "is not a valid EKS cluster name", "1-100 letters, digits, '-' or '_', starting alphanumeric"
        )
    if cl.kubernetes_version not in catalog.SUPPORTED_KUBERNETES_VERSIONS:
        yield Problem(
            "cluster.kubernetes_version",
            cl.kubernetes_version,
            f"is not supported by the pinned kubectl layer (v{catalog.KUBECTL_LAYER_VERSION})",
            ", ".join(catalog.SUPPORTED_KUBERNETES_VERSIONS),
        )
    if cl.endpoint_access not in catalog.ENDPOINT_ACCESS_MODES:
        yield Problem("cluster.endpoint_access", cl.endpoint_access, "is not an endpoint mode", ", ".join(catalog.ENDPOINT_ACCESS_MODES))
    yield from public_access_problems(c)
    seen: set[str] = set()
    for arn in cl.admin_principal_arns:
        if not PRINCIPAL_ARN.match(arn):
            hint = " (use the role's ARN, not an assumed-role session)" if ":assumed-role/" in arn else ""
            yield Problem(
                "cluster.admin_principal_arns",
                arn,
                "is not an IAM role or user ARN" + hint,
                "arn:aws:iam::<12 digits>:role/<name> or :user/<name>",
            )
        # One access entry per principal: CloudFormation fails on the second. IAM names are not
        # distinguished by case (IAM User Guide, "IAM identifiers"), so neither are the ARNs here.
        elif arn.casefold() in seen:
            yield Problem("cluster.admin_principal_arns", arn, "names the same principal twice", "each role or user once")
        seen.add(arn.casefold())


def public_access_problems(c: PlatformConfig) -> Iterable[Problem]:
    """CIDRs that may reach the public endpoint: IPv4 only (EKS rejects IPv6 ones for an IPv4
    cluster: EKS User Guide, "Cluster API server endpoint"), addresses the internet can carry, and
    not the whole internet when the strict posture is asked for."""
    cl, key = c.cluster, "cluster.public_access_cidrs"
    if cl.endpoint_access != "public-and-private":
        return
    if not cl.public_access_cidrs:
        yield Problem(key, "", "is empty while the public endpoint is on", "one or more CIDRs, or cluster.endpoint_access=private")
    seen: dict[ipaddress.IPv4Network, str] = {}
    for cidr in cl.public_access_cidrs:
        if cl.require_restricted_endpoint and cidr in catalog.WHOLE_INTERNET:
            yield Problem(
                key,
                cidr,
                "opens the API endpoint to the whole internet, refused by cluster.require_restricted_endpoint=true",
                "your own CIDRs (e.g. 198.51.100.7/32), or cluster.endpoint_access=private",
            )
            continue
        net, why, allowed = cidr_problem(cidr, "198.51.100.0/24")
        if net is None:
            reason = why if "host bits" in why else "is not an IPv4 CIDR (an IPv4 cluster takes no IPv6 ones)"
            yield Problem(key, cidr, reason, allowed)
            continue
        if net in seen:  # the same network twice, however it is spelt (198.51.100.7 is 198.51.100.7/32)
            yield Problem(key, cidr, f"lists {net} twice (as {seen[net]} too)", "each CIDR once")
            continue
        seen[net] = cidr
        if net.prefixlen == 0:
            continue  # the whole internet: allowed, and warned about (config_warnings())
        special = _special_range(net, catalog.SPECIAL_IPV4_RANGES)
        private = next((what for r, what in catalog.PRIVATE_IPV4_RANGES if net.subnet_of(ipaddress.IPv4Network(r))), "")
        if special:
            yield Problem(key, cidr, f"overlaps {special}, which no client on the internet has", "public IPv4 CIDRs")
        elif private:
            yield Problem(
                key, cidr, f"is {private}: it never reaches the public endpoint (in-VPC clients use the private one)", "public IPv4 CIDRs"
            )


def _group_sizes(prefix: str, low: int, desired: int, high: int, ceiling: int) -> Iterable[Problem]:
    yield from _range(f"{prefix}.max_size", high, 1, ceiling)
    if low < 0:
        yield Problem(f"{prefix}.min_size", low, "is negative", f"0 to max_size={high}")
    order = "0 <= min_size <= desired_size <= max_size"
    inputs = (f"{prefix}.min_size", f"{prefix}.max_size")
    if low > high:
        yield Problem(f"{prefix}.min_size", low, f"is above max_size={high}", order, depends_on=(f"{prefix}.max_size",))
    elif not low <= desired <= high:
        yield Problem(f"{prefix}.desired_size", desired, f"must lie between min_size={low} and max_size={high}", order, depends_on=inputs)


def instance_type_problems(key: str, name: str) -> Iterable[Problem]:
    """The type must exist in EC2's own list (config/ec2.py says where that list comes from)."""
    if not ec2.exists(name):
        hints = ec2.close_matches(name)
        allowed = f"did you mean {' or '.join(hints)}?" if hints else "an EC2 instance type, family.size, e.g. m7i.xlarge"
        yield Problem(key, name, f"is not an EC2 instance type (not in {ec2.source()})", allowed)


def system_node_rules(c: PlatformConfig) -> Iterable[Problem]:
    s = c.system_nodes
    if not ec2.exists(s.instance_type):
        yield from instance_type_problems("system_nodes.instance_type", s.instance_type)
    elif s.instance_type.startswith(("trn",) + catalog.NON_TRAINIUM_ACCELERATOR_PREFIXES):
        yield Problem(
            "system_nodes.instance_type",
            s.instance_type,
            "is an accelerator instance; the system group runs add-ons",
            "a general-purpose type such as m7i.xlarge",
        )
    elif (arch := ec2.architecture(s.instance_type)) != catalog.SYSTEM_NODE_ARCHITECTURE:
        shown = "of an architecture aws-cdk-lib's naming rule cannot tell" if arch == "unknown" else arch
        yield Problem(
            "system_nodes.instance_type",
            s.instance_type,
            f"is {shown}, but the system nodes run the {catalog.SYSTEM_NODE_AMI_TYPE} AMI",
            f"an {catalog.SYSTEM_NODE_ARCHITECTURE} type such as m7i.xlarge (no Graviton 'g' in the family)",
        )
    yield from _group_sizes("system_nodes", s.min_size, s.desired_size, s.max_size, 20)
    if 0 <= s.min_size < 1:
        yield Problem("system_nodes.min_size", s.min_size, "leaves CoreDNS and the add-ons nowhere to run", ">= 1")
    yield from _range("system_nodes.disk_size_gib", s.disk_size_gib, 20, 1000)


def neuron_node_rules(c: PlatformConfig) -> Iterable[Problem]:
    n = c.neuron_nodes
    instance = catalog.TRAINIUM_INSTANCES.get(n.instance_type)
    known = ", ".join(catalog.TRAINIUM_INSTANCES)
    if instance is None and not ec2.exists(n.instance_type):
        hints = ec2.close_matches(n.instance_type)
        yield Problem(
            "neuron_nodes.instance_type",
            n.instance_type,
            f"is not an EC2 instance type (not in {ec2.source()})",
            f"did you mean {' or '.join(hints)}?" if hints else known,
        )
    elif instance is None:
        accelerator = n.instance_type.startswith(catalog.NON_TRAINIUM_ACCELERATOR_PREFIXES)
        problem = "is an accelerator but not Trainium" if accelerator else "is not a Trainium instance type whose Neuron shape is known"
        yield Problem("neuron_nodes.instance_type", n.instance_type, problem, known)
    elif n.logical_nc_config not in instance.lnc_options:
        yield Problem(
            "neuron_nodes.logical_nc_config",
            n.logical_nc_config,
            f"is not supported on {instance.name}",
            ", ".join(map(str, instance.lnc_options)),
        )
    yield from _group_sizes("neuron_nodes", n.min_size, n.desired_size, n.max_size, 64)
    yield from _range("neuron_nodes.root_volume_gib", n.root_volume_gib, 100, 16384)
    yield from _range("neuron_nodes.root_volume_iops", n.root_volume_iops, 3000, 16000)
    yield from _range("neuron_nodes.root_volume_throughput_mibps", n.root_volume_throughput_mibps, 125, 1000)
    most = int(n.root_volume_iops * catalog.GP3_MIBPS_PER_IOPS)
    if n.root_volume_throughput_mibps > most:
        yield Problem(
            "neuron_nodes.root_volume_throughput_mibps",
            n.root_volume_throughput_mibps,
            f"exceeds gp3's {catalog.GP3_MIBPS_PER_IOPS} MiB/s per provisioned IOPS ({n.root_volume_iops} IOPS allow {most})",
            f"<= {most}, or neuron_nodes.root_volume_iops >= {math.ceil(n.root_volume_throughput_mibps / catalog.GP3_MIBPS_PER_IOPS)}",
            depends_on=("neuron_nodes.root_volume_iops",),
        )
    if n.capacity_mode not in catalog.CAPACITY_MODES:
        yield Problem("neuron_nodes.capacity_mode", n.capacity_mode, "is not a capacity mode", ", ".join(catalog.CAPACITY_MODES))
    elif n.capacity_mode == "on-demand":
        if n.capacity_reservation_id:
            yield Problem(
                "neuron_nodes.capacity_reservation_id",
                n.capacity_reservation_id,
                "is set but capacity_mode is on-demand",
                "empty, or set capacity_mode to capacity-block or reservation",
            )
    elif not n.capacity_reservation_id:
        yield Problem(
            "neuron_nodes.capacity_reservation_id",
            "",
            f"is required with capacity_mode={n.capacity_mode}",
            "the reservation id, cr-<17 hex digits>",
        )
    elif not RESERVATION_ID.match(n.capacity_reservation_id):
        yield Problem(
            "neuron_nodes.capacity_reservation_id", n.capacity_reservation_id, "is not a capacity reservation id", "cr-<17 hex digits>"
        )
    if n.availability_zone not in c.env.availability_zones:
        yield Problem(
            "neuron_nodes.availability_zone",
            n.availability_zone,
            "is not one of env.availability_zones",
            ", ".join(c.env.availability_zones),
            depends_on=("env.availability_zones", "env.region"),
        )


def speculation_problems(
    draft_key: str,
    k_key: str,
    draft: str,
    k: int,
    target: str,
    method: serving_stacks.SpeculationMethod = REFERENCE_METHOD,
    head_target: str = "",
) -> Iterable[Problem]:
    """A speculative service needs both a speculator and k within the method's range. A draft
    model must be a smaller model of the target's tokenizer family; a trained head must have been
    trained for the target. Shared by the configuration and the chart specs."""
    if not draft and k:
        yield Problem(k_key, k, f"is set but there is no {method.speculator} to propose the tokens", f"0, or set {draft_key}")
        return
    if draft and not k:
        yield Problem(
            k_key,
            k,
            f"is missing: the {method.speculator} {draft} needs a number of tokens to propose",
            f"{method.k_min} to {method.k_max}",
        )
        return
    if not draft:
        return  # a baseline service
    yield from _range(k_key, k, method.k_min, method.k_max)
    if not catalog.HF_MODEL_ID.match(draft):
        yield Problem(draft_key, draft, "is not a Hugging Face model id", "<org>/<name>, e.g. Qwen/Qwen3-1.7B")
        return
    if method.speculator == serving_stacks.TRAINED_HEAD:
        yield from _head_problems(draft_key, draft, target, head_target)
        return
    target_family, draft_family = catalog.model_family(target), catalog.model_family(draft)
    if target_family != draft_family:
        yield Problem(
            draft_key,
            draft,
            f"is from family {echo(draft_family)} but the target {target if len(target) <= 80 else echo(target)} is {echo(target_family)}; "
            "a draft must share the target's tokenizer",
            f"a smaller {target_family} model",
            depends_on=("serving.target_model",),
        )
        return
    experts = catalog.mixture_of_experts(draft)
    if experts:
        # A mixture-of-experts draft (Qwen3-30B-A3B: 30B in all, 3B active a token) costs its whole
        # size in memory beside the target and is not "smaller": the draft of draft-model
        # speculation is a dense model (Leviathan et al.'s small approximation model).
        yield Problem(
            draft_key,
            draft,
            f"is a mixture-of-experts model ({experts}); a draft must be a dense model",
            f"a smaller dense {target_family} model, e.g. Qwen/Qwen3-1.7B",
        )
        return
    target_b, draft_b = catalog.model_size_billions(target), catalog.model_size_billions(draft)
    if target_b is not None and draft_b is None and catalog.known_family(draft):
        yield Problem(
            draft_key,
            draft,
            "names no parameter count (e.g. -1.7B), so it cannot be checked to be smaller than the target",
            f"a {target_family} model under {target_b:g}B, named with its size",
            depends_on=("serving.target_model",),
        )
        return
    if target_b is not None and draft_b is not None and draft_b >= target_b:
        yield Problem(
            draft_key,
            draft,
            f"is not smaller than the target ({draft_b:g}B >= {target_b:g}B)",
            f"a {target_family} model under {target_b:g}B",
            depends_on=("serving.target_model",),
        )


def _head_problems(key: str, head: str, target: str, head_target: str) -> Iterable[Problem]:
    """A head reads the target's hidden states: it works only with the target it was trained for."""
    known = ", ".join(f"{h} (for {t})" for h, t in serving_stacks.KNOWN_HEADS.items() if t == target and _pairs(h, t))
    if not head_target:
        yield Problem(
            key,
            head,
            "is a head whose target model is unknown",
            f"{known or 'a head trained for ' + target}, or set serving.speculator_head_target",
            depends_on=("serving.speculator_head_target",),
        )
    elif head_target != target:
        yield Problem(
            key,
            head,
            f"was trained for {head_target}, not for the target {target}",
            known or f"a head trained for {target}",
            depends_on=("serving.target_model", "serving.speculator_head_target"),
        )
    else:
        yield from _head_geometry_problems(key, head, target)


def _pairs(head: str, target: str) -> bool:
    """False only for a known head whose recorded geometry cannot pair with the known target."""
    geometry, target_geometry = serving_stacks.HEAD_GEOMETRY.get(head), serving_stacks.TARGET_GEOMETRY.get(target)
    return geometry is None or target_geometry is None or not serving_stacks.pairing_problems(geometry, target_geometry)


def _head_geometry_problems(key: str, head: str, target: str) -> Iterable[Problem]:
    """A known head whose recorded geometry cannot pair with a known target (config/serving_stacks.py
    HEAD_GEOMETRY, TARGET_GEOMETRY): one line naming every field that fails and why."""
    geometry, target_geometry = serving_stacks.HEAD_GEOMETRY.get(head), serving_stacks.TARGET_GEOMETRY.get(target)
    if geometry is None or target_geometry is None:
        return  # unknown here: the model-cache Job checks the real config.json before anything compiles
    found = serving_stacks.pairing_problems(geometry, target_geometry)
    if found:
        pairing = [h for h, t in serving_stacks.KNOWN_HEADS.items() if t == target and _pairs(h, t)]
        yield Problem(
            key,
            head,
            f"cannot pair with {target}: " + "; ".join(reason for _, reason in found),
            ", ".join(pairing) or f"a head with {target}'s geometry",
        )


def stack_problems(s: ServingSettings, temperature: float) -> Iterable[Problem]:
    """The stacks exist, the method is one the stack supports, and a baseline on another stack is
    asked for explicitly."""
    names = ", ".join(serving_stacks.STACKS)
    stack = serving_stacks.STACKS.get(s.stack)
    if stack is None:
        yield Problem("serving.stack", s.stack, "is not a serving stack", names)
        return
    if s.baseline_stack not in serving_stacks.STACKS:
        yield Problem("serving.baseline_stack", s.baseline_stack, "is not a serving stack", names)
    elif s.baseline_stack != s.stack and not s.cross_stack:
        yield Problem(
            "serving.baseline_stack",
            s.baseline_stack,
            f"differs from serving.stack={s.stack}: a cross-stack comparison, which must be asked for",
            f"{s.stack}, or set serving.cross_stack=true",
            depends_on=("serving.stack", "serving.cross_stack"),
        )
    if s.speculation_method not in stack.method_ids:
        others = serving_stacks.stack_of_method(s.speculation_method)
        where = f" (it runs on {', '.join(others)})" if others else ""
        yield Problem(
            "serving.speculation_method",
            s.speculation_method,
            f"is not supported by serving.stack={s.stack}{where}",
            ", ".join(stack.method_ids),
            depends_on=("serving.stack",),
        )
    on_plugin = serving_stacks.VLLM_NEURON_STACK in (s.stack, s.baseline_stack)
    if on_plugin and temperature != 0.0:
        # Not because the plugin samples greedily only (its configuration reference shows a temperature
        # 0.7 example): the on-device rejection sampler of speculative decoding is greedy, and at
        # temperature 0 both services must give the same output, which is how exactness is checked.
        yield Problem(
            "benchmark.temperature",
            temperature,
            f"is not 0: on serving stack {serving_stacks.VLLM_NEURON_STACK} the speculative decoding's on-device rejection "
            "sampler is greedy, and the comparison needs the same output from both services",
            "0.0",
        )


def tensor_parallel_problems(
    key: str, tp: int, instance: catalog.TrainiumInstance, lnc: int, contiguous_devices: bool
) -> Iterable[Problem]:
    """TP must be a whole number of Neuron devices within one node; with the Neuron scheduler
    extension, the device count must be one it can place on connected devices."""
    per_device, node_cores = instance.logical_cores_per_device(lnc), instance.logical_cores(lnc)
    multiples = f"a multiple of {per_device} up to {node_cores} on {instance.name} at LNC={lnc}"
    if tp < 1 or tp % per_device:
        yield Problem(key, tp, "is not a whole number of Neuron devices", multiples)
    elif tp > node_cores:
        yield Problem(key, tp, f"exceeds the {node_cores} logical NeuronCores of one {instance.name}", multiples)
    elif contiguous_devices and tp // per_device not in instance.schedulable_device_counts:
        allowed = ", ".join(str(n * per_device) for n in instance.schedulable_device_counts)
        yield Problem(
            key,
            tp,
            f"needs {tp // per_device} devices, a count the Neuron scheduler extension cannot place on connected devices",
            f"{allowed} (or addons.neuron_scheduler=false)",
        )


def serving_rules(c: PlatformConfig) -> Iterable[Problem]:
    s = c.serving
    if not catalog.HF_MODEL_ID.match(s.target_model):
        yield Problem("serving.target_model", s.target_model, "is not a Hugging Face model id", "<org>/<name>, e.g. Qwen/Qwen3-32B")
    stack_issues = list(stack_problems(s, c.benchmark.temperature))
    yield from stack_issues
    method = _method(s)
    if method is not None:
        key = "serving.speculator_head" if method.speculator == serving_stacks.TRAINED_HEAD else "serving.draft_model"
        speculator = getattr(s, key.split(".")[1])
        if not speculator:
            wanted = "a smaller model of the target's family" if key == "serving.draft_model" else f"a head trained for {s.target_model}"
            yield Problem(key, "", f"is empty; the speculative service needs a {method.speculator}", wanted)
        else:
            target = s.speculator_head_target
            yield from speculation_problems(
                key, "serving.num_speculative_tokens", speculator, s.num_speculative_tokens, s.target_model, method, target
            )
    yield from _range("serving.max_num_seqs", s.max_num_seqs, 1, 256)
    yield from _range("serving.max_model_len", s.max_model_len, 128, 131072)
    needed = c.benchmark.input_tokens + c.benchmark.output_tokens
    if s.max_model_len < needed:
        yield Problem(
            "serving.max_model_len",
            s.max_model_len,
            f"is shorter than benchmark input + output tokens ({c.benchmark.input_tokens} + {c.benchmark.output_tokens})",
            f">= {needed}",
            depends_on=("benchmark.input_tokens", "benchmark.output_tokens"),
        )
    if s.image or s.stack in serving_stacks.STACKS:  # empty: derived from an unknown stack, reported above
        yield from image_problems("serving.image", s.image)
    yield from image_problems("serving.aws_cli_image", s.aws_cli_image)
    if s.hf_token_secret_arn and not SECRET_ARN.match(s.hf_token_secret_arn):
        yield Problem(
            "serving.hf_token_secret_arn",
            s.hf_token_secret_arn,
            "is not the full ARN of a Secrets Manager secret",
            "arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>",
        )
    yield from _range("serving.cpu_per_service", s.cpu_per_service, 1, 1024)
    yield from _range("serving.memory_gib_per_service", s.memory_gib_per_service, 16, 16384)
    if not 1 <= s.shm_gib < s.memory_gib_per_service:
        yield Problem(
            "serving.shm_gib",
            s.shm_gib,
            "must be at least 1 and below serving.memory_gib_per_service",
            f"1 to {s.memory_gib_per_service - 1}",
            depends_on=() if s.shm_gib < 1 else ("serving.memory_gib_per_service",),
        )
    yield from _range("serving.startup_timeout_minutes", s.startup_timeout_minutes, 5, 24 * 60)
    yield from service_name_rules(c)
    yield from capacity_rules(c)


def _method(s: ServingSettings) -> serving_stacks.SpeculationMethod | None:
    """The configured method on the configured stack; None when either is wrong (reported by stack_problems)."""
    stack = serving_stacks.STACKS.get(s.stack)
    try:
        return stack.method(s.speculation_method) if stack else None
    except KeyError:
        return None


def service_name_rules(c: PlatformConfig) -> Iterable[Problem]:
    s = c.serving
    if not DNS_LABEL.match(s.namespace):
        yield Problem("serving.namespace", s.namespace, "is not a Kubernetes namespace name", DNS_LABEL_RULE)
    elif s.namespace in catalog.RESERVED_NAMESPACES or s.namespace.startswith(catalog.RESERVED_NAMESPACE_PREFIX):
        yield Problem(
            "serving.namespace",
            s.namespace,
            "belongs to Kubernetes or an add-on, and the app's namespace is deleted on destroy",
            f"a namespace of your own, not {', '.join(catalog.RESERVED_NAMESPACES)} or kube-*",
        )
    named = [("serving.baseline_service", s.baseline_service), ("serving.speculative_service", s.speculative_service)]
    for text in s.extra_speculative_variants:
        key = "serving.extra_speculative_variants"
        try:
            variant = parse_extra_variant(text)
        except ValueError as err:
            yield Problem(key, text, str(err), "NAME:SPECULATOR:K, e.g. qwen-sd-k5:Qwen/Qwen3-1.7B:5")
            continue
        named.append((key, variant.name))
        method = _method(s)
        if method is not None:
            target = speculator_target(s, variant.draft_model)
            yield from speculation_problems(key, key, variant.draft_model, variant.num_speculative_tokens, s.target_model, method, target)
    seen: set[str] = set()
    for key, name in named:
        if not DNS_LABEL.match(name) or name[0].isdigit():
            yield Problem(key, name, "is not a Kubernetes Service name", DNS_LABEL_RULE + ", starting with a letter")
        elif name in seen:
            yield Problem(key, name, "names a service twice", "a distinct name per service")
        seen.add(name)


def capacity_rules(c: PlatformConfig) -> Iterable[Problem]:
    """TP placeable on one node, and every service (baseline, speculative, extras) fits the node group."""
    instance = catalog.TRAINIUM_INSTANCES.get(c.neuron_nodes.instance_type)
    lnc = c.neuron_nodes.logical_nc_config
    if instance is None or lnc not in instance.lnc_options:
        return  # reported by neuron_node_rules
    s = c.serving
    tp_problems = list(
        tensor_parallel_problems("serving.tensor_parallel_size", s.tensor_parallel_size, instance, lnc, c.addons.neuron_scheduler)
    )
    yield from tp_problems
    if tp_problems:
        return
    yield from service_hbm_problems(c)
    service = capacity.service_request(instance, lnc, s.tensor_parallel_size, s.cpu_per_service, s.memory_gib_per_service)
    per_node = capacity.services_per_node(instance, service)
    room = capacity.allocatable(instance)
    if per_node == 0:
        beside = " next to its daemons and the model-cache Job"
        spare = room.cpu_millis - capacity.DAEMONSET_BUDGET.cpu_millis - capacity.MODEL_CACHE_JOB.cpu_millis
        if service.cpu_millis > spare:
            yield Problem("serving.cpu_per_service", s.cpu_per_service, f"does not fit one {instance.name}{beside}", f"<= {spare // 1000}")
        else:
            spare_mib = room.memory_mib - capacity.DAEMONSET_BUDGET.memory_mib - capacity.MODEL_CACHE_JOB.memory_mib
            yield Problem(
                "serving.memory_gib_per_service",
                s.memory_gib_per_service,
                f"does not fit one {instance.name}{beside}",
                f"<= {spare_mib // 1024}",
            )
        return
    services = len(service_variants(s))
    if per_node * c.neuron_nodes.max_size < services:
        yield Problem(
            "neuron_nodes.max_size",
            c.neuron_nodes.max_size,
            f"fits {per_node * c.neuron_nodes.max_size} service(s) ({per_node} per node: {service.neuron_devices} devices, "
            f"{s.cpu_per_service} vCPU, {s.memory_gib_per_service} GiB each), but {services} are configured",
            f">= {-(-services // per_node)} (or smaller services, or fewer variants)",
            depends_on=(
                "serving.tensor_parallel_size",
                "serving.cpu_per_service",
                "serving.memory_gib_per_service",
                "serving.extra_speculative_variants",
            ),
        )


def service_hbm_problems(c: PlatformConfig) -> Iterable[Problem]:
    """Each service's ranks hold its weights (the target's, and the speculator's on the same ranks:
    fused speculation) and the KV cache for serving.max_num_seqs x serving.max_model_len in HBM per
    logical core: the rule ``predict --rank`` and the sweep apply (specbench/analysis/candidates.py,
    ``rank_memory``; its 2 GiB scratch reserve is an assumption, said in the message). One problem per
    speculator that does not fit; models without recorded geometry (serving_model.MODELS) are not
    checked, as the rank command does not rank them."""
    rules, s, lnc = sweep.node_rules(c), c.serving, c.neuron_nodes.logical_nc_config
    if rules is None or lnc not in rules.lnc_options or s.target_model not in sm.MODELS:
        return
    if not (1 <= s.max_num_seqs <= 256 and 128 <= s.max_model_len <= 131072):
        return  # out of range: serving_rules says so
    stack = serving_stacks.STACKS.get(s.stack)
    method = s.speculation_method if stack is not None and s.speculation_method in stack.method_ids else ""
    seen: set[tuple[str, str]] = set()
    for variant in service_variants(s):
        spec_method = method if variant.draft_model else ""
        key = (spec_method, variant.draft_model)
        if key in seen or spec_method not in sm.METHODS or (spec_method == "draft" and variant.draft_model not in sm.MODELS):
            continue
        seen.add(key)
        k = max(variant.num_speculative_tokens, 1) if spec_method else 0
        tp, draft = s.tensor_parallel_size, variant.draft_model
        try:
            dep = sm.Deployment(s.target_model, spec_method, draft, k, tp, lnc, s.max_num_seqs, rules.instance_type)
        except ValueError:
            continue  # a TP, k or model the other rules refuse
        memory = cand.rank_memory(cand.Candidate(dep, s.stack, s.max_model_len), rules)
        if memory.fits:
            continue
        what = f"{variant.name} ({s.target_model} with {variant.draft_model})" if spec_method else f"{variant.name} ({s.target_model})"
        fitting = ", ".join(map(str, sweep.fitting_tps(c, spec_method, variant.draft_model))) or "none"
        yield Problem(
            "serving.max_model_len",
            s.max_model_len,
            f"with serving.max_num_seqs={s.max_num_seqs} at TP {s.tensor_parallel_size}, service {what} does not fit HBM per rank "
            f"on {rules.instance_type}: {memory.describe()}",
            f"a smaller serving.max_model_len or serving.max_num_seqs, or a TP whose ranks hold it ({fitting})",
            depends_on=("serving.max_num_seqs", "serving.tensor_parallel_size", "serving.draft_model"),
        )


# The fastest a single request could plausibly stream its tokens: 500 tokens/s. The fastest figure
# published for this setup is 137.8 tokens/s (Neuron's Qwen3-32B tutorial with speculation, batch 1,
# shared/REFERENCE.md section 2) and the write-up's best is ~15 ms a token (67 tokens/s); 500 is
# more than 3.6 times the fastest, so a timeout below output_tokens / 500 s fails every request
# whatever the hardware does, and is a mistake, not a tight setting.
MAX_PLAUSIBLE_TOKENS_PER_S = 500


def request_timeout_problems(timeout_s: int, output_tokens: int) -> Iterable[Problem]:
    needed = math.ceil(output_tokens / MAX_PLAUSIBLE_TOKENS_PER_S)
    if 0 < output_tokens and timeout_s < needed:
        yield Problem(
            "benchmark.request_timeout_seconds",
            timeout_s,
            f"is too short for benchmark.output_tokens={output_tokens}: even at {MAX_PLAUSIBLE_TOKENS_PER_S} tokens/s "
            f"(over 3.6x the fastest published for Qwen3-32B on Trn2) a request takes {needed} s",
            f"at least {needed} seconds, or fewer output tokens",
            depends_on=("benchmark.output_tokens",),
        )


def benchmark_rules(c: PlatformConfig) -> Iterable[Problem]:
    b = c.benchmark
    if b.engine not in catalog.BENCHMARK_ENGINES:
        yield Problem("benchmark.engine", b.engine, "is not a benchmark engine", ", ".join(catalog.BENCHMARK_ENGINES))
    yield from image_problems("benchmark.image", b.image)
    yield from suite_file_problems("benchmark.suite_file", b.suite_file)
    yield from dataset_suite_problems("benchmark.suite_file", b.suite_file, b.engine)
    yield from _range("benchmark.input_tokens", b.input_tokens, 1, 131072)
    yield from _range("benchmark.output_tokens", b.output_tokens, 1, 131072)
    yield from _range("benchmark.concurrent_requests", b.concurrent_requests, 1, 1024)
    yield from _range("benchmark.requests_per_test_case", b.requests_per_test_case, 1, 100000)
    if not 0.0 <= b.temperature <= 2.0:  # also catches nan
        yield Problem("benchmark.temperature", b.temperature, "is out of range", "0.0 to 2.0")
    yield from _range("benchmark.seed", b.seed, 0, 2**32 - 1)
    yield from _range("benchmark.request_timeout_seconds", b.request_timeout_seconds, 10, 7200)
    yield from _range("benchmark.max_consecutive_failures", b.max_consecutive_failures, 0, 100000)
    if b.engine != "native" and b.max_consecutive_failures != type(b)().max_consecutive_failures:
        yield Problem(
            "benchmark.max_consecutive_failures",
            b.max_consecutive_failures,
            "has no effect: only the native engine has a circuit breaker",
            "the default with benchmark.engine=llmperf",
        )
    yield from request_timeout_problems(b.request_timeout_seconds, b.output_tokens)
    yield from _range("benchmark.cpu", b.cpu, 1, 16)
    yield from _range("benchmark.memory_gib", b.memory_gib, 1, 64)
    yield from _range("benchmark.ttl_after_finished_hours", b.ttl_after_finished_hours, 1, 720)
    if not NAMESPACE.match(b.metrics_namespace):
        yield Problem(
            "benchmark.metrics_namespace",
            b.metrics_namespace,
            "is not a CloudWatch custom namespace",
            "1-255 of A-Z a-z 0-9 . - _ / # : space, not starting with AWS/",
        )


def results_rules(c: PlatformConfig) -> Iterable[Problem]:
    r = c.results
    if not DASHBOARD_NAME.fullmatch(r.dashboard_name):
        yield Problem("results.dashboard_name", r.dashboard_name, "is not a CloudWatch dashboard name", "1-255 of A-Z a-z 0-9 - _")
    yield from _range("results.refresh_minutes", r.refresh_minutes, 1, 1440)
    yield from _range("results.lookback_hours", r.lookback_hours, 1, 360)
    if not 0.0 < r.draft_cost_ratio < 1.0:  # also catches nan
        yield Problem("results.draft_cost_ratio", r.draft_cost_ratio, "is out of range", "greater than 0.0 and less than 1.0")
    yield from _range("results.bootstrap_resamples", r.bootstrap_resamples, 100, 100000)
    # None: left out, the price catalog's (config/prices.py); a value given must be 0 or plausible for the type.
    instance = c.neuron_nodes.instance_type
    if r.node_price_per_hour is not None and (problem := prices.price_problem(r.node_price_per_hour, instance)):
        yield Problem("results.node_price_per_hour", r.node_price_per_hour, problem, prices.price_allowed(instance))


# An address SNS can mail: local part, '@', a dotted domain (no spaces, one '@'); not RFC 5322's full grammar.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL = re.compile(rf"^[A-Za-z0-9.!#$%&'*+/=?^_`{{|}}~-]{{1,64}}@{_LABEL}(?:\.{_LABEL})+\Z", re.ASCII)


def budget_rules(c: PlatformConfig) -> Iterable[Problem]:
    """The cost guard (stacks/cost_guard.py): budget bounds, the e-mail, and a node group it can empty."""
    b = c.budget
    if not (b.node_hours == 0 or 0 < b.node_hours <= 100000):  # also catches nan
        yield Problem("budget.node_hours", b.node_hours, "is out of range", "0 (no budget) or greater than 0 up to 100000")
    yield from _range("budget.check_minutes", b.check_minutes, 5, 60)
    if b.notify_email and (len(b.notify_email) > 254 or not EMAIL.match(b.notify_email)):
        yield Problem("budget.notify_email", b.notify_email, "is not an e-mail address", "name@example.com, or empty for no subscription")
    if sweep.enabled(c) and 0 < b.node_hours < c.sweep.budget_node_hours:
        yield Problem(
            "budget.node_hours",
            b.node_hours,
            f"is below sweep.budget_node_hours={c.sweep.budget_node_hours:g}: the cost guard would stop a sweep synth accepts",
            f"0 or at least {c.sweep.budget_node_hours:g}",
            depends_on=("sweep.budget_node_hours",),
        )
    guarded = c.neuron_nodes.scale_to_zero_after_run or b.node_hours > 0
    n = c.neuron_nodes
    # Sizes out of order are reported by the group-size rule; this one is about a valid group.
    if guarded and 0 < n.min_size <= n.desired_size <= n.max_size:
        yield Problem(
            "neuron_nodes.min_size",
            c.neuron_nodes.min_size,
            "must be 0 while the cost guard may scale the node group to 0",
            "0, or neuron_nodes.scale_to_zero_after_run=false and budget.node_hours=0",
            depends_on=("neuron_nodes.scale_to_zero_after_run", "budget.node_hours"),
        )


def suite_file_problems(key: str, path: str) -> Iterable[Problem]:
    """A custom suite file must exist and parse: the same check ``specbench run --suite`` makes,
    so a bad file stops synth instead of failing the Job after deploy."""
    if not path:
        return
    try:
        load_suite(path)
    except SuiteError as err:
        yield Problem(key, path, str(err), "a JSON suite file as described in specbench/prompts/suite.py, or empty for the reference suite")


def dataset_suite_problems(key: str, path: str, engine: str) -> Iterable[Problem]:
    """A suite that draws dataset prompts runs in the Job only with the native engine (chat messages per
    request), and only from sources the pod can reach: the hub, GitHub or an https URL (a local path
    next to the suite file is not in the pod)."""
    try:
        suite = load_suite(path) if path else None
    except SuiteError:
        return  # suite_file_problems reports it
    if suite is None or not suite.sources:
        return
    if engine != "native":
        yield Problem("benchmark.engine", engine, f"cannot send the dataset prompts of suite {path}", "native")
    for source in suite.sources:
        if source.url and not source.url.startswith("https://"):
            yield Problem(
                key, path, f"dataset {source.name} is at {source.url}, which the benchmark pod cannot read", "hub, github or an https url"
            )


def addon_rules(c: PlatformConfig) -> Iterable[Problem]:
    a = c.addons
    # The chart takes a repository and a tag, so a digest cannot be passed.
    scheduler = list(image_problems("addons.neuron_scheduler_image", a.neuron_scheduler_image, digest=False))
    yield from scheduler
    if not scheduler and c.cluster.kubernetes_version in catalog.SUPPORTED_KUBERNETES_VERSIONS:
        yield from scheduler_skew_problems(a.neuron_scheduler_image, c.cluster.kubernetes_version)
    if not SEMVER.match(a.neuron_helm_chart_version):
        yield Problem(
            "addons.neuron_helm_chart_version",
            a.neuron_helm_chart_version,
            "is not a chart version (helm pull needs one)",
            "a published version such as 1.10.0",
        )
    # (key, value, lowest (major, minor, patch) that works here, why)
    for key, value, lowest, why in (
        ("addons.cloudwatch_observability_version", a.cloudwatch_observability_version, (3, 1, 0), "Pod Identity needs v3.1+"),
        ("addons.mountpoint_s3_csi_version", a.mountpoint_s3_csi_version, (2, 0, 0), "only v2 accepts Pod Identity"),
        (
            "addons.vpc_cni_version",
            a.vpc_cni_version,
            (1, 15, 1),
            # The app namespace's egress policy uses ipBlock.except, honoured since network policy agent
            # v1.0.4, shipped with VPC CNI v1.15.1 (aws/aws-network-policy-agent issue 78, PR 58; not the
            # EKS user guide, whose page says 1.14 for network policies in general).
            "the egress policy's ipBlock.except needs v1.15.1+",
        ),
    ):
        match = ADDON_VERSION.match(value)
        if not match:
            yield Problem(key, value, "is not an EKS add-on version", "v<major>.<minor>.<patch>-eksbuild.<n>")
        elif (int(match["major"]), int(match["minor"]), int(match["patch"])) < lowest:
            yield Problem(key, value, f"is too old ({why})", "v{}.{}.{}-eksbuild.1 or later".format(*lowest))


def scheduler_skew_problems(image: str, cluster_version: str) -> Iterable[Problem]:
    """The tag must say which Kubernetes version the scheduler is, within the supported skew."""
    key, tag = "addons.neuron_scheduler_image", image.rsplit(":", 1)[1]
    major, minor = (int(part) for part in cluster_version.split("."))
    newest, oldest = f"{major}.{minor}", f"{major}.{minor - catalog.SCHEDULER_MAX_MINOR_LAG}"
    allowed = f"a kube-scheduler tag v{oldest}.x or v{newest}.x (at most one minor version behind cluster.kubernetes_version)"
    version = re.match(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:\Z|[-+_])", tag, re.ASCII)
    if version is None:
        yield Problem(
            key, image, "has a tag that names no Kubernetes version (vX.Y.Z)", allowed, depends_on=("cluster.kubernetes_version",)
        )
        return
    found = (int(version.group(1)), int(version.group(2)))
    if not (major, minor - catalog.SCHEDULER_MAX_MINOR_LAG) <= found <= (major, minor):
        yield Problem(
            key,
            image,
            f"is kube-scheduler {found[0]}.{found[1]}, outside the version skew supported with Kubernetes {cluster_version}",
            allowed,
            depends_on=("cluster.kubernetes_version",),
        )


def data_rules(c: PlatformConfig) -> Iterable[Problem]:
    if c.data.log_retention_days not in catalog.LOG_RETENTION_DAYS:
        yield Problem(
            "data.log_retention_days",
            c.data.log_retention_days,
            "is not a CloudWatch Logs retention period",
            ", ".join(map(str, catalog.LOG_RETENTION_DAYS)),
        )


def sweep_rules(c: PlatformConfig) -> Iterable[Problem]:
    """The sweep section (config/sweep.py): loads, numbers and suite always; variants, the
    cluster's sidecar support, and the plan's capacity and budget when a sweep is configured."""
    yield from sweep.load_problems(c)
    yield from sweep.number_problems(c)
    yield from suite_file_problems("sweep.suite", c.sweep.suite)
    if not sweep.enabled(c):
        yield from sweep.tp_list_problems(c)  # TP sizes without variants: said, not ignored
        return
    found = list(sweep.variant_problems(c))
    found += sweep.tp_list_problems(c)
    instance = catalog.TRAINIUM_INSTANCES.get(c.neuron_nodes.instance_type)
    if instance is not None and c.neuron_nodes.logical_nc_config in instance.lnc_options:
        for tp in dict.fromkeys(c.sweep.tensor_parallel_sizes):  # allocatable as the services' TP is (addons.neuron_scheduler)
            key = "sweep.tensor_parallel_sizes"
            found += tensor_parallel_problems(key, tp, instance, c.neuron_nodes.logical_nc_config, c.addons.neuron_scheduler)
    if not found:
        found += sweep.hbm_problems(c)
    for variant in sweep.user_variants(c):  # each TP variant has its variant's draft and k
        key = "sweep.variants"
        stack = serving_stacks.STACKS.get(c.serving.stack)
        if stack is None or variant.method not in stack.method_ids:
            continue  # reported by sweep.variant_problems (or the serving rules for the stack)
        method = stack.method(variant.method)
        head_target = speculator_target(c.serving, variant.draft_model)
        found += speculation_problems(key, key, variant.draft_model, variant.k, c.serving.target_model, method, head_target)
    yield from found
    yield from sweep.sidecar_problems(c)
    if not found:
        yield from sweep.plan_problems(c)


RULES: tuple[Rule, ...] = (
    env_rules,
    network_rules,
    cluster_rules,
    system_node_rules,
    neuron_node_rules,
    serving_rules,
    benchmark_rules,
    results_rules,
    budget_rules,
    addon_rules,
    data_rules,
    sweep_rules,
)


def validate(config: PlatformConfig, reported: Iterable[str] = ()) -> list[Problem]:
    """Every problem, one line each; ``reported`` are keys whose value was already unusable."""
    return one_line_each((problem for rule in RULES for problem in rule(config)), reported)


def config_warnings(config: PlatformConfig) -> list[str]:
    """Settings that deploy, but are a decision the user should see they made: one line each."""
    cl = config.cluster
    found = []
    opened = [cidr for cidr in cl.public_access_cidrs if cidr in catalog.WHOLE_INTERNET]
    if cl.endpoint_access == "public-and-private" and opened:
        found.append(
            f"cluster.public_access_cidrs={','.join(opened)}: the public API endpoint accepts any address (only IAM "
            "authentication guards it); restrict it with -c cluster.public_access_cidrs=<your CIDR>/32 or use "
            '-c cluster.endpoint_access=private (README, "API endpoint access")'
        )
    stack = serving_stacks.STACKS.get(config.serving.stack)
    if stack is not None and config.serving.image != stack.image:
        found.append(
            f"serving.image={config.serving.image}: not the image serving.stack={stack.id} pins ({stack.image}); its "
            'arguments and environment follow that stack\'s documentation (README, "Which serving stack")'
        )
    return found
