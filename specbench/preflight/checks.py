"""The preflight checks: each a small pure function over API responses (dicts as boto3 returns
them), returning ``Check`` lines. Standard library only; no AWS call is made here (account.py).

Response shapes are botocore's service models (the tests' Stubber validates them against those):
CloudFormation ``DescribeStacks`` (``StackStatus``, ``Outputs``), SSM ``GetParameter``, EC2
``DescribeAvailabilityZones`` (``ZoneName``, ``ZoneId``), ``DescribeInstanceTypeOfferings``
(``Location`` is an AZ id with ``LocationType=availability-zone-id``), ``DescribeInstanceTypes``
(``VCpuInfo.DefaultVCpus``), ``DescribeCapacityReservations``, Service Quotas ``ListServiceQuotas``
(``QuotaName``, ``QuotaCode``, ``Value``), EKS ``DescribeClusterVersions`` and
``DescribeAddonVersions``, Secrets Manager ``DescribeSecret`` (``DeletedDate``), S3 ``HeadBucket``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

PASSED, WARNING, FAILED = "passed", "warning", "failed"
EXIT_PASSED, EXIT_FAILED, EXIT_WARNINGS = 0, 1, 3


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # PASSED, WARNING or FAILED
    found: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:<7}  {self.name}: {self.found}" + (f" | fix: {self.fix}" if self.fix else "")


def exit_code(checks: Iterable[Check]) -> int:
    """0 when every check passed, 1 on any failure, 3 when the worst is a warning."""
    statuses = {c.status for c in checks}
    if FAILED in statuses:
        return EXIT_FAILED
    return EXIT_WARNINGS if WARNING in statuses else EXIT_PASSED


def api_failure(name: str, api: str, code: str, message: str = "") -> Check:
    """A check whose API call failed (refused, unreachable, not served): not checked, so a warning,
    not a verdict on the account; the fix points at the permission list when access was refused."""
    detail = f" ({message})" if message else ""
    denied = any(word in code for word in ("AccessDenied", "Unauthorized", "UnrecognizedClient", "AuthFailure"))
    fix = "grant the permission (docs/preflight.md, the policy)" if denied else "rerun; if it persists, see the error"
    return Check(name, WARNING, f"not checked: {api} failed: {code}{detail}", fix)


# --- who and where ---------------------------------------------------------------------------


def account_check(caller_account: str, configured_account: str) -> Check:
    """``env.account`` (when the user set it) must be the account the credentials are in."""
    if not configured_account:
        return Check("account", PASSED, f"{caller_account} (env.account not set: the deploy uses the credentials' account)")
    if configured_account == caller_account:
        return Check("account", PASSED, f"{caller_account} = env.account")
    return Check(
        "account",
        FAILED,
        f"the credentials are in account {caller_account}, env.account is {configured_account}",
        f"use credentials of {configured_account} (AWS_PROFILE), or -c env.account={caller_account}",
    )


def region_check(region: str, configured: bool, cli_region: str) -> Check:
    """The deploy's region, and whether the CLI's default region (kubectl, aws eks ...) agrees."""
    if not configured and not cli_region:
        return Check(
            "region",
            WARNING,
            f"{region}: neither env.region nor a CLI region is set, so the CDK CLI falls back to it",
            "-c env.region=<your region> (or export AWS_REGION)",
        )
    source = "env.region" if configured else "the CLI's default region"
    if cli_region and cli_region != region:
        return Check(
            "region",
            WARNING,
            f"the deploy goes to {region} ({source}); your CLI's default region is {cli_region}",
            f"export AWS_REGION={region} so aws and kubectl commands reach the same region",
        )
    return Check("region", PASSED, f"{region} ({source})")


# --- CDK bootstrap and the app's stacks --------------------------------------------------------

# aws-cdk-lib 2.275 core/lib/stack-synthesizers/default-synthesizer.js: MIN_BOOTSTRAP_STACK_VERSION=6
# (what every stack and asset manifest of the DefaultStackSynthesizer requires) and
# MIN_LOOKUP_ROLE_BOOTSTRAP_STACK_VERSION=8 (its lookup role, used by `cdk diff` and context lookups);
# cdk.out/manifest.json carries the same numbers as `requiresBootstrapStackVersion`.
SYNTHESIZER_MIN_BOOTSTRAP_VERSION = 6
SYNTHESIZER_MIN_LOOKUP_BOOTSTRAP_VERSION = 8
DEFAULT_QUALIFIER = "hnb659fds"  # the same file's DEFAULT_QUALIFIER
DEFAULT_TOOLKIT_STACK = "CDKToolkit"

# Stack statuses (CloudFormation's StackStatus enum) a deploy cannot start from, and what clears each.
_DELETE = "aws cloudformation delete-stack --stack-name {stack} --region {region}"
_WAIT = "wait until it settles: aws cloudformation describe-stacks --stack-name {stack} --region {region} --query Stacks[0].StackStatus"
BLOCKING_STATES: dict[str, str] = {
    # A failed first create cannot be updated ("is in ROLLBACK_COMPLETE state and can not be updated").
    "ROLLBACK_COMPLETE": _DELETE + ", then deploy again",
    "ROLLBACK_FAILED": _DELETE + " (after fixing what describe-stack-events names), then deploy again",
    "CREATE_FAILED": _DELETE + ", then deploy again",
    "DELETE_FAILED": "see aws cloudformation describe-stack-events --stack-name {stack} --region {region}; then "
    + _DELETE
    + " --deletion-mode FORCE_DELETE_STACK (resources it could not delete are left)",
    "UPDATE_ROLLBACK_FAILED": "aws cloudformation continue-update-rollback --stack-name {stack} --region {region} "
    "(add --resources-to-skip for resources that cannot roll back)",
    "UPDATE_FAILED": "aws cloudformation rollback-stack --stack-name {stack} --region {region}",
    "IMPORT_ROLLBACK_FAILED": "see aws cloudformation describe-stack-events --stack-name {stack} --region {region}",
}
# REVIEW_IN_PROGRESS: created by a change set that never ran; a deploy creates the stack from it.
NOT_BLOCKING_IN_PROGRESS = ("REVIEW_IN_PROGRESS",)


def blocking_fix(status: str, stack: str, region: str) -> str | None:
    """The command that clears a status a deploy cannot start from; None when the status is fine."""
    if status in BLOCKING_STATES:
        return BLOCKING_STATES[status].format(stack=stack, region=region)
    if status.endswith("_IN_PROGRESS") and status not in NOT_BLOCKING_IN_PROGRESS:
        return _WAIT.format(stack=stack, region=region)
    return None


def stack_state_check(stack_name: str, stack: Mapping | None, region: str) -> Check:
    """One stack of the app: absent (first deploy), in a usable state, or blocking."""
    name = f"stack {stack_name}"
    if stack is None:
        return Check(name, PASSED, f"not deployed in {region} yet")
    status = str(stack.get("StackStatus", ""))
    fix = blocking_fix(status, stack_name, region)
    if fix is not None:
        reason = f" ({stack['StackStatusReason']})" if stack.get("StackStatusReason") else ""
        return Check(name, FAILED, f"{status}{reason}: a deploy cannot start from it", fix)
    if status in NOT_BLOCKING_IN_PROGRESS:
        return Check(name, WARNING, f"{status} (an unexecuted change set); cdk deploy creates the stack anew")
    return Check(name, PASSED, status)


def bootstrap_check(
    *,
    stack: Mapping | None,
    version: str | None,
    required: int,
    recommended: int,
    requirement_source: str,
    toolkit_stack: str,
    qualifier: str,
    account: str,
    region: str,
) -> Check:
    """The CDK bootstrap stack in the region, at a version the app's assets need (its SSM parameter)."""
    command = f"npx cdk bootstrap aws://{account}/{region}"
    if qualifier != DEFAULT_QUALIFIER:
        command += f" --qualifier {qualifier}"
    if toolkit_stack != DEFAULT_TOOLKIT_STACK:
        command += f" --toolkit-stack-name {toolkit_stack}"
    parameter = f"/cdk-bootstrap/{qualifier}/version"
    name = "cdk bootstrap"
    if stack is None:
        return Check(name, FAILED, f"no {toolkit_stack} stack in {region}", command)
    status = str(stack.get("StackStatus", ""))
    fix = blocking_fix(status, toolkit_stack, region)
    if fix is not None:
        return Check(name, FAILED, f"{toolkit_stack} is {status}", fix)
    if version is None:
        return Check(name, FAILED, f"{toolkit_stack} exists but SSM parameter {parameter} does not (another qualifier?)", command)
    try:
        number = int(version)
    except ValueError:
        return Check(name, FAILED, f"{parameter} is {version!r}, not a version number", command)
    if number < required:
        return Check(name, FAILED, f"{toolkit_stack} version {number}; the app needs {required} ({requirement_source})", command)
    if number < recommended:
        return Check(
            name,
            WARNING,
            f"{toolkit_stack} version {number} deploys (needs {required}) but its lookup role needs {recommended} "
            "(cdk diff, context lookups)",
            command,
        )
    return Check(name, PASSED, f"{toolkit_stack} version {number} (the app needs {required}, {requirement_source})")


def stack_output(stack: Mapping | None, key: str) -> str:
    """A stack's output value by key ("" when the stack or the output is absent)."""
    for output in (stack or {}).get("Outputs", []) or []:
        if output.get("OutputKey") == key:
            return str(output.get("OutputValue", ""))
    return ""


# --- where the nodes run ---------------------------------------------------------------------


def zone_ids(zones: Iterable[Mapping]) -> dict[str, str]:
    """AZ name -> AZ id of this account (DescribeAvailabilityZones; names differ between accounts)."""
    return {str(z["ZoneName"]): str(z["ZoneId"]) for z in zones if z.get("ZoneName") and z.get("ZoneId")}


def offered_zone_ids(offerings: Iterable[Mapping], instance_type: str) -> set[str]:
    """AZ ids offering the type (DescribeInstanceTypeOfferings, LocationType=availability-zone-id)."""
    return {str(o["Location"]) for o in offerings if o.get("InstanceType") == instance_type}


def neuron_offering_check(instance_type: str, zone: str, ids: Mapping[str, str], offered: set[str]) -> Check:
    name = f"{instance_type} in {zone}"
    if zone not in ids:
        return Check(
            name,
            FAILED,
            f"no AZ {zone} in this region (AZs: {', '.join(sorted(ids)) or 'none'})",
            "-c neuron_nodes.availability_zone=<one of them>",
        )
    if ids[zone] in offered:
        return Check(name, PASSED, f"offered in {zone} (AZ id {ids[zone]})")
    where = sorted(name_ for name_, id_ in ids.items() if id_ in offered)
    found = (
        f"not offered in {zone} (AZ id {ids[zone]}); offered in: {', '.join(f'{n} ({ids[n]})' for n in where) or 'no AZ of this region'}"
    )
    fix = f"-c neuron_nodes.availability_zone={where[0]} (and env.availability_zones with it)" if where else "another region (env.region)"
    return Check(name, FAILED, found, fix)


def system_offering_check(instance_type: str, zones: Sequence[str], ids: Mapping[str, str], offered: set[str]) -> Check:
    name = f"{instance_type} in the VPC's AZs"
    unknown = [z for z in zones if z not in ids]
    if unknown:
        return Check(
            name,
            FAILED,
            f"no AZ {', '.join(unknown)} in this region (AZs: {', '.join(sorted(ids)) or 'none'})",
            "-c env.availability_zones=...",
        )
    missing = [f"{z} ({ids[z]})" for z in zones if ids[z] not in offered]
    if missing:
        return Check(
            name,
            FAILED,
            f"not offered in {', '.join(missing)}",
            "-c system_nodes.instance_type=<a type offered in every AZ>, or other env.availability_zones",
        )
    return Check(name, PASSED, f"offered in {', '.join(f'{z} ({ids[z]})' for z in zones)}")


# --- capacity: reservations --------------------------------------------------------------------

# DescribeCapacityReservations' State enum (EC2 API reference, CapacityReservation): usable now,
# later (with a start date), or never.
USABLE_STATES = ("active",)
LATER_STATES = ("scheduled", "payment-pending", "pending", "assessing", "delayed")
RESERVATION_TYPE = {"capacity-block": "capacity-block", "reservation": "default"}  # capacity_mode -> ReservationType
# The Neuron node group runs EKS's AL2023 Neuron AMI: a Linux reservation.
LINUX_PLATFORM = "Linux/UNIX"


def reservation_checks(
    reservation: Mapping | None,
    *,
    reservation_id: str,
    mode: str,
    instance_type: str,
    zone: str,
    zone_id: str,
    desired: int,
    maximum: int,
    now: datetime,
    run_hours: float,
    run_source: str,
) -> list[Check]:
    """A Capacity Block or ODCR against neuron_nodes.*: it exists, fits, is usable, and lasts the run."""
    if reservation is None:
        return [
            Check(
                f"reservation {reservation_id}",
                FAILED,
                "not found in this region and account",
                "check neuron_nodes.capacity_reservation_id (aws ec2 describe-capacity-reservations)",
            )
        ]
    name = f"reservation {reservation_id}"
    checks = []
    problems = []
    kind = str(reservation.get("ReservationType", "default"))
    if kind != RESERVATION_TYPE.get(mode, kind):
        other = next((m for m, k in RESERVATION_TYPE.items() if k == kind), kind)
        problems.append(f"it is a {kind} reservation, not a {mode} (-c neuron_nodes.capacity_mode={other})")
    if reservation.get("InstanceType") != instance_type:
        problems.append(f"it reserves {reservation.get('InstanceType')}, neuron_nodes.instance_type is {instance_type}")
    where, where_id = reservation.get("AvailabilityZone", ""), reservation.get("AvailabilityZoneId", "")
    if where != zone and not (where_id and where_id == zone_id):
        problems.append(f"it is in {where}, neuron_nodes.availability_zone is {zone} (-c neuron_nodes.availability_zone={where})")
    platform = reservation.get("InstancePlatform", LINUX_PLATFORM)
    if platform != LINUX_PLATFORM:
        problems.append(f"its platform is {platform}, the Neuron AMI needs {LINUX_PLATFORM}")
    total = int(reservation.get("TotalInstanceCount", 0))
    available = int(reservation.get("AvailableInstanceCount", total))
    # A Capacity Block's instances are all the caller's; an ODCR's free slots may be taken by other instances.
    count = total if kind == "capacity-block" else available
    if count < desired:
        problems.append(
            f"it holds {count} free instance(s) of {total}, neuron_nodes.desired_size is {desired} (-c neuron_nodes.desired_size={count})"
        )
    if problems:
        checks.append(Check(f"{name} fit", FAILED, "; ".join(problems), "a reservation that matches, or settings that match it"))
    elif maximum > total:
        checks.append(
            Check(
                f"{name} fit",
                WARNING,
                f"{total} instance(s) reserved, neuron_nodes.max_size is {maximum}: scaling past {total} finds no capacity",
            )
        )
    else:
        checks.append(Check(f"{name} fit", PASSED, f"{kind}, {instance_type} x{total} ({count} free) in {where} ({where_id or '?'})"))

    state = str(reservation.get("State", ""))
    start = reservation.get("StartDate")
    if state in USABLE_STATES:
        checks.append(Check(f"{name} state", PASSED, state))
    elif state in LATER_STATES:
        when = f", starts {_when(start)}" if isinstance(start, datetime) else ""
        checks.append(
            Check(f"{name} state", WARNING, f"{state}{when}: instances cannot launch before it is active", "deploy once it is active")
        )
    else:
        checks.append(Check(f"{name} state", FAILED, f"{state or 'unknown'}: it holds no capacity", "a new reservation"))

    begin = max(now, start) if isinstance(start, datetime) else now
    needed = begin + timedelta(hours=run_hours)
    end = reservation.get("EndDate")
    if reservation.get("EndDateType") == "unlimited" or not isinstance(end, datetime):
        checks.append(Check(f"{name} end", PASSED, f"no end date; the run needs {run_hours:.1f} h ({run_source})"))
    elif end < needed:
        checks.append(
            Check(
                f"{name} end",
                FAILED,
                f"ends {_when(end)}, the run ({run_hours:.1f} h, {run_source}) from {_when(begin)} needs it until {_when(needed)}",
                "extend it (a Capacity Block: buy an extension), or plan a shorter run",
            )
        )
    else:
        checks.append(
            Check(f"{name} end", PASSED, f"ends {_when(end)}, after the run's {run_hours:.1f} h ({run_source}) from {_when(begin)}")
        )
    return checks


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment.utcoffset() in (None, timedelta(0)) else moment.isoformat()


# --- capacity: on-demand vCPU quotas -------------------------------------------------------------

# EC2 on-demand quotas are vCPUs per instance class and found here by name, since codes are not
# documented in one place: "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" is
# L-1216C47A (AWS CLI user guide, service-quotas examples, get-aws-default-service-quota output);
# "Running On-Demand Trn instances" is L-2C3B7624 in public quota tables (quota listings and
# tooling; one Terraform template says L-2C49D5F8, which is why the name, not the code, is matched).
_QUOTA_NAME = re.compile(r"^Running On-Demand (.+?) instances$", re.IGNORECASE)
_FAMILY = re.compile(r"^([a-z]+)")
# Classes named by a word rather than family letters.
_CLASS_FAMILIES = {"g and vt": ("g", "vt"), "high memory": ("u",)}


def instance_family(instance_type: str) -> str:
    """The letters before the generation: trn2.48xlarge -> trn, m7i.xlarge -> m, u-6tb1.metal -> u."""
    match = _FAMILY.match(instance_type.lower())
    return match.group(1) if match else ""


def quota_families(quota_name: str) -> tuple[str, ...]:
    """Families an on-demand quota covers: "Standard (A, C, ...)" -> a, c, ...; "Trn" -> trn."""
    match = _QUOTA_NAME.match(quota_name.strip())
    if not match:
        return ()
    klass = match.group(1).strip().lower()
    listed = re.search(r"\(([^)]*)\)", klass)
    if listed:
        return tuple(part.strip() for part in listed.group(1).split(",") if part.strip())
    return _CLASS_FAMILIES.get(klass, (klass,))


def quota_for(instance_type: str, quotas: Iterable[Mapping]) -> Mapping | None:
    family = instance_family(instance_type)
    for quota in quotas:
        if family and family in quota_families(str(quota.get("QuotaName", ""))):
            return quota
    return None


@dataclass(frozen=True)
class VcpuNeed:
    what: str  # the setting, e.g. neuron_nodes
    instance_type: str
    vcpus: int  # per instance
    desired: int
    maximum: int


def vcpus_in_use(instances: Iterable[Mapping], vcpus: Mapping[str, int], quotas: Sequence[Mapping]) -> dict[str, int]:
    """Quota code -> vCPUs of the pending and running on-demand instances it covers (DescribeInstances;
    an instance with an ``InstanceLifecycle``, spot or capacity-block, is not on-demand)."""
    used: dict[str, int] = {}
    for instance in instances:
        if instance.get("InstanceLifecycle"):
            continue
        quota = quota_for(str(instance.get("InstanceType", "")), quotas)
        count = vcpus.get(str(instance.get("InstanceType", "")), 0)
        if quota is not None and count:
            code = str(quota.get("QuotaCode"))
            used[code] = used.get(code, 0) + count
    return used


def quota_checks(needs: Sequence[VcpuNeed], quotas: Sequence[Mapping], in_use: Mapping[str, int] | None = None) -> list[Check]:
    """Each quota the on-demand node groups draw on against their summed vCPUs at desired (and max)
    size, and against what running instances leave of it (``in_use``: vcpus_in_use)."""
    by_quota: dict[str, tuple[Mapping | None, list[VcpuNeed]]] = {}
    for need in needs:
        quota = quota_for(need.instance_type, quotas)
        key = str(quota.get("QuotaCode")) if quota else f"none:{instance_family(need.instance_type)}"
        by_quota.setdefault(key, (quota, []))[1].append(need)
    checks = []
    for quota, group in by_quota.values():
        labels = " + ".join(f"{n.what} {n.desired} x {n.instance_type} ({n.vcpus} vCPUs)" for n in group)
        if quota is None:
            family = instance_family(group[0].instance_type)
            checks.append(
                Check(
                    f"quota for {family} instances",
                    FAILED,
                    f"no 'Running On-Demand ... instances' quota covers family {family!r}",
                    "check the instance type",
                )
            )
            continue
        name = f"quota {quota.get('QuotaName')} ({quota.get('QuotaCode')})"
        value = float(quota.get("Value", 0.0))
        at_desired = sum(n.vcpus * n.desired for n in group)
        at_max = sum(n.vcpus * n.maximum for n in group)
        fix = (
            "request an increase: aws service-quotas request-service-quota-increase --service-code ec2 "
            f"--quota-code {quota.get('QuotaCode')} --desired-value {at_max}"
        )
        used = (in_use or {}).get(str(quota.get("QuotaCode")), 0)
        if value < at_desired:
            checks.append(Check(name, FAILED, f"{value:g} vCPUs; {labels} need {at_desired}", fix))
        elif value - used < at_desired:
            checks.append(
                Check(
                    name,
                    WARNING,
                    f"{value:g} vCPUs, {used} in use by running on-demand instances (this cluster's own nodes among them, if "
                    f"deployed): {value - used:g} left, {labels} need {at_desired}",
                    f"stop instances of this class, or {fix}",
                )
            )
        elif value < at_max:
            checks.append(Check(name, WARNING, f"{value:g} vCPUs: enough for {labels} ({at_desired}), not for max_size ({at_max})", fix))
        else:
            checks.append(Check(name, PASSED, f"{value:g} vCPUs >= {at_desired} for {labels} ({used} in use by running instances)"))
    return checks


# --- EKS ------------------------------------------------------------------------------------------


def kubernetes_version_check(version: str, cluster_versions: Sequence[Mapping]) -> Check:
    """DescribeClusterVersions(clusterVersions=[v]): offered, and in standard or extended support."""
    name = f"Kubernetes {version}"
    match = [v for v in cluster_versions if str(v.get("clusterVersion")) == version]
    if not match:
        offered = sorted({str(v.get("clusterVersion")) for v in cluster_versions})
        return Check(
            name,
            FAILED,
            "not offered by EKS in this region" + (f" (offered: {', '.join(offered)})" if offered else ""),
            "-c cluster.kubernetes_version=<an offered version>",
        )
    status = str(match[0].get("versionStatus") or match[0].get("status") or "").upper().replace("-", "_")
    if status == "UNSUPPORTED":
        return Check(name, FAILED, "offered but unsupported by EKS", "-c cluster.kubernetes_version=<a supported version>")
    if status == "EXTENDED_SUPPORT":
        return Check(name, WARNING, "in extended support (a higher hourly control-plane price)", "a version in standard support")
    return Check(name, PASSED, f"offered ({status.lower().replace('_', ' ') or 'status not given'})")


def offered_addon_versions(addons: Iterable[Mapping], addon_name: str) -> list[str]:
    """Versions of one add-on DescribeAddonVersions lists (already filtered to a Kubernetes version)."""
    return [str(v["addonVersion"]) for a in addons if a.get("addonName") == addon_name for v in a.get("addonVersions", [])]


def default_addon_version(addons: Iterable[Mapping], addon_name: str) -> str:
    for a in addons:
        if a.get("addonName") != addon_name:
            continue
        for v in a.get("addonVersions", []):
            if any(c.get("defaultVersion") for c in v.get("compatibilities", [])):
                return str(v["addonVersion"])
    return ""


def addon_check(addon_name: str, setting: str, pinned: str, kubernetes_version: str, addons: Sequence[Mapping]) -> Check:
    name = f"add-on {addon_name} {pinned}"
    offered = offered_addon_versions(addons, addon_name)
    if pinned in offered:
        return Check(name, PASSED, f"offered for Kubernetes {kubernetes_version}")
    if not offered:
        return Check(
            name, FAILED, f"EKS offers no {addon_name} version for Kubernetes {kubernetes_version}", "another cluster.kubernetes_version"
        )
    default = default_addon_version(addons, addon_name) or offered[0]
    return Check(
        name,
        FAILED,
        f"not offered for Kubernetes {kubernetes_version} (offered: {', '.join(offered[:4])}{' ...' if len(offered) > 4 else ''})",
        f"-c {setting}={default}",
    )


# --- what is pulled, secrets, the bucket ---------------------------------------------------------

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_FLOATING = re.compile(r"^[^0-9]*$")  # as config/catalog.py FLOATING_TAG: a tag without a digit moves


def pulls_checks(images: Sequence[tuple[str, str]], chart: str) -> list[Check]:
    """The images and the chart the deploy pulls, as it will pull them (no registry is asked)."""
    checks = [Check("pulls chart", PASSED, chart)]
    for use, image in images:
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        if _DIGEST.search(image) or (tag and not _FLOATING.match(tag)):
            checks.append(Check(f"pulls {use}", PASSED, image))
        else:
            checks.append(Check(f"pulls {use}", WARNING, f"{image}: not pinned by a version tag or digest", "pin a version"))
    return checks


def secret_check(arn: str, described: Mapping | None, error_code: str = "") -> Check:
    """The Hugging Face token secret (serving.hf_token_secret_arn), when one is configured."""
    name = "hf token secret"
    if not arn:
        return Check(name, PASSED, "none configured (anonymous model downloads)")
    if described is None:
        return Check(name, FAILED, f"{arn}: {error_code or 'not found'}", "create it, or fix serving.hf_token_secret_arn")
    if described.get("DeletedDate"):
        return Check(name, FAILED, f"{arn} is scheduled for deletion", f"aws secretsmanager restore-secret --secret-id {arn}")
    return Check(name, PASSED, f"{described.get('Name', arn)} exists")


def bucket_check(bucket: str, status: int | None, *, source: str, region: str = "", expected_region: str = "") -> Check:
    """HeadBucket's answer for the data bucket's name: 404 free, 403 someone else's, 200 ours."""
    name = "data bucket"
    if not bucket:
        return Check(name, PASSED, "no fixed name: CloudFormation generates a unique one on the first deploy")
    if status == 404:
        if source == "stack output":
            return Check(
                name,
                WARNING,
                f"{bucket} (the SpecDecodeData stack's output) no longer exists",
                "deleted outside CloudFormation? the next deploy cannot bring it back: destroy and redeploy SpecDecodeData",
            )
        return Check(name, PASSED, f"{bucket} is free")
    if status == 403:
        # S3 API reference, HeadBucket: 200 needs s3:ListBucket on the bucket; without it, or for a
        # bucket of another account, the answer is 403.
        return Check(
            name,
            FAILED,
            f"{bucket} exists and is not ours (403: another account's, or your policy lacks s3:ListBucket on it)",
            "choose another bucket name (or grant s3:ListBucket if it is yours)",
        )
    if status == 200:
        if region and expected_region and region != expected_region:
            return Check(name, WARNING, f"{bucket} is ours but in {region}, the deploy is in {expected_region}")
        return Check(name, PASSED, f"{bucket} is ours ({source})")
    return Check(name, FAILED, f"HeadBucket {bucket} answered {status}", "rerun")
