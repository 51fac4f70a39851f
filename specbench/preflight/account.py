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

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, ReadTimeoutError
from botocore.parsers import ResponseParserError

from specbench.aws_retry import Retrier, error_code

from . import checks
from .checks import Check
from .commands import cli_command
from .target import DATA_STACK_BUCKET_OUTPUT, Target

T = TypeVar("T")

# botocore's own retries off: the Retrier's attempts are the only ones (aws_retry.py). Per attempt,
# 5 s to connect and 10 s to read (the APIs here answer in well under a second): an endpoint that
# accepts and never answers costs 4 x 10 s plus backoff, inside the whole run's bound (Deadline).
CLIENT_CONFIG = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=10)
MAX_MESSAGE = 160
MAX_TYPES_PER_CALL = 100  # DescribeInstanceTypes' InstanceTypes: RequestInstanceTypeList, max 100 (botocore's EC2 model)
MAX_PAGES = 50  # every listing read here is a few pages at most; the bound keeps a loop finite
DEFAULT_TIME_LIMIT_S = 60.0  # the whole run's AWS calls ("in a minute", the README)
# "Stack with id X does not exist" (CloudFormation DescribeStacks' ValidationError for a missing stack).
_NO_STACK = "does not exist"
_NO_RESERVATION = ("InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed")
# Errors that mean the endpoint did not answer in time: its other calls are not made (NotAnswering).
_SILENT = (ConnectTimeoutError, ReadTimeoutError)


class TimeLimitExceeded(BotoCoreError):
    """The call that was waiting when the whole run's bound ran out."""

    fmt = "no answer before the preflight's {limit:g} s bound ran out (--time-limit)"


class TimeLimitSpent(BotoCoreError):
    """A call not made: the bound had run out (while ``waiting`` waited)."""

    fmt = "not made: the preflight's {limit:g} s bound ran out while {waiting} waited (--time-limit)"


class NotAnswering(BotoCoreError):
    """A call not made: an earlier call to the same endpoint timed out."""

    fmt = "not made: {first} to the same endpoint timed out"


class UnreadableAnswer(BotoCoreError):
    """A 2xx answer that is not the service's: a proxy's or captive portal's page, say."""

    fmt = "the answer is not {service}'s ({reason}): a proxy or captive portal in between? check AWS_ENDPOINT_URL and HTTPS_PROXY"


# What a call can raise besides a ClientError: botocore's own errors (no credentials, unreachable,
# the ones above) and a response it cannot parse (ResponseParserError is no BotoCoreError).
OTHER_ERRORS = (BotoCoreError, ResponseParserError)

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


class Deadline:
    """The whole run's bound: each call runs in a thread that is given what is left of it, so an
    endpoint that accepts and never answers (or a retry's backoff) cannot hold the run past it. A
    call left waiting is abandoned (a daemon thread: the process still exits) and named."""

    def __init__(self, limit_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit_s, self.clock = limit_s, clock
        self.ends = clock() + limit_s
        self.ran_out_at = ""  # the call that was waiting when the bound ran out

    def run(self, call: str, function: Callable[[], T]) -> T:
        left = self.ends - self.clock()
        if self.ran_out_at or left <= 0:
            self.ran_out_at = self.ran_out_at or call
            raise TimeLimitSpent(limit=self.limit_s, waiting=self.ran_out_at)
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["value"] = function()
            except BaseException as error:  # handed to the caller's thread as it is
                box["error"] = error

        thread = threading.Thread(target=work, name=f"preflight {call}", daemon=True)
        thread.start()
        thread.join(left)
        if thread.is_alive():
            self.ran_out_at = call
            raise TimeLimitExceeded(limit=self.limit_s)
        if "error" in box:
            raise box["error"]
        return box["value"]


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


# The first tag of a query- or EC2-protocol answer is <OperationResponse> (AWS query protocol).
_XML_ROOT = re.compile(r"^\s*(?:<\?xml[^>]*\?>\s*)?<(?:\w+:)?(\w+)")


def foreign_reason(protocol: str, operation: str, status: int, content_type: str, body: bytes) -> str:
    """Why a 2xx answer is not the service's, or "". botocore reads a JSON service's body that is
    not JSON as ``{"message": body}`` and keeps only the output's members (botocore/parsers.py,
    BaseJSONParser._parse_body_as_json), so a proxy's HTML page would read as an empty answer
    ("not offered by EKS"): the body is checked before the answer is used."""
    if not 200 <= status < 300 or not body:
        return ""
    if "html" in content_type.lower():
        return f"HTTP {status}, Content-Type {content_type}"
    if protocol in ("json", "rest-json"):
        try:
            parsed = json.loads(body)
        except ValueError:
            return f"HTTP {status}, a body that is not JSON"
        return "" if isinstance(parsed, dict) else f"HTTP {status}, JSON that is not an object"
    if protocol in ("query", "ec2"):
        root = _XML_ROOT.match(body[:512].decode("utf-8", "replace"))
        if not root or root.group(1) != f"{operation}Response":
            return f"HTTP {status}, not a {operation}Response document"
    return ""


def _check_answer(http_response: Any, model: Any, **_: Any) -> None:
    """botocore's after-call event (emitted with the raw answer before it is returned: botocore/client.py,
    BaseClient._make_api_call): raise UnreadableAnswer for an answer that is not the service's."""
    try:
        body = http_response.content or b""
    except AttributeError:  # a Stubber's answer has no body to read
        return
    content_type = str(http_response.headers.get("content-type", ""))
    reason = foreign_reason(model.service_model.protocol, model.name, http_response.status_code, content_type, body)
    if reason:
        raise UnreadableAnswer(service=model.service_model.service_id, reason=reason)


class Reader:
    """One session's clients, a retrier and the run's Deadline (None: unbounded); ``call`` returns
    the response or raises ClientError / BotoCoreError once retries are spent. The error carries the
    one call that failed (``failed_call``)."""

    def __init__(self, session: Any, region: str, retrier: Retrier | None = None, deadline: Deadline | None = None) -> None:
        self.session, self.region = session, region
        self.retrier = retrier or default_retrier(session)
        self.deadline = deadline
        self._clients: dict[tuple[str, str], Any] = {}
        self._silent: dict[str, str] = {}  # service -> its call that timed out

    def client(self, service: str, region: str = "") -> Any:
        key = (service, region or self.region)
        if key not in self._clients:
            made = self.session.client(service, region_name=key[1], config=CLIENT_CONFIG)
            made.meta.events.register("after-call", _check_answer, unique_id="specbench-preflight-answer")
            self._clients[key] = made
        return self._clients[key]

    def call(self, service: str, operation: str, *, region: str = "", **kwargs: Any) -> dict:
        client = self.client(service, region)
        api = client.meta.method_to_api_mapping.get(operation, operation)
        name = f"{client.meta.service_model.signing_name}:{api}"
        try:
            if service in self._silent:
                raise NotAnswering(first=self._silent[service])
            function: Callable[..., dict] = getattr(client, operation)
            attempt = lambda: self.retrier.call(f"{service}:{operation}", function, **kwargs)  # noqa: E731
            return attempt() if self.deadline is None else self.deadline.run(name, attempt)
        except (ClientError, *OTHER_ERRORS) as error:
            if isinstance(error, _SILENT):
                self._silent[service] = name
            error.preflight_call = (name, cli_command(service, api, region or self.region, kwargs))  # type: ignore[attr-defined]
            raise

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
    AWS may answer with an HTML page); an answer botocore cannot parse is an UnreadableAnswer."""
    if isinstance(error, ClientError):
        code, message = error_code(error), str(error.response.get("Error", {}).get("Message", ""))
    elif isinstance(error, ResponseParserError):
        code, message = "UnreadableAnswer", f"the answer is not the service's: {error}"
    else:
        code, message = type(error).__name__, str(error)
    message = " ".join(re.sub(r"<[^>]+>", " ", message).split())
    return code, message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


# IAM actions whose name is not the API's (S3 API reference, HeadBucket: "you must have the
# s3:ListBucket action").
_ACTIONS = {"s3:HeadBucket": "s3:ListBucket"}


def failed_call(error: Exception, fallback: str = "") -> tuple[str, str]:
    """(the call, its AWS CLI command) a Reader attached to the error."""
    return getattr(error, "preflight_call", (fallback, ""))


def failure(name: str, error: Exception) -> Check:
    """The not-checked line of ``name``, naming the one call that failed and the command to repeat it."""
    call, command = failed_call(error, "the call")
    code, message = describe(error)
    return checks.api_failure(name, call, code, message, command, _ACTIONS.get(call, call))


def profiles(session: Any) -> dict[str, bool]:
    """The shared config file's profiles, each with whether it signs in through IAM Identity Center
    (``sso_session`` or the legacy ``sso_start_url``: AWS CLI user guide, "Configuring IAM Identity
    Center authentication"); botocore's Session.full_config, under the boto3 Session's ``_session``."""
    try:
        config = session._session.full_config.get("profiles", {})
    except (AttributeError, BotoCoreError):
        return {}
    return {str(name): bool({"sso_session", "sso_start_url"} & set(values or {})) for name, values in config.items()}


def caller_identity(session: Any, region: str, deadline: Deadline | None = None) -> dict:
    """STS GetCallerIdentity (raises what botocore raises: no credentials, refused, unreachable)."""
    return Reader(session, region, deadline=deadline).call("sts", "get_caller_identity")


def run_checks(
    target: Target,
    session: Any,
    *,
    caller_account: str,
    cli_region: str,
    now: datetime,
    retrier: Retrier | None = None,
    deadline: Deadline | None = None,
) -> list[Check]:
    """Every check, in the order they are printed; an API that fails fails its own checks only."""
    reader = Reader(session, target.region, retrier, deadline)
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
    results.append(_bucket_check(reader, target, stacks))
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
    """The bootstrap stack and version, then each app stack; the stacks found (absent: None; not
    read: left out)."""
    b = target.bootstrap
    parameter = f"/cdk-bootstrap/{b.qualifier}/version"
    try:
        toolkit = _describe_stack(reader, target.toolkit_stack)
        version: str | None = None
        if toolkit is not None:
            try:
                version = str(reader.call("ssm", "get_parameter", Name=parameter)["Parameter"]["Value"])
            except ClientError as error:
                if error_code(error) != "ParameterNotFound":
                    raise
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
        results.append(failure("cdk bootstrap", error))
    found: dict[str, dict | None] = {}
    for name in target.stacks:
        try:
            found[name] = _describe_stack(reader, name)
        except (ClientError, *OTHER_ERRORS) as error:
            results.append(failure(f"stack {name}", error))
            continue
        results.append(checks.stack_state_check(name, found[name], target.region))
    return found


def _offerings(reader: Reader, location_type: str, types: list[str], region: str = "") -> list[dict]:
    return [
        o
        for page in reader.pages(
            "ec2",
            "describe_instance_type_offerings",
            "NextToken",
            "NextToken",
            region=region,
            LocationType=location_type,
            Filters=[{"Name": "instance-type", "Values": types}],
        )
        for o in page.get("InstanceTypeOfferings", [])
    ]


def _offering_checks(reader: Reader, target: Target, results: list[Check]) -> dict[str, str]:
    try:
        zones = reader.call("ec2", "describe_availability_zones")["AvailabilityZones"]
        offerings = _offerings(reader, "availability-zone-id", sorted({target.neuron_type, target.system_type}))
    except (ClientError, *OTHER_ERRORS) as error:
        results.append(failure("instance type offerings", error))
        return {}
    ids = checks.zone_ids(zones)
    offered = checks.offered_zone_ids(offerings, target.neuron_type)
    elsewhere = None
    if not offered:
        try:
            elsewhere = _region_offering(reader, target.neuron_type, target.region)
        except (ClientError, *OTHER_ERRORS) as error:
            results.append(failure(f"regions offering {target.neuron_type}", error))
    results.append(
        checks.neuron_offering_check(
            target.neuron_type,
            target.neuron_zone,
            ids,
            offered,
            region=target.region,
            vpc_zones=target.availability_zones,
            elsewhere=elsewhere,
        )
    )
    results.append(
        checks.system_offering_check(
            target.system_type,
            target.availability_zones,
            ids,
            checks.offered_zone_ids(offerings, target.system_type),
            neuron_zone=target.neuron_zone,
            region=target.region,
        )
    )
    return ids


def region_order(regions: list[str], home: str) -> list[str]:
    """Regions to ask, those of the same geography as ``home`` first (us-east-2: us-*), each sorted."""
    prefix = home.split("-", 1)[0] + "-"
    others = sorted(r for r in regions if r != home)
    return [r for r in others if r.startswith(prefix)] + [r for r in others if not r.startswith(prefix)]


def _region_offering(reader: Reader, instance_type: str, home: str) -> checks.Elsewhere | None:
    """The first other region of the account (DescribeRegions lists the enabled ones) whose AZs
    offer the type (DescribeInstanceTypeOfferings there, by AZ name: the account's own names)."""
    regions = [str(r["RegionName"]) for r in reader.call("ec2", "describe_regions").get("Regions", []) if r.get("RegionName")]
    for region in region_order(regions, home):
        offering = sorted({str(o["Location"]) for o in _offerings(reader, "availability-zone", [instance_type], region)})
        if offering:
            zones = reader.call("ec2", "describe_availability_zones", region=region)["AvailabilityZones"]
            return checks.Elsewhere(region, tuple(offering), tuple(sorted(checks.zone_ids(zones))))
    return None


def _capacity_checks(reader: Reader, target: Target, ids: dict[str, str], now: datetime, results: list[Check]) -> None:
    needs = [checks.VcpuNeed("system_nodes", target.system_type, 0, target.system_desired, target.system_max)]
    if target.capacity_mode != "on-demand":
        results.extend(_reservation_checks(reader, target, ids, now))
    # Capacity Blocks do not count against the on-demand vCPU quotas; an ODCR does (creating one
    # fails above the quota, and its instances are on-demand ones: REFERENCE.md section 7). The
    # system nodes are on-demand in every mode.
    if target.capacity_mode != "capacity-block":
        needs.insert(0, checks.VcpuNeed("neuron_nodes", target.neuron_type, 0, target.neuron_desired, target.neuron_max))
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
        quotas += _default_quotas(reader, needs, quotas)
    except (ClientError, *OTHER_ERRORS) as error:
        results.append(failure("on-demand vCPU quotas", error))
        return
    missing = [n.instance_type for n in needs if n.instance_type not in vcpus]
    if missing:
        command = cli_command("ec2", "DescribeInstanceTypes", target.region, {"InstanceTypes": missing})
        results.append(
            checks.Check("on-demand vCPU quotas", checks.FAILED, f"EC2 does not describe {', '.join(missing)} in {target.region}", command)
        )
        return
    sized = [checks.VcpuNeed(n.what, n.instance_type, vcpus[n.instance_type], n.desired, n.maximum) for n in needs]
    results.extend(checks.quota_checks(sized, quotas, checks.vcpus_in_use(running, vcpus, quotas), target.region))


def _default_quotas(reader: Reader, needs: list[checks.VcpuNeed], listed: list[dict]) -> list[dict]:
    """GetAWSDefaultServiceQuota for each quota a need draws on that ListServiceQuotas left out
    (it can omit quotas with no applied value: REFERENCE.md section 7), marked as defaults."""
    found: list[dict] = []
    for need in needs:
        code = checks.DEFAULT_QUOTA_CODES.get(checks.instance_family(need.instance_type))
        if not code or checks.quota_for(need.instance_type, listed + found) is not None:
            continue
        try:
            quota = reader.call("service-quotas", "get_aws_default_service_quota", ServiceCode="ec2", QuotaCode=code)["Quota"]
        except ClientError as error:
            if error_code(error) == "NoSuchResourceException":
                continue
            raise
        found.append({**quota, "_source": checks.DEFAULT_SOURCE})
    return found


def _reservation_checks(reader: Reader, target: Target, ids: dict[str, str], now: datetime) -> list[Check]:
    name = f"reservation {target.reservation_id}"
    try:
        reservations = reader.call("ec2", "describe_capacity_reservations", CapacityReservationIds=[target.reservation_id])
        reservation = next(iter(reservations.get("CapacityReservations", [])), None)
    except ClientError as error:
        if error_code(error) not in _NO_RESERVATION:
            return [failure(name, error)]
        reservation = None
    except OTHER_ERRORS as error:
        return [failure(name, error)]
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
        region=target.region,
    )


def _eks_checks(reader: Reader, target: Target, results: list[Check]) -> None:
    version = target.kubernetes_version
    try:
        # EKS API reference, DescribeClusterVersions: `clusterVersions` "List of specific cluster versions
        # to describe", `includeAll` "Include all available versions" (so an unsupported one still
        # comes back, with its versionStatus: UNSUPPORTED | STANDARD_SUPPORT | EXTENDED_SUPPORT).
        offered = reader.call("eks", "describe_cluster_versions", clusterVersions=[version], includeAll=True).get("clusterVersions", [])
        results.append(checks.kubernetes_version_check(version, offered, target.region))
    except (ClientError, *OTHER_ERRORS) as error:
        results.append(failure(f"Kubernetes {version}", error))
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
            results.append(failure(f"add-on {name} {pinned}", error))
            continue
        results.append(checks.addon_check(name, setting, pinned, version, addons, target.region))


def _secret_check(reader: Reader, target: Target) -> Check:
    arn = target.hf_token_secret_arn
    if not arn:
        return checks.secret_check("", None)
    # The secret is read in its own region (the ARN's), as the model-cache Job reads it.
    parts = arn.split(":")
    region = parts[3] if len(parts) > 3 and parts[3] else target.region
    try:
        described = reader.call("secretsmanager", "describe_secret", region=region, SecretId=arn)
    except ClientError as error:
        if error_code(error) == "ResourceNotFoundException":
            return checks.secret_check(arn, None, "not found")
        return failure("hf token secret", error)
    except OTHER_ERRORS as error:
        return failure("hf token secret", error)
    return checks.secret_check(arn, described)


def _bucket_check(reader: Reader, target: Target, stacks: Mapping[str, dict | None]) -> Check:
    """The bucket the deployed data stack names (DataBucketName output): no setting names it (the
    bucket's name is CloudFormation's, stacks/storage.py), so before a first deploy there is none."""
    stack = target.stacks[0]
    if stack not in stacks:  # the stack could not be read: its own line says why
        return checks.Check(
            "data bucket",
            checks.WARNING,
            f"not checked: cloudformation:DescribeStacks failed: {stack}, which names the bucket, could not be read (its line above)",
            cli_command("cloudformation", "DescribeStacks", target.region, {"StackName": stack}, query="Stacks[0].Outputs"),
        )
    name = checks.stack_output(stacks[stack], DATA_STACK_BUCKET_OUTPUT)
    if not name:
        return checks.bucket_check("", None, stack=stack)
    try:
        response = reader.call("s3", "head_bucket", Bucket=name)
        status = 200
    except ClientError as error:
        response = error.response
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if status not in (403, 404):
            return failure("data bucket", error)
    except OTHER_ERRORS as error:
        return failure("data bucket", error)
    # HeadBucket answers with the bucket's region in x-amz-bucket-region (S3 API reference, HeadBucket).
    region = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("x-amz-bucket-region", "")
    return checks.bucket_check(name, status, region=region, expected_region=target.region, stack=stack)
