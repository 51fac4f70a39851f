"""The thin layer of preflight that reads the account: read-only boto3 calls, each retried on
transient errors (specbench/aws_retry.py), fed to the pure checks of checks.py.

Clients are made the ordinary way (``session.client(service, region_name=...)``, no
``endpoint_url``), so botocore's own endpoint configuration applies: ``AWS_ENDPOINT_URL`` for every
service and ``AWS_ENDPOINT_URL_<SERVICE>`` per service (``AWS_ENDPOINT_URL_EKS``,
``AWS_ENDPOINT_URL_SERVICE_QUOTAS``, ...), or ``endpoint_url`` in the shared config file (AWS SDKs
and Tools reference guide, "Service-specific endpoints"; botocore 1.31+). That is how the tests
point it at a moto server on 127.0.0.1.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from specbench.aws_retry import Retrier, error_code

from . import checks
from .checks import Check
from .target import DATA_STACK_BUCKET_OUTPUT, Target

# botocore's own retries off: the Retrier's attempts are the only ones (aws_retry.py).
CLIENT_CONFIG = Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=30)
MAX_MESSAGE = 160
MAX_TYPES_PER_CALL = 100  # DescribeInstanceTypes' InstanceTypes: RequestInstanceTypeList, max 100 (botocore's EC2 model)
MAX_PAGES = 50  # every listing read here is a few pages at most; the bound keeps a loop finite
# "Stack with id X does not exist" (CloudFormation DescribeStacks' ValidationError for a missing stack).
_NO_STACK = "does not exist"
# What a call can raise besides a ClientError: botocore's own errors (no credentials, unreachable)
# and a response it cannot parse (a server that is not the service; ResponseParserError is no BotoCoreError).
OTHER_ERRORS = (BotoCoreError, ResponseParserError)
_NO_RESERVATION = ("InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed")

# Attempts per call when the SDKs' retry setting is not given. That setting (AWS SDKs and Tools
# Reference Guide, "Retry behavior": `max_attempts` in the shared config file's profile,
# AWS_MAX_ATTEMPTS in the environment over it; "the maximum number attempts to make on a request",
# valid values a number greater than 0) would otherwise be ignored: CLIENT_CONFIG's
# total_max_attempts wins over it in botocore (botocore/args.py, _compute_retry_max_attempts).
DEFAULT_MAX_ATTEMPTS = 4


class InvalidRetrySetting(BotoCoreError):
    """A max_attempts setting that is not a whole number greater than 0 (a BotoCoreError, so the
    command reports it in one line as it does a missing profile)."""

    fmt = "{setting}: expected a whole number greater than 0, got {value!r}"


def max_attempts_setting(environment: str | None, profile: object) -> int:
    """The attempts per call: AWS_MAX_ATTEMPTS, else the profile's max_attempts, else the default;
    an empty value counts as unset."""
    for setting, value in (("AWS_MAX_ATTEMPTS", environment), ("max_attempts (shared config file)", profile)):
        text = "" if value is None else str(value).strip()
        if not text:
            continue
        if not (text.isascii() and text.isdigit()) or int(text) < 1:
            raise InvalidRetrySetting(setting=setting, value=value)
        return int(text)
    return DEFAULT_MAX_ATTEMPTS


def default_retrier(session: Any) -> Retrier:
    """The Retrier of a run that was given none, with the user's max_attempts setting. The profile's
    value is read from the botocore session that a boto3 Session wraps (boto3/session.py keeps it as
    ``_session``; botocore's Session.get_scoped_config is the profile's section of the config file)."""
    scoped = getattr(getattr(session, "_session", None), "get_scoped_config", None)
    profile = scoped().get("max_attempts") if scoped else None
    attempts = max_attempts_setting(os.environ.get("AWS_MAX_ATTEMPTS"), profile)
    return Retrier(max_attempts=attempts, base_delay_s=0.5, max_delay_s=5.0)


class Reader:
    """One session's clients and a retrier; ``call`` returns the response or raises ClientError /
    BotoCoreError once retries are spent."""

    def __init__(self, session: Any, region: str, retrier: Retrier | None = None) -> None:
        self.session, self.region = session, region
        self.retrier = retrier or default_retrier(session)
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service, region_name=self.region, config=CLIENT_CONFIG)
        return self._clients[service]

    def call(self, service: str, operation: str, **kwargs: Any) -> dict:
        function: Callable[..., dict] = getattr(self.client(service), operation)
        return self.retrier.call(f"{service}:{operation}", function, **kwargs)

    def pages(self, service: str, operation: str, token_in: str, token_out: str, **kwargs: Any) -> Iterator[dict]:
        token = None
        for _ in range(MAX_PAGES):
            page = self.call(service, operation, **kwargs, **({token_in: token} if token else {}))
            yield page
            token = page.get(token_out)
            if not token:
                return


def describe(error: Exception) -> tuple[str, str]:
    """(code, message) of a failed call, the message on one line and short (a server that is not
    AWS may answer with an HTML page)."""
    if isinstance(error, ClientError):
        code, message = error_code(error), str(error.response.get("Error", {}).get("Message", ""))
    else:
        code, message = type(error).__name__, str(error)
    message = " ".join(re.sub(r"<[^>]+>", " ", message).split())
    return code, message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def caller_identity(session: Any, region: str) -> dict:
    """STS GetCallerIdentity (raises what botocore raises: no credentials, refused, unreachable)."""
    return Reader(session, region).call("sts", "get_caller_identity")


def run_checks(
    target: Target, session: Any, *, caller_account: str, cli_region: str, now: datetime, retrier: Retrier | None = None
) -> list[Check]:
    """Every check, in the order they are printed; an API that fails fails its own checks only."""
    reader = Reader(session, target.region, retrier)
    results = [
        checks.account_check(caller_account, target.account),
        checks.region_check(target.region, target.region_configured, cli_region),
    ]
    stacks = _stack_checks(reader, target, caller_account, results)
    ids = _offering_checks(reader, target, results)
    _capacity_checks(reader, target, ids, now, results)
    _eks_checks(reader, target, results)
    results += checks.pulls_checks(target.images, target.chart)
    results.append(_secret_check(reader, target))
    results.append(_bucket_check(reader, target, stacks.get(target.stacks[0])))
    return results


def _describe_stack(reader: Reader, name: str) -> dict | None:
    try:
        found = reader.call("cloudformation", "describe_stacks", StackName=name)["Stacks"]
    except ClientError as error:
        if error_code(error) == "ValidationError" and _NO_STACK in str(error):
            return None
        raise
    return found[0] if found else None


def _stack_checks(reader: Reader, target: Target, account: str, results: list[Check]) -> dict[str, dict | None]:
    b = target.bootstrap
    parameter = f"/cdk-bootstrap/{b.qualifier}/version"
    try:
        toolkit = _describe_stack(reader, target.toolkit_stack)
        try:
            version: str | None = str(reader.call("ssm", "get_parameter", Name=parameter)["Parameter"]["Value"])
        except ClientError as error:
            if error_code(error) != "ParameterNotFound":
                raise
            version = None
        results.append(
            checks.bootstrap_check(
                stack=toolkit,
                version=version,
                required=b.required,
                recommended=b.recommended,
                requirement_source=b.source,
                toolkit_stack=target.toolkit_stack,
                qualifier=b.qualifier,
                account=account,
                region=target.region,
            )
        )
    except (ClientError, *OTHER_ERRORS) as error:
        results.append(checks.api_failure("cdk bootstrap", "cloudformation:DescribeStacks / ssm:GetParameter", *describe(error)))
    found: dict[str, dict | None] = {}
    for name in target.stacks:
        try:
            found[name] = _describe_stack(reader, name)
        except (ClientError, *OTHER_ERRORS) as error:
            results.append(checks.api_failure(f"stack {name}", "cloudformation:DescribeStacks", *describe(error)))
            continue
        results.append(checks.stack_state_check(name, found[name], target.region))
    return found


def _offering_checks(reader: Reader, target: Target, results: list[Check]) -> dict[str, str]:
    try:
        zones = reader.call("ec2", "describe_availability_zones")["AvailabilityZones"]
        offerings = [
            o
            for page in reader.pages(
                "ec2",
                "describe_instance_type_offerings",
                "NextToken",
                "NextToken",
                LocationType="availability-zone-id",
                Filters=[{"Name": "instance-type", "Values": sorted({target.neuron_type, target.system_type})}],
            )
            for o in page.get("InstanceTypeOfferings", [])
        ]
    except (ClientError, *OTHER_ERRORS) as error:
        results.append(
            checks.api_failure("instance type offerings", "ec2:DescribeAvailabilityZones / DescribeInstanceTypeOfferings", *describe(error))
        )
        return {}
    ids = checks.zone_ids(zones)
    results.append(
        checks.neuron_offering_check(target.neuron_type, target.neuron_zone, ids, checks.offered_zone_ids(offerings, target.neuron_type))
    )
    results.append(
        checks.system_offering_check(
            target.system_type, target.availability_zones, ids, checks.offered_zone_ids(offerings, target.system_type)
        )
    )
    return ids


def _capacity_checks(reader: Reader, target: Target, ids: dict[str, str], now: datetime, results: list[Check]) -> None:
    if target.capacity_mode != "on-demand":
        results.extend(_reservation_checks(reader, target, ids, now))
        needs = [checks.VcpuNeed("system_nodes", target.system_type, 0, target.system_desired, target.system_max)]
    else:
        needs = [
            checks.VcpuNeed("neuron_nodes", target.neuron_type, 0, target.neuron_desired, target.neuron_max),
            checks.VcpuNeed("system_nodes", target.system_type, 0, target.system_desired, target.system_max),
        ]
    # Reserved capacity does not count against the on-demand quotas (REFERENCE.md section 6); the
    # system nodes are on-demand in every mode.
    try:
        running = [
            instance
            for page in reader.pages(
                "ec2",
                "describe_instances",
                "NextToken",
                "NextToken",
                Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}],
            )
            for group in page.get("Reservations", [])
            for instance in group.get("Instances", [])
        ]
        wanted = sorted({n.instance_type for n in needs} | {str(i.get("InstanceType", "")) for i in running} - {""})
        vcpus = {}
        for start in range(0, len(wanted), MAX_TYPES_PER_CALL):
            chunk = wanted[start : start + MAX_TYPES_PER_CALL]
            for described in reader.call("ec2", "describe_instance_types", InstanceTypes=chunk)["InstanceTypes"]:
                vcpus[described["InstanceType"]] = int(described["VCpuInfo"]["DefaultVCpus"])
        quotas = [
            q
            for page in reader.pages("service-quotas", "list_service_quotas", "NextToken", "NextToken", ServiceCode="ec2")
            for q in page.get("Quotas", [])
        ]
    except (ClientError, *OTHER_ERRORS) as error:
        results.append(
            checks.api_failure(
                "on-demand vCPU quotas", "ec2:DescribeInstances / DescribeInstanceTypes / servicequotas:ListServiceQuotas", *describe(error)
            )
        )
        return
    missing = [n.instance_type for n in needs if n.instance_type not in vcpus]
    if missing:
        results.append(
            checks.Check("on-demand vCPU quotas", checks.FAILED, f"EC2 does not describe {', '.join(missing)} in {target.region}")
        )
        return
    sized = [checks.VcpuNeed(n.what, n.instance_type, vcpus[n.instance_type], n.desired, n.maximum) for n in needs]
    results.extend(checks.quota_checks(sized, quotas, checks.vcpus_in_use(running, vcpus, quotas)))


def _reservation_checks(reader: Reader, target: Target, ids: dict[str, str], now: datetime) -> list[Check]:
    name = f"reservation {target.reservation_id}"
    try:
        reservations = reader.call("ec2", "describe_capacity_reservations", CapacityReservationIds=[target.reservation_id])
        reservation = next(iter(reservations.get("CapacityReservations", [])), None)
    except ClientError as error:
        if error_code(error) not in _NO_RESERVATION:
            return [checks.api_failure(name, "ec2:DescribeCapacityReservations", *describe(error))]
        reservation = None
    except OTHER_ERRORS as error:
        return [checks.api_failure(name, "ec2:DescribeCapacityReservations", *describe(error))]
    return checks.reservation_checks(
        reservation,
        reservation_id=target.reservation_id,
        mode=target.capacity_mode,
        instance_type=target.neuron_type,
        zone=target.neuron_zone,
        zone_id=ids.get(target.neuron_zone, ""),
        desired=target.neuron_desired,
        maximum=target.neuron_max,
        now=now,
        run_hours=target.run_hours,
        run_source=target.run_source,
    )


def _eks_checks(reader: Reader, target: Target, results: list[Check]) -> None:
    version = target.kubernetes_version
    try:
        # EKS API reference, DescribeClusterVersions: `clusterVersions` "List of specific cluster versions
        # to describe", `includeAll` "Include all available versions" (so an unsupported one still
        # comes back, with its versionStatus: UNSUPPORTED | STANDARD_SUPPORT | EXTENDED_SUPPORT).
        offered = reader.call("eks", "describe_cluster_versions", clusterVersions=[version], includeAll=True).get("clusterVersions", [])
        results.append(checks.kubernetes_version_check(version, offered))
    except (ClientError, *OTHER_ERRORS) as error:
        results.append(checks.api_failure(f"Kubernetes {version}", "eks:DescribeClusterVersions", *describe(error)))
    for name, setting, pinned in target.addons:
        try:
            addons = [
                a
                for page in reader.pages(
                    "eks", "describe_addon_versions", "nextToken", "nextToken", addonName=name, kubernetesVersion=version
                )
                for a in page.get("addons", [])
            ]
        except (ClientError, *OTHER_ERRORS) as error:
            results.append(checks.api_failure(f"add-on {name} {pinned}", "eks:DescribeAddonVersions", *describe(error)))
            continue
        results.append(checks.addon_check(name, setting, pinned, version, addons))


def _secret_check(reader: Reader, target: Target) -> Check:
    arn = target.hf_token_secret_arn
    if not arn:
        return checks.secret_check("", None)
    # The secret is read in its own region (the ARN's), as the model-cache Job reads it.
    parts = arn.split(":")
    region = parts[3] if len(parts) > 3 and parts[3] else target.region
    try:
        client = reader.session.client("secretsmanager", region_name=region, config=CLIENT_CONFIG)
        described = reader.retrier.call("secretsmanager:describe_secret", client.describe_secret, SecretId=arn)
    except ClientError as error:
        code, message = describe(error)
        if code == "ResourceNotFoundException":
            return checks.secret_check(arn, None, "not found")
        return checks.api_failure("hf token secret", "secretsmanager:DescribeSecret", code, message)
    except OTHER_ERRORS as error:
        return checks.api_failure("hf token secret", "secretsmanager:DescribeSecret", *describe(error))
    return checks.secret_check(arn, described)


def _bucket_check(reader: Reader, target: Target, data_stack: dict | None) -> Check:
    name, source = target.bucket_name, "configured"
    if not name:
        name, source = checks.stack_output(data_stack, DATA_STACK_BUCKET_OUTPUT), "stack output"
    if not name:
        return checks.bucket_check("", None, source=source)
    try:
        response = reader.call("s3", "head_bucket", Bucket=name)
        status = 200
    except ClientError as error:
        response = error.response
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if status not in (403, 404):
            return checks.api_failure("data bucket", "s3:HeadBucket", *describe(error))
    except OTHER_ERRORS as error:
        return checks.api_failure("data bucket", "s3:HeadBucket", *describe(error))
    # HeadBucket answers with the bucket's region in x-amz-bucket-region (S3 API reference, HeadBucket).
    region = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("x-amz-bucket-region", "")
    return checks.bucket_check(name, status, source=source, region=region, expected_region=target.region)
