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

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .commands import WITH_CONTEXT, alternatives, cli_command, rerun, settings_fix, word

PASSED, WARNING, FAILED = "passed", "warning", "failed"
EXIT_PASSED, EXIT_FAILED, EXIT_WARNINGS = 0, 1, 3


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # PASSED, WARNING or FAILED
    found: str
    fix: str = ""

    def line(self, context_args: Sequence[str] = ()) -> str:
        """The printed line; a fix that is options or a cdk command gets the user's -c settings."""
        fix = rerun(self.fix, context_args)
        return f"{self.status:<7}  {self.name}: {self.found}" + (f" | fix: {fix}" if fix else "")


def exit_code(checks: Iterable[Check]) -> int:
    """0 when every check passed, 1 on any failure, 3 when the worst is a warning."""
    statuses = {c.status for c in checks}
    if FAILED in statuses:
        return EXIT_FAILED
    return EXIT_WARNINGS if WARNING in statuses else EXIT_PASSED


# Errors of a call that only more time can get past: the fix is a longer bound (--time-limit).
TIME_LIMIT_ERRORS = ("TimeLimitExceeded", "TimeLimitSpent")


def api_failure(name: str, call: str, code: str, message: str = "", command: str = "", action: str = "") -> Check:
    """A check whose one API call ``call`` (``eks:DescribeClusterVersions``) failed (refused,
    unreachable, unreadable, out of time): not checked, so a warning, not a verdict on the account.
    The fix is ``command``, the AWS CLI command of the same call, which shows the whole error (after
    granting ``action``, the IAM action, when access was refused), or a longer bound."""
    detail = f" ({message})" if message else ""
    denied = any(word in code for word in ("AccessDenied", "Unauthorized", "UnrecognizedClient", "AuthFailure", "Forbidden"))
    grant = f"; grant {action or call} (docs/preflight.md, Permissions)" if denied else ""
    fix = command
    if code in TIME_LIMIT_ERRORS:
        fix = alternatives("--time-limit 120", command)
    return Check(name, WARNING, f"not checked: {call} failed: {code}{detail}{grant}", fix)


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
        f"the credentials are in account {caller_account}, env.account is {configured_account}: "
        f"use credentials of {configured_account} (export AWS_PROFILE=a profile of it), or deploy to {caller_account}",
        settings_fix({"env.account": caller_account}),
    )


def region_check(region: str, configured: bool, cli_region: str) -> Check:
    """The deploy's region, and whether the CLI's default region (kubectl, aws eks ...) agrees."""
    if not configured and not cli_region:
        return Check(
            "region",
            WARNING,
            f"{region}: neither env.region nor a CLI region is set, so the CDK CLI falls back to it",
            alternatives(f"export AWS_REGION={word(region)}", settings_fix({"env.region": region})),
        )
    source = "env.region" if configured else "the CLI's default region"
    if cli_region and cli_region != region:
        return Check(
            "region",
            WARNING,
            f"the deploy goes to {region} ({source}); your CLI's default region is {cli_region}",
            f"export AWS_REGION={word(region)}",
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
# The context key of the qualifier (the same file's BOOTSTRAP_QUALIFIER_CONTEXT).
QUALIFIER_CONTEXT = "@aws-cdk/core:bootstrapQualifier"
DEFAULT_TOOLKIT_STACK = "CDKToolkit"

# Stack statuses (CloudFormation's StackStatus enum) a deploy cannot start from: what to do (printed
# with the status) and the command that does it (the fix, pasteable; --query quoted for zsh).
_DELETE = "aws cloudformation delete-stack --stack-name {stack} --region {region}"
_EVENTS = (
    "aws cloudformation describe-stack-events --stack-name {stack} --region {region} --max-items 20 "
    "--query 'StackEvents[].[LogicalResourceId,ResourceStatus,ResourceStatusReason]' --output table"
)
_WAIT = "aws cloudformation describe-stacks --stack-name {stack} --region {region} --query 'Stacks[0].StackStatus' --output text"
BLOCKING_STATES: dict[str, tuple[str, str]] = {
    # A failed first create cannot be updated ("is in ROLLBACK_COMPLETE state and can not be updated").
    "ROLLBACK_COMPLETE": ("delete it, then deploy again", _DELETE),
    "ROLLBACK_FAILED": ("delete it (after fixing what describe-stack-events names), then deploy again", _DELETE),
    "CREATE_FAILED": ("delete it, then deploy again", _DELETE),
    "DELETE_FAILED": (
        "read describe-stack-events, then force the delete (it leaves the resources it could not delete)",
        _DELETE + " --deletion-mode FORCE_DELETE_STACK",
    ),
    "UPDATE_ROLLBACK_FAILED": (
        "continue the rollback (add --resources-to-skip for resources that cannot roll back)",
        "aws cloudformation continue-update-rollback --stack-name {stack} --region {region}",
    ),
    "UPDATE_FAILED": ("roll it back", "aws cloudformation rollback-stack --stack-name {stack} --region {region}"),
    "IMPORT_ROLLBACK_FAILED": ("fix what describe-stack-events names", _EVENTS),
}
# REVIEW_IN_PROGRESS: created by a change set that never ran; a deploy creates the stack from it.
NOT_BLOCKING_IN_PROGRESS = ("REVIEW_IN_PROGRESS",)


def blocking(status: str, stack: str, region: str) -> tuple[str, str] | None:
    """(what to do, the command) for a status a deploy cannot start from; None when it is fine."""
    names = {"stack": word(stack), "region": word(region)}
    if status in BLOCKING_STATES:
        advice, command = BLOCKING_STATES[status]
        return advice, command.format(**names)
    if status.endswith("_IN_PROGRESS") and status not in NOT_BLOCKING_IN_PROGRESS:
        return "wait until it settles", _WAIT.format(**names)
    return None


def blocking_fix(status: str, stack: str, region: str) -> str | None:
    """The command that clears a status a deploy cannot start from; None when the status is fine."""
    found = blocking(status, stack, region)
    return found[1] if found else None


def stack_state_check(stack_name: str, stack: Mapping | None, region: str) -> Check:
    """One stack of the app: absent (first deploy), in a usable state, or blocking."""
    name = f"stack {stack_name}"
    if stack is None:
        return Check(name, PASSED, f"not deployed in {region} yet")
    status = str(stack.get("StackStatus", ""))
    block = blocking(status, stack_name, region)
    if block is not None:
        reason = f" ({stack['StackStatusReason']})" if stack.get("StackStatusReason") else ""
        return Check(name, FAILED, f"{status}{reason}: a deploy cannot start from it; {block[0]}", block[1])
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
    command = f"npx cdk bootstrap {word(f'aws://{account}/{region}')}"
    if qualifier != DEFAULT_QUALIFIER:
        command += f" --qualifier {word(qualifier)}"
    if toolkit_stack != DEFAULT_TOOLKIT_STACK:
        command += f" --toolkit-stack-name {word(toolkit_stack)}"
    parameter = f"/cdk-bootstrap/{qualifier}/version"
    name = "cdk bootstrap"
    if stack is None:
        return Check(name, FAILED, f"no {toolkit_stack} stack in {region}", command)
    status = str(stack.get("StackStatus", ""))
    block = blocking(status, toolkit_stack, region)
    if block is not None:
        return Check(name, FAILED, f"{toolkit_stack} is {status}: {block[0]}", block[1])
    if version is None:
        theirs = stack_parameter(stack, "Qualifier")
        if theirs and theirs != qualifier:
            # The bootstrap template's `Qualifier` parameter (aws-cdk's bootstrap-template.yaml) names
            # the qualifier the stack was made with: the app can use that one (aws-cdk-lib reads it
            # from the context key; the stack and asset names follow it), or the stack can be redone.
            return Check(
                name,
                FAILED,
                f"{toolkit_stack} was bootstrapped with qualifier {theirs}, the app uses {qualifier} "
                f"(no SSM parameter {parameter}): set the app's qualifier to {theirs}, or bootstrap with {qualifier} "
                "(which changes the stack's qualifier for every app that uses it)",
                alternatives(settings_fix({QUALIFIER_CONTEXT: theirs}), command),
            )
        return Check(name, FAILED, f"{toolkit_stack} exists but SSM parameter {parameter} does not", command)
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


def stack_parameter(stack: Mapping | None, key: str) -> str:
    """A stack's parameter value by key (DescribeStacks' Parameters; "" when absent)."""
    for item in (stack or {}).get("Parameters", []) or []:
        if item.get("ParameterKey") == key:
            return str(item.get("ParameterValue", ""))
    return ""


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


@dataclass(frozen=True)
class Elsewhere:
    """Another region that offers the Neuron type: its name, its AZs that offer it, all its AZs."""

    region: str
    offering: tuple[str, ...]
    zones: tuple[str, ...]


def zones_with(zone: str, zones: Sequence[str], count: int = 3) -> tuple[str, ...]:
    """``count`` AZs for the VPC that include ``zone`` (the Neuron nodes' AZ must be one of them)."""
    return (zone, *[z for z in sorted(zones) if z != zone][: count - 1])


def neuron_offering_check(
    instance_type: str,
    zone: str,
    ids: Mapping[str, str],
    offered: set[str],
    *,
    region: str = "",
    vpc_zones: Sequence[str] = (),
    elsewhere: Elsewhere | None = None,
) -> Check:
    """The Neuron type in its AZ (by id); when it is not offered, the fix names an AZ of this region
    that offers it, else the first other region that does (``elsewhere``, from its own offerings)."""
    name = f"{instance_type} in {zone}"
    if zone not in ids:
        known = sorted(ids)
        return Check(
            name,
            FAILED,
            f"no AZ {zone} in this region (AZs: {', '.join(known) or 'none'})",
            settings_fix({"neuron_nodes.availability_zone": known[0]})
            if known
            else cli_command("ec2", "DescribeAvailabilityZones", region, {}),
        )
    if ids[zone] in offered:
        return Check(name, PASSED, f"offered in {zone} (AZ id {ids[zone]})")
    where = sorted(name_ for name_, id_ in ids.items() if id_ in offered)
    found = (
        f"not offered in {zone} (AZ id {ids[zone]}); offered in: {', '.join(f'{n} ({ids[n]})' for n in where) or 'no AZ of this region'}"
    )
    if where:
        vpc = tuple(where[0] if z == zone else z for z in vpc_zones) if where[0] not in vpc_zones else tuple(vpc_zones)
        settings: dict[str, object] = {"neuron_nodes.availability_zone": where[0]}
        if vpc != tuple(vpc_zones):
            settings["env.availability_zones"] = vpc
        return Check(name, FAILED, found, settings_fix(settings))
    if elsewhere is not None:
        target_zone = elsewhere.offering[0]
        settings = {
            "env.region": elsewhere.region,
            "neuron_nodes.availability_zone": target_zone,
            "env.availability_zones": zones_with(target_zone, elsewhere.zones),
        }
        found += f"; {elsewhere.region} offers it in {', '.join(elsewhere.offering)}"
        return Check(name, FAILED, found, settings_fix(settings))
    found += "; no other region of this account was found to offer it"
    lookup = cli_command(
        "ec2",
        "DescribeInstanceTypeOfferings",
        region,
        {"LocationType": "region", "Filters": [{"Name": "instance-type", "Values": [instance_type]}]},
        query="InstanceTypeOfferings[].Location",
    )
    return Check(name, FAILED, found, lookup)


def system_offering_check(
    instance_type: str, zones: Sequence[str], ids: Mapping[str, str], offered: set[str], *, neuron_zone: str = "", region: str = ""
) -> Check:
    """The system nodes' type in every AZ of the VPC; the fix names AZs that offer it (with the Neuron
    nodes' AZ, which must stay among them) when there are enough, else the command that lists types."""
    name = f"{instance_type} in the VPC's AZs"
    unknown = [z for z in zones if z not in ids]
    offering = sorted(z for z, id_ in ids.items() if id_ in offered)
    usable = zones_with(neuron_zone, offering) if neuron_zone in offering else tuple(offering[:3])
    settings_or_lookup = (
        settings_fix({"env.availability_zones": usable})
        if len(usable) >= 2
        else cli_command(
            "ec2",
            "DescribeInstanceTypeOfferings",
            region,
            {"LocationType": "availability-zone", "Filters": [{"Name": "location", "Values": list(zones)}]},
            query="InstanceTypeOfferings[].[Location,InstanceType]",
        )
    )
    if unknown:
        return Check(
            name, FAILED, f"no AZ {', '.join(unknown)} in this region (AZs: {', '.join(sorted(ids)) or 'none'})", settings_or_lookup
        )
    missing = [f"{z} ({ids[z]})" for z in zones if ids[z] not in offered]
    if missing:
        return Check(name, FAILED, f"not offered in {', '.join(missing)}; offered in: {', '.join(offering) or 'none'}", settings_or_lookup)
    return Check(name, PASSED, f"offered in {', '.join(f'{z} ({ids[z]})' for z in zones)}")


# --- capacity: reservations --------------------------------------------------------------------

# DescribeCapacityReservations' State enum (EC2 API reference, CapacityReservation): usable now,
# later (with a start date), or never.
USABLE_STATES = ("active",)
LATER_STATES = ("scheduled", "payment-pending", "pending", "assessing", "delayed")
RESERVATION_TYPE = {"capacity-block": "capacity-block", "reservation": "default"}  # capacity_mode -> ReservationType
# The Neuron node group runs EKS's AL2023 Neuron AMI: a Linux reservation.
LINUX_PLATFORM = "Linux/UNIX"


def new_reservation_command(mode: str, region: str, instance_type: str, zone: str, count: int, run_hours: float) -> str:
    """What gets a reservation that fits: Capacity Block offerings for the run (their lengths are
    whole days, so the run's hours rounded up to 24s: EC2 API reference, CapacityDurationHours), or
    an ODCR created in the Neuron nodes' AZ (EC2 API reference, CreateCapacityReservation)."""
    if mode == "capacity-block":
        hours = 24 * max(1, math.ceil(run_hours / 24))
        parameters = {"InstanceType": instance_type, "InstanceCount": count, "CapacityDurationHours": hours}
        return cli_command("ec2", "DescribeCapacityBlockOfferings", region, parameters)
    parameters = {"InstanceType": instance_type, "InstancePlatform": LINUX_PLATFORM, "AvailabilityZone": zone, "InstanceCount": count}
    return cli_command("ec2", "CreateCapacityReservation", region, parameters)


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
    region: str = "",
) -> list[Check]:
    """A Capacity Block or ODCR against neuron_nodes.*: it exists, fits, is usable, and lasts the run."""
    again = new_reservation_command(mode, region, instance_type, zone, desired, run_hours)
    if reservation is None:
        listing = cli_command(
            "ec2",
            "DescribeCapacityReservations",
            region,
            {"Filters": [{"Name": "instance-type", "Values": [instance_type]}]},
            query="CapacityReservations[].[CapacityReservationId,ReservationType,State,AvailabilityZone,TotalInstanceCount]",
        )
        return [Check(f"reservation {reservation_id}", FAILED, "not found in this region and account", alternatives(listing, again))]
    name = f"reservation {reservation_id}"
    checks = []
    problems = []
    settings: dict[str, object] = {}
    kind = str(reservation.get("ReservationType", "default"))
    if kind != RESERVATION_TYPE.get(mode, kind):
        other = next((m for m, k in RESERVATION_TYPE.items() if k == kind), kind)
        problems.append(f"it is a {kind} reservation, not a {mode} (-c neuron_nodes.capacity_mode={other})")
        settings["neuron_nodes.capacity_mode"] = other
    if reservation.get("InstanceType") != instance_type:
        problems.append(f"it reserves {reservation.get('InstanceType')}, neuron_nodes.instance_type is {instance_type}")
        settings["neuron_nodes.instance_type"] = reservation.get("InstanceType")
    where, where_id = reservation.get("AvailabilityZone", ""), reservation.get("AvailabilityZoneId", "")
    if where != zone and not (where_id and where_id == zone_id):
        problems.append(f"it is in {where}, neuron_nodes.availability_zone is {zone} (-c neuron_nodes.availability_zone={where})")
        settings["neuron_nodes.availability_zone"] = where
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
        if count > 0:
            settings["neuron_nodes.desired_size"] = count
    if problems:
        # Settings that match it, when settings can (not a platform, nor a reservation with no free instance).
        matches = settings and platform == LINUX_PLATFORM and count > 0
        checks.append(Check(f"{name} fit", FAILED, "; ".join(problems), settings_fix(settings) if matches else again))
    elif maximum > total:
        checks.append(
            Check(
                f"{name} fit",
                WARNING,
                f"{total} instance(s) reserved, neuron_nodes.max_size is {maximum}: scaling past {total} finds no capacity",
                settings_fix({"neuron_nodes.max_size": total}),
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
            Check(
                f"{name} state",
                WARNING,
                f"{state}{when}: instances cannot launch before it is active; deploy once it is",
                cli_command(
                    "ec2",
                    "DescribeCapacityReservations",
                    region,
                    {"CapacityReservationIds": [reservation_id]},
                    "CapacityReservations[0].State",
                ),
            )
        )
    else:
        checks.append(Check(f"{name} state", FAILED, f"{state or 'unknown'}: it holds no capacity", again))

    begin = max(now, start) if isinstance(start, datetime) else now
    needed = begin + timedelta(hours=run_hours)
    end = reservation.get("EndDate")
    if reservation.get("EndDateType") == "unlimited" or not isinstance(end, datetime):
        checks.append(Check(f"{name} end", PASSED, f"no end date; the run needs {run_hours:.1f} h ({run_source})"))
    elif end < needed:
        short = needed - end
        if kind == "capacity-block":
            # Capacity Block extensions are whole days too (EC2 API reference, CapacityBlockExtensionDurationHours).
            hours = 24 * max(1, math.ceil(short.total_seconds() / 86400))
            parameters = {"CapacityReservationId": reservation_id, "CapacityBlockExtensionDurationHours": hours}
            extend = cli_command("ec2", "DescribeCapacityBlockExtensionOfferings", region, parameters)
        else:
            parameters = {
                "CapacityReservationId": reservation_id,
                "EndDateType": "limited",
                "EndDate": needed.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            extend = cli_command("ec2", "ModifyCapacityReservation", region, parameters)
        checks.append(
            Check(
                f"{name} end",
                FAILED,
                f"ends {_when(end)}, the run ({run_hours:.1f} h, {run_source}) from {_when(begin)} needs it until {_when(needed)}: "
                "extend it, or plan a shorter run",
                extend,
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


# Codes to ask GetAWSDefaultServiceQuota for when ListServiceQuotas leaves a family's quota out (it
# can omit quotas that have no applied value: REFERENCE.md section 7): the two codes above, by the
# families their names cover.
DEFAULT_QUOTA_CODES = {"trn": "L-2C3B7624", **dict.fromkeys(("a", "c", "d", "h", "i", "m", "r", "t", "z"), "L-1216C47A")}
DEFAULT_SOURCE = "aws-default"  # marks a quota read from GetAWSDefaultServiceQuota


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


def quota_checks(
    needs: Sequence[VcpuNeed], quotas: Sequence[Mapping], in_use: Mapping[str, int] | None = None, region: str = ""
) -> list[Check]:
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
            # Not a verdict: ListServiceQuotas may leave a quota out, and no default code is known here.
            family = instance_family(group[0].instance_type)
            checks.append(
                Check(
                    f"quota for {family} instances",
                    WARNING,
                    f"not checked: servicequotas:ListServiceQuotas lists no 'Running On-Demand ... instances' quota for family {family!r}",
                    cli_command(
                        "service-quotas",
                        "ListAWSDefaultServiceQuotas",
                        region,
                        {"ServiceCode": "ec2"},
                        query="Quotas[?starts_with(QuotaName, `Running On-Demand`)].[QuotaCode,QuotaName,Value]",
                    ),
                )
            )
            continue
        name = f"quota {quota.get('QuotaName')} ({quota.get('QuotaCode')})"
        source = " (the AWS default: ListServiceQuotas lists no applied value)" if quota.get("_source") == DEFAULT_SOURCE else ""
        value = float(quota.get("Value", 0.0))
        at_desired = sum(n.vcpus * n.desired for n in group)
        at_max = sum(n.vcpus * n.maximum for n in group)
        fix = (
            "aws service-quotas request-service-quota-increase" + (f" --region {word(region)}" if region else "") + " --service-code ec2 "
            f"--quota-code {word(quota.get('QuotaCode'))} --desired-value {at_max}"
        )
        used = (in_use or {}).get(str(quota.get("QuotaCode")), 0)
        if value < at_desired:
            checks.append(Check(name, FAILED, f"{value:g} vCPUs{source}; {labels} need {at_desired}", fix))
        elif value - used < at_desired:
            checks.append(
                Check(
                    name,
                    WARNING,
                    f"{value:g} vCPUs, {used} in use by running on-demand instances (this cluster's own nodes among them, if "
                    f"deployed): {value - used:g} left, {labels} need {at_desired}",
                    fix,
                )
            )
        elif value < at_max:
            checks.append(Check(name, WARNING, f"{value:g} vCPUs: enough for {labels} ({at_desired}), not for max_size ({at_max})", fix))
        else:
            checks.append(Check(name, PASSED, f"{value:g} vCPUs{source} >= {at_desired} for {labels} ({used} in use by running instances)"))
    return checks


# --- EKS ------------------------------------------------------------------------------------------


def _versions_command(region: str) -> str:
    """The EKS versions in standard support, newest last (EKS API reference, DescribeClusterVersions:
    versionStatus STANDARD_SUPPORT | EXTENDED_SUPPORT | UNSUPPORTED)."""
    return cli_command(
        "eks",
        "DescribeClusterVersions",
        region,
        {"versionStatus": "STANDARD_SUPPORT"},
        query="clusterVersions[].[clusterVersion,endOfStandardSupportDate]",
    )


def kubernetes_version_check(version: str, cluster_versions: Sequence[Mapping], region: str = "") -> Check:
    """DescribeClusterVersions(clusterVersions=[v]): offered, and in standard or extended support,
    with the support end dates EKS gives (endOfStandardSupportDate, endOfExtendedSupportDate)."""
    name = f"Kubernetes {version}"
    match = [v for v in cluster_versions if str(v.get("clusterVersion")) == version]
    if not match:
        offered = sorted({str(v.get("clusterVersion")) for v in cluster_versions}, key=_version_key)
        return Check(
            name,
            FAILED,
            "not offered by EKS in this region" + (f" (offered: {', '.join(offered)})" if offered else ""),
            settings_fix({"cluster.kubernetes_version": offered[-1]}) if offered else _versions_command(region),
        )
    item = match[0]
    status = str(item.get("versionStatus") or item.get("status") or "").upper().replace("-", "_")
    standard_end, extended_end = _date(item.get("endOfStandardSupportDate")), _date(item.get("endOfExtendedSupportDate"))
    if status == "UNSUPPORTED":
        return Check(name, FAILED, "offered but unsupported by EKS", _versions_command(region))
    if status == "EXTENDED_SUPPORT":
        until = f" until {extended_end}" if extended_end else ""
        return Check(
            name,
            WARNING,
            f"in extended support{until} (a higher hourly control-plane price); pick one in standard support",
            _versions_command(region),
        )
    until = f" until {standard_end}" if standard_end and status == "STANDARD_SUPPORT" else ""
    return Check(name, PASSED, f"offered ({status.lower().replace('_', ' ') or 'status not given'}{until})")


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def _date(value: object) -> str:
    """A support date as EKS returns it (a timestamp: botocore gives a datetime) as YYYY-MM-DD."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d")
    return str(value)[:10] if value else ""


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


def addon_check(addon_name: str, setting: str, pinned: str, kubernetes_version: str, addons: Sequence[Mapping], region: str = "") -> Check:
    name = f"add-on {addon_name} {pinned}"
    offered = offered_addon_versions(addons, addon_name)
    if pinned in offered:
        return Check(name, PASSED, f"offered for Kubernetes {kubernetes_version}")
    if not offered:
        listing = cli_command(
            "eks",
            "DescribeAddonVersions",
            region,
            {"addonName": addon_name},
            query="addons[].addonVersions[].[addonVersion,compatibilities[0].clusterVersion]",
        )
        return Check(name, FAILED, f"EKS offers no {addon_name} version for Kubernetes {kubernetes_version}", listing)
    default = default_addon_version(addons, addon_name) or offered[0]
    return Check(
        name,
        FAILED,
        f"not offered for Kubernetes {kubernetes_version} (offered: {', '.join(offered[:4])}{' ...' if len(offered) > 4 else ''})",
        settings_fix({setting: default}),
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


def _secret_region(arn: str) -> str:
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 else ""


def secret_check(arn: str, described: Mapping | None, error_code: str = "") -> Check:
    """The Hugging Face token secret (serving.hf_token_secret_arn), when one is configured."""
    name = "hf token secret"
    if not arn:
        return Check(name, PASSED, "none configured (anonymous model downloads)")
    region = _secret_region(arn)
    if described is None:
        # A secret's ARN ends in a random suffix (-AbCdEf) Secrets Manager adds: a new secret has a new
        # ARN, so the fix lists the ARNs to set, or creates one from $HF_TOKEN (expanded by either shell).
        listing = cli_command("secretsmanager", "ListSecrets", region, {}, query="SecretList[].ARN")
        secret_name = re.sub(r"-[A-Za-z0-9]{6}$", "", arn.split(":secret:", 1)[-1])
        create = cli_command("secretsmanager", "CreateSecret", region, {"Name": secret_name}) + ' --secret-string "$HF_TOKEN"'
        return Check(
            name,
            FAILED,
            f"{arn}: {error_code or 'not found'}: set serving.hf_token_secret_arn to an existing secret's ARN, or create one",
            alternatives(listing, create),
        )
    if described.get("DeletedDate"):
        return Check(
            name, FAILED, f"{arn} is scheduled for deletion", cli_command("secretsmanager", "RestoreSecret", region, {"SecretId": arn})
        )
    return Check(name, PASSED, f"{described.get('Name', arn)} exists")


# The data stack's bucket is gone while the stack still names it: CloudFormation does not make a
# resource again that it believes exists, so no deploy brings it back (an update that changes the
# bucket fails on it). The data stack must be made anew, after the platform stack that imports
# its outputs: `cdk destroy --all` deletes both in dependency order (a missing bucket deletes as
# done; a retained access-log bucket is left, under its own generated name).
REBUILD = "npx cdk destroy --all --force" + WITH_CONTEXT + " && npx cdk deploy --all" + WITH_CONTEXT


def bucket_check(bucket: str, status: int | None, *, region: str = "", expected_region: str = "", stack: str = "SpecDecodeData") -> Check:
    """HeadBucket's answer for the data bucket the deployed data stack names (its DataBucketName
    output): 200 ours, 404 gone (a failure: the next deploy cannot bring it back), 403 not checked."""
    name = "data bucket"
    if not bucket:
        return Check(name, PASSED, f"{stack} not deployed: CloudFormation generates a unique name on the first deploy")
    if status == 404:
        return Check(
            name,
            FAILED,
            f"{bucket} ({stack}'s DataBucketName output) no longer exists, and no deploy brings it back: destroy and "
            "deploy again (the cluster too: it imports the bucket; weights, graphs and results in it are gone)",
            REBUILD,
        )
    if status == 403:
        # S3 API reference, HeadBucket: 200 needs s3:ListBucket on the bucket; without it, or for a
        # bucket of another account, the answer is 403.
        return Check(
            name,
            WARNING,
            f"not checked: s3:HeadBucket {bucket} answered 403: your policy lacks s3:ListBucket on it "
            "(docs/preflight.md, Permissions), or it was deleted and another account owns the name now",
            cli_command("s3", "HeadBucket", expected_region, {"Bucket": bucket}),
        )
    if status == 200:
        if region and expected_region and region != expected_region:
            return Check(name, WARNING, f"{bucket} is ours but in {region}, the deploy is in {expected_region}")
        return Check(name, PASSED, f"{bucket} is ours ({stack}'s DataBucketName output)")
    return Check(
        name,
        WARNING,
        f"not checked: s3:HeadBucket {bucket} answered {status}",
        cli_command("s3", "HeadBucket", expected_region, {"Bucket": bucket}),
    )


# --- the caller's identity (no line of its own: the command stops with exit 1) ---------------------

# Errors of credentials that are missing, unusable or expired (botocore's exceptions, STS's codes).
CREDENTIAL_ERRORS = (
    "NoCredentialsError",
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "SSOTokenLoadError",
    "UnauthorizedSSOTokenError",
    "TokenRetrievalError",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
)
NEW_PROFILE = "specdecode"


def identity_advice(code: str) -> str:
    """What the fix of a credentials error chooses between, in words (printed before it)."""
    if code not in CREDENTIAL_ERRORS:
        return ""
    return (
        "no usable credentials: give access keys (aws configure), choose a profile (export AWS_PROFILE=...), "
        "or sign in to IAM Identity Center again (aws sso login --profile ...)"
    )


def identity_fix(code: str, region: str, profiles: Mapping[str, bool], current: str = "") -> str:
    """The fix of a failed sts:GetCallerIdentity: for credentials, ``aws configure`` (access keys),
    a profile of the shared config file (``export AWS_PROFILE=...``; ``profiles`` maps each name to
    whether it is an IAM Identity Center one, which ``aws sso login`` signs in again), or a new
    IAM Identity Center profile (``aws configure sso``); else the call itself, to see the error."""
    if code == "ProfileNotFound":
        return alternatives("unset AWS_PROFILE", "aws configure list-profiles")
    if code not in CREDENTIAL_ERRORS:
        command = cli_command("sts", "GetCallerIdentity", region, {})
        return alternatives("--time-limit 120", command) if code in TIME_LIMIT_ERRORS else command
    fixes = []
    if current and profiles.get(current):
        fixes.append(f"aws sso login --profile {word(current)}")
    fixes.append("aws configure")
    for name, sso in sorted(profiles.items(), key=lambda item: (not item[1], item[0]))[:3]:
        if name == current:
            continue
        login = f"aws sso login --profile {word(name)} && " if sso else ""
        fixes.append(f"{login}export AWS_PROFILE={word(name)}")
    if not any(profiles.values()):
        fixes.append(f"aws configure sso --profile {NEW_PROFILE} && export AWS_PROFILE={NEW_PROFILE}")
    return alternatives(*fixes)
