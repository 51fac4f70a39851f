"""`specbench preflight`: every check in each state, against moto 5.2.5 in this process
(``moto.mock_aws`` through tests/moto_aws.py: no socket, no server thread) for the APIs moto serves
(STS, CloudFormation, SSM, EC2 zones/offerings/instance types, Secrets Manager, S3), and botocore's
Stubber where it has none (EKS DescribeClusterVersions and DescribeAddonVersions answer 404,
Service Quotas ListServiceQuotas and EC2 capacity reservations are "not implemented"; a 403 from
HeadBucket moto never gives). Stubber checks every response it is given against botocore's service
model, so the shapes below are the documented ones.

The end-to-end runs of ``python -m specbench preflight`` (a subprocess, which cannot share the
in-process mock; here and in tests/test_preflight_as_run.py, through scripts/preflight and make)
have AWS_ENDPOINT_URL at a moto server on 127.0.0.1 (``moto_server``: the same moto, over HTTP)
and AWS_ENDPOINT_URL_EKS / AWS_ENDPOINT_URL_SERVICE_QUOTAS at a small loopback server for the two
services moto lacks (``fake_eks``). ``test_boto3_takes_the_endpoint_from_the_environment``
checks that those variables reach the clients preflight makes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import urllib.request
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
from botocore.stub import Stubber

from conftest import ROOT
from specbench.aws_retry import Retrier
from specbench.preflight import account, checks, target
from specbench.preflight.checks import FAILED, PASSED, WARNING
from tests import moto_aws
from tests.loopback import serve

# One worker for these tests under `make test` (--dist loadgroup; tests/conftest.py XdistGroups),
# with tests/test_preflight_as_run.py, tests/test_cost_guard.py and tests/test_deployment_state.py:
# each worker that runs one of them pays moto's first calls, moto importing its CloudFormation, EC2
# and SSM backends and reading their service models for its serializer, about 1.5 s of CPU even
# with the shared session lent to moto (tests/moto_aws.py, lend_session_to_moto).
pytestmark = pytest.mark.xdist_group("moto-ec2")

REGION = "us-east-2"
MOTO_ACCOUNT = "123456789012"  # moto's default account
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
SECRET_NAME = "hf/token"
NO_SLEEP = dict(sleep=lambda _s: None)


# --- moto: in-process for the checks, a server for the command ------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def no_default_amis(monkeypatch) -> None:
    """Without moto's default AMIs (MOTO_EC2_LOAD_DEFAULT_AMIS, moto/settings.py; read when a region's
    EC2 backend is made): each reset remakes every region backend it has, and each loaded ~1,300
    images with a volume and a snapshot apiece, 0.2 s per region per reset and again on the first
    EC2 call after it. No check reads images; the one test that runs instances turns them back on."""
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")


def no_endpoint_settings(monkeypatch) -> None:
    for name in [k for k in os.environ if k.startswith("AWS_ENDPOINT_URL") or k in ("AWS_PROFILE", "AWS_REGION")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def moto(monkeypatch):
    """A fresh moto state in this process (``moto.mock_aws``, tests/moto_aws.py): moto's handler takes
    each request from botocore before it is sent (moto/core/models.py, ``botocore_stubber``), so no
    socket, no HTTP server and no thread are involved. It matches AWS's own host names
    (moto/backend_index.py), so no endpoint setting may be left in the environment; the clients are
    made the ordinary way, as the command makes them."""
    no_default_amis(monkeypatch)
    no_endpoint_settings(monkeypatch)
    moto_aws.offline_environment(monkeypatch)
    moto_aws.lend_session_to_moto()
    with moto_aws.mocked():
        yield
        # The mock's end resets moto, which remakes each region backend before dropping it
        # (moto/core/base_backend.py, BackendDict.reset): without images even after a test that
        # turned them on (monkeypatch undoes its settings only after this fixture ends).
        no_default_amis(monkeypatch)


@pytest.fixture(scope="session")
def moto_url():
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def moto_server(moto_url, monkeypatch):
    """A fresh state in the moto server on 127.0.0.1, for ``python -m specbench preflight`` (a
    subprocess cannot share an in-process mock); boto3 here pointed at it by AWS_ENDPOINT_URL only
    (no endpoint_url anywhere)."""
    no_default_amis(monkeypatch)
    no_endpoint_settings(monkeypatch)
    moto_aws.offline_environment(monkeypatch)
    moto_aws.lend_session_to_moto()  # before the server's first EC2 or CloudFormation request imports it
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=10).read()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    return moto_url


def client(service: str, region: str = REGION):
    """A client for setting up state in moto (one per service and region, see `cached_client`)."""
    return cached_client(shared_session(), service, region_name=region)


def bootstrap(version: str = "29", qualifier: str = "hnb659fds", stack: str = "CDKToolkit") -> None:
    """A real bootstrap stack and its version parameter, created through boto3."""
    client("cloudformation").create_stack(
        StackName=stack, TemplateBody=json.dumps({"Resources": {"StagingBucket": {"Type": "AWS::S3::Bucket"}}})
    )
    client("ssm").put_parameter(Name=f"/cdk-bootstrap/{qualifier}/version", Value=version, Type="String")


def create_stack(name: str, outputs: dict[str, str] | None = None) -> None:
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    if outputs:
        template["Outputs"] = {key: {"Value": value} for key, value in outputs.items()}
    client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


def force_stack_status(name: str, status: str) -> None:
    """moto has no failure path that ends in ROLLBACK_COMPLETE, UPDATE_ROLLBACK_FAILED or
    DELETE_FAILED (its responses.py knows ROLLBACK_COMPLETE only to refuse updates): the stack is
    created through boto3, then its status is set in moto's own backend (the mock's, in this process)."""
    from moto.cloudformation.models import cloudformation_backends

    stacks = cloudformation_backends[MOTO_ACCOUNT][REGION].stacks
    [stack] = [s for s in stacks.values() if s.name == name]
    stack.status = status


# --- targets ----------------------------------------------------------------------------------------


def default_target(**changes) -> target.Target:
    base = target.Target(
        account="",
        region=REGION,
        region_configured=False,
        availability_zones=("us-east-2a", "us-east-2b", "us-east-2c"),
        neuron_type="trn2.48xlarge",
        neuron_zone="us-east-2a",
        neuron_desired=1,
        neuron_max=1,
        system_type="m7i.xlarge",
        system_desired=2,
        system_max=3,
        capacity_mode="on-demand",
        reservation_id="",
        kubernetes_version="1.35",
        addons=tuple((name, key, PINNED[name]) for name, key in target.ADDON_SETTINGS.items()),
        hf_token_secret_arn="",
        images=(("serving image", "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04"),),
        chart="oci://public.ecr.aws/neuron/neuron-helm-chart --version 1.10.0",
        stacks=target.APP_STACKS,
        toolkit_stack="CDKToolkit",
        bootstrap=target.bootstrap_requirement(None),
        run_hours=3.0,
        run_source="test",
    )
    return replace(base, **changes)


PINNED = {
    "vpc-cni": "v1.21.1-eksbuild.7",
    "aws-mountpoint-s3-csi-driver": "v2.7.0-eksbuild.1",
    "amazon-cloudwatch-observability": "v5.2.3-eksbuild.1",
}


# --- responses for what moto does not serve (shapes: botocore's models, enforced by Stubber) --------


def cluster_versions(version="1.35", status="STANDARD_SUPPORT") -> dict:
    # EKS API reference, DescribeClusterVersions: clusterVersions[].clusterVersion, versionStatus.
    return {"clusterVersions": [{"clusterVersion": version, "versionStatus": status, "defaultVersion": False}]}


def addon_versions(name: str, versions: list[str], k8s="1.35") -> dict:
    # EKS API reference, DescribeAddonVersions: addons[].addonVersions[].addonVersion and
    # compatibilities[].clusterVersion / defaultVersion.
    return {
        "addons": [
            {
                "addonName": name,
                "type": "networking",
                "addonVersions": [
                    {"addonVersion": v, "compatibilities": [{"clusterVersion": k8s, "defaultVersion": i == 0}]}
                    for i, v in enumerate(versions)
                ],
            }
        ]
    }


def quotas(trn: float = 192.0, standard: float = 32.0) -> dict:
    # Service Quotas API reference, ListServiceQuotas: Quotas[].QuotaName, QuotaCode, Value.
    return {
        "Quotas": [
            {
                "ServiceCode": "ec2",
                "QuotaCode": "L-1216C47A",
                "QuotaName": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
                "Value": standard,
            },
            {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624", "QuotaName": "Running On-Demand Trn instances", "Value": trn},
            {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA", "QuotaName": "Running On-Demand G and VT instances", "Value": 0.0},
        ]
    }


def reservation(**changes) -> dict:
    # EC2 API reference, CapacityReservation (DescribeCapacityReservations).
    item = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": "trn2.48xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-east-2a",
        "AvailabilityZoneId": "use2-az1",
        "TotalInstanceCount": 1,
        "AvailableInstanceCount": 1,
        "State": "active",
        "StartDate": NOW - timedelta(hours=1),
        "EndDate": NOW + timedelta(hours=24),
        "EndDateType": "limited",
        "ReservationType": "capacity-block",
        "InstanceMatchCriteria": "targeted",
    }
    item.update(changes)
    return item


class Split:
    """A client whose named operations go to a stubbed client, the rest to the real (moto) one."""

    def __init__(self, real, stubbed, operations):
        self.real, self.stubbed, self.operations = real, stubbed, set(operations)

    def __getattr__(self, name):
        return getattr(self.stubbed if name in self.operations else self.real, name)


def shared_session() -> boto3.Session:
    """One boto3 session for every test (tests/moto_aws.py's, shared with the other moto users): its
    loader keeps the service models, which a fresh session reads again (most of a test's time
    otherwise). The credentials are the same "testing" pair in every test."""
    return moto_aws.session()


# Clients are made once per service, region, config and endpoint setting, and reused by every test:
# making one costs 3-15 ms even with the models loaded (botocore builds a class with a method per
# operation, EC2's ~700), and a run makes 8. The endpoint comes from the environment when a client
# is made (botocore's endpoint configuration), so the environment's endpoint settings are part of
# the key: a test that points a service elsewhere gets a client of its own.
_CLIENTS: dict[tuple, object] = {}


def cached_client(session: boto3.Session, service: str, *, region_name: str, config=None, stubbed: bool = False):
    variable = "AWS_ENDPOINT_URL_" + service.upper().replace("-", "_")
    key = (service, region_name, config, os.environ.get("AWS_ENDPOINT_URL"), os.environ.get(variable), stubbed)
    if key not in _CLIENTS:
        _CLIENTS[key] = session.client(service, region_name=region_name, config=config)
    return _CLIENTS[key]


# The Stubber on each reused client: botocore registers a Stubber's handlers under fixed unique ids
# (botocore/stub.py, Stubber.activate), and registering an id again is a no-op, so the previous
# test's Stubber is deactivated before a new one is activated on the same client.
_STUBBERS: dict[int, Stubber] = {}


def fresh_stubber(stubbed) -> Stubber:
    previous = _STUBBERS.pop(id(stubbed), None)
    if previous is not None:
        previous.deactivate()
    stub = _STUBBERS[id(stubbed)] = Stubber(stubbed)
    return stub


class Session:
    """boto3's default session, with EKS and Service Quotas (and, when given, EC2's capacity
    reservations and S3's HeadBucket) answered by Stubbers."""

    def __init__(self, *, eks=None, service_quotas=None, reservations=None, head_bucket=None):
        self.real = shared_session()
        self.region_name = self.real.region_name
        self.stubs: list[Stubber] = []
        self.clients = {}
        for service, plan, operations in (
            ("eks", eks, None),
            ("service-quotas", service_quotas, None),
            ("ec2", reservations, {"describe_capacity_reservations"}),
            ("s3", head_bucket, {"head_bucket"}),
        ):
            if plan is None:
                continue
            stubbed = cached_client(self.real, service, region_name=REGION, config=account.CLIENT_CONFIG, stubbed=True)
            stub = fresh_stubber(stubbed)
            plan(stub)
            stub.activate()
            self.stubs.append(stub)
            self.clients[service] = stubbed if operations is None else (stubbed, operations)

    def client(self, service, *, region_name, config=None):
        real = cached_client(self.real, service, region_name=region_name, config=config)
        found = self.clients.get(service)
        if found is None:
            return real
        if isinstance(found, tuple):
            return Split(real, *found)
        return found

    def assert_no_pending(self):
        for stub in self.stubs:
            stub.assert_no_pending_responses()


def eks_plan(status="STANDARD_SUPPORT", offered=None, k8s="1.35"):
    offered = offered or {name: [pinned, "v0.0.1-eksbuild.1"] for name, pinned in PINNED.items()}

    def plan(stub):
        stub.add_response("describe_cluster_versions", cluster_versions(k8s, status), {"clusterVersions": [k8s], "includeAll": True})
        for name in PINNED:
            stub.add_response(
                "describe_addon_versions", addon_versions(name, offered[name], k8s), {"addonName": name, "kubernetesVersion": k8s}
            )

    return plan


def quota_plan(**values):
    return lambda stub: stub.add_response("list_service_quotas", quotas(**values), {"ServiceCode": "ec2"})


def run(t: target.Target, session: Session, caller: str = MOTO_ACCOUNT, cli_region: str = REGION) -> dict[str, checks.Check]:
    results = account.run_checks(
        t, session, caller_account=caller, cli_region=cli_region, now=NOW, retrier=Retrier(max_attempts=2, **NO_SLEEP)
    )
    session.assert_no_pending()
    by_name = {c.name: c for c in results}
    assert len(by_name) == len(results), [c.name for c in results]
    return by_name


def statuses(results: dict[str, checks.Check]) -> dict[str, str]:
    return {name: c.status for name, c in results.items()}


def ready_account():
    bootstrap()


# --- endpoint configuration -------------------------------------------------------------------------


def test_boto3_takes_the_endpoint_from_the_environment(monkeypatch):
    """AWS_ENDPOINT_URL for every service, AWS_ENDPOINT_URL_<SERVICE> over it (SDKs and Tools
    reference guide, "Service-specific endpoints"): the clients preflight makes honour both."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1111")
    monkeypatch.setenv("AWS_ENDPOINT_URL_EKS", "http://127.0.0.1:2222")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SERVICE_QUOTAS", "http://127.0.0.1:3333")
    # The tests' shared session (its models already loaded): the settings are read when each
    # client is made, not when the session is.
    reader = account.Reader(shared_session(), REGION)
    assert reader.client("ec2").meta.endpoint_url == "http://127.0.0.1:1111"
    assert reader.client("eks").meta.endpoint_url == "http://127.0.0.1:2222"
    assert reader.client("service-quotas").meta.endpoint_url == "http://127.0.0.1:3333"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL_EKS")
    assert account.Reader(shared_session(), REGION).client("eks").meta.endpoint_url == f"https://eks.{REGION}.amazonaws.com"


def test_moto_lists_every_region_through_the_lent_session_and_boto3_is_put_back(monkeypatch):
    """tests/moto_aws.py's ``lend_session_to_moto`` gives moto the shared session to list regions
    with: moto's EC2 regions are still every EC2 region of the three partitions (as botocore's
    endpoint data has them, read here without any session), and boto3.Session is boto3's again."""
    import botocore.loaders
    import botocore.regions
    from moto.core import base_backend

    moto_aws.offline_environment(monkeypatch)
    moto_aws.lend_session_to_moto()
    from moto.ec2.models import availability_zones_and_regions

    real = boto3.session.Session
    assert boto3.Session is base_backend.Session is availability_zones_and_regions.Session is real
    assert isinstance(base_backend.AccountSpecificBackend.get_session(), real)
    resolver = botocore.regions.EndpointResolver(botocore.loaders.create_loader().load_data("endpoints"))
    partitions = {"aws": "amazonaws.com", "aws-us-gov": "amazonaws.com", "aws-cn": "amazonaws.com.cn"}
    expected = [(r, f"ec2.{r}.{domain}") for p, domain in partitions.items() for r in resolver.get_available_endpoints("ec2", p)]
    assert len(expected) > 30 and ("us-east-2", "ec2.us-east-2.amazonaws.com") in expected
    assert [(r.name, r.endpoint) for r in availability_zones_and_regions.RegionsAndZonesBackend.regions] == expected
    # moto's own region list for each backend (AccountSpecificBackend._generate_regions) reads the same data.
    assert base_backend.AccountSpecificBackend.get_session().get_available_regions("ec2") == resolver.get_available_endpoints("ec2", "aws")


def test_the_retries_follow_the_sdks_max_attempts_setting(monkeypatch, tmp_path):
    """AWS_MAX_ATTEMPTS over the profile's max_attempts over 4 (botocore's own retries are off, so
    the setting would otherwise be ignored); a bad value is one line naming the setting."""
    assert account.max_attempts_setting(None, None) == account.DEFAULT_MAX_ATTEMPTS == 4
    assert account.max_attempts_setting("2", None) == 2 and account.max_attempts_setting(" 2 ", "7") == 2
    assert account.max_attempts_setting(None, "3") == 3 and account.max_attempts_setting("", "3") == 3
    for environment, profile in (("0", None), ("abc", "3"), ("2.5", None)):
        with pytest.raises(account.InvalidRetrySetting, match="^AWS_MAX_ATTEMPTS: expected a whole number greater than 0"):
            account.max_attempts_setting(environment, profile)
    with pytest.raises(account.InvalidRetrySetting, match=r"^max_attempts \(shared config file\): .* got '-1'$"):
        account.max_attempts_setting(None, "-1")

    config_file = tmp_path / "config"
    config_file.write_text("[default]\nmax_attempts = 3\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config_file))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    assert account.Reader(boto3.Session(), REGION).retrier.max_attempts == 3
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    assert account.Reader(boto3.Session(), REGION).retrier.max_attempts == 2
    config_file.write_text("[default]\n")
    monkeypatch.delenv("AWS_MAX_ATTEMPTS")
    assert account.Reader(boto3.Session(), REGION).retrier.max_attempts == 4
    # What the command prints when the setting is bad: caller_identity raises one of OTHER_ERRORS.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "many")
    with pytest.raises(account.OTHER_ERRORS) as raised:
        account.caller_identity(boto3.Session(aws_access_key_id="x", aws_secret_access_key="x"), REGION)
    assert account.describe(raised.value) == (
        "InvalidRetrySetting",
        "AWS_MAX_ATTEMPTS: expected a whole number greater than 0, got 'many'",
    )


# --- the whole account, on moto + Stubber -----------------------------------------------------------


def test_a_ready_account_passes_every_check(moto):
    ready_account()
    results = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))
    assert set(statuses(results).values()) == {PASSED}, [c.line() for c in results.values() if c.status != PASSED]
    assert "version 29" in results["cdk bootstrap"].found
    assert results["trn2.48xlarge in us-east-2a"].found == "offered in us-east-2a (AZ id use2-az1)"
    # 192 vCPUs of one trn2.48xlarge, 2 x 4 of the m7i.xlarge system nodes (DescribeInstanceTypes from moto).
    assert "192.0" not in results["quota Running On-Demand Trn instances (L-2C3B7624)"].found
    assert ">= 192 " in results["quota Running On-Demand Trn instances (L-2C3B7624)"].found
    assert ">= 8 " in results["quota Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A)"].found
    assert checks.exit_code(results.values()) == 0


def test_account_mismatch_fails(moto):
    ready_account()
    results = run(default_target(account="111111111111"), Session(eks=eks_plan(), service_quotas=quota_plan()))
    assert results["account"].status == FAILED
    assert "123456789012" in results["account"].found and "111111111111" in results["account"].found


def test_no_bootstrap_stack_fails_with_the_command(moto):
    results = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))
    check = results["cdk bootstrap"]
    assert check.status == FAILED and check.fix == f"npx cdk bootstrap aws://{MOTO_ACCOUNT}/{REGION}"


def test_bootstrap_stack_without_its_version_parameter_fails(moto):
    client("cloudformation").create_stack(
        StackName="CDKToolkit", TemplateBody=json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket"}}})
    )
    results = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))
    assert results["cdk bootstrap"].status == FAILED and "/cdk-bootstrap/hnb659fds/version" in results["cdk bootstrap"].found


@pytest.mark.parametrize(("version", "status"), [("5", FAILED), ("6", WARNING), ("7", WARNING), ("8", PASSED), ("30", PASSED)])
def test_bootstrap_version_against_what_the_app_needs(moto, version, status):
    bootstrap(version)
    results = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))
    assert results["cdk bootstrap"].status == status


def test_a_custom_qualifier_and_toolkit_stack_are_read(moto):
    bootstrap("29", qualifier="myqual", stack="MyToolkit")
    t = default_target(toolkit_stack="MyToolkit", bootstrap=target.bootstrap_requirement(None, "myqual"))
    assert run(t, Session(eks=eks_plan(), service_quotas=quota_plan()))["cdk bootstrap"].status == PASSED
    # The default names find nothing there.
    results = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))
    assert results["cdk bootstrap"].status == FAILED


@pytest.mark.parametrize(
    ("status", "command"),
    [
        ("ROLLBACK_COMPLETE", "aws cloudformation delete-stack --stack-name SpecDecodePlatform --region us-east-2"),
        ("UPDATE_ROLLBACK_FAILED", "aws cloudformation continue-update-rollback --stack-name SpecDecodePlatform --region us-east-2"),
        ("DELETE_FAILED", "--deletion-mode FORCE_DELETE_STACK"),
        ("UPDATE_IN_PROGRESS", "describe-stacks --stack-name SpecDecodePlatform"),
        ("ROLLBACK_IN_PROGRESS", "describe-stacks --stack-name SpecDecodePlatform"),
    ],
)
def test_a_stack_in_a_blocking_state_fails_with_the_command_that_clears_it(moto, status, command):
    ready_account()
    create_stack("SpecDecodePlatform")
    force_stack_status("SpecDecodePlatform", status)
    check = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))["stack SpecDecodePlatform"]
    assert check.status == FAILED and status in check.found and command in check.fix


# moto warns in this process (moto/core/errors.py, get_error_model) that EC2's InvalidVpcID.NotFound
# is in neither CloudFormation's nor EC2's error shapes; the error itself is what the test expects.
@pytest.mark.filterwarnings("ignore:Exception\\(InvalidVPCIdError\\) with code InvalidVpcID.NotFound:UserWarning")
def test_a_stack_stuck_creating_fails_as_moto_leaves_it(moto):
    """A resource moto cannot create leaves the stack CREATE_IN_PROGRESS: a real state, no forcing."""
    ready_account()
    broken = {"Resources": {"S": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": "vpc-missing", "CidrBlock": "10.0.0.0/24"}}}}
    with pytest.raises(Exception, match="does not exist"):
        client("cloudformation").create_stack(StackName="SpecDecodeData", TemplateBody=json.dumps(broken))
    check = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))["stack SpecDecodeData"]
    assert check.status == FAILED and check.found.startswith("CREATE_IN_PROGRESS")


def test_deployed_stacks_in_a_settled_state_pass(moto):
    ready_account()
    create_stack("SpecDecodeData")
    create_stack("SpecDecodePlatform")
    results = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))
    assert results["stack SpecDecodeData"].found == "CREATE_COMPLETE" == results["stack SpecDecodePlatform"].found


def test_trainium_not_offered_in_the_region(moto, monkeypatch):
    """moto's offerings (snapshots of the real API) have no trn2.48xlarge in us-east-1, and no
    m7i.xlarge in use1-az3: both failures come from moto's own data, by AZ id."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    ids = checks.zone_ids(client("ec2", "us-east-1").describe_availability_zones()["AvailabilityZones"])
    without_m7i = next(name for name, zone_id in ids.items() if zone_id == "use1-az3")
    t = default_target(region="us-east-1", availability_zones=("us-east-1a", without_m7i), neuron_zone="us-east-1a")
    results = run(t, Session(eks=eks_plan(), service_quotas=quota_plan()), cli_region="us-east-1")
    neuron = results["trn2.48xlarge in us-east-1a"]
    assert neuron.status == FAILED and "no AZ of this region" in neuron.found
    system = results["m7i.xlarge in the VPC's AZs"]
    assert system.status == FAILED and f"{without_m7i} (use1-az3)" in system.found


def test_an_az_name_the_region_does_not_have_fails(moto):
    results = run(default_target(neuron_zone="us-east-2z"), Session(eks=eks_plan(), service_quotas=quota_plan()))
    assert results["trn2.48xlarge in us-east-2z"].status == FAILED


@pytest.mark.parametrize(
    ("trn", "standard", "trn_status", "standard_status"),
    [(192.0, 32.0, PASSED, PASSED), (96.0, 32.0, FAILED, PASSED), (192.0, 8.0, PASSED, WARNING), (192.0, 4.0, PASSED, FAILED)],
)
def test_on_demand_vcpu_quotas(moto, trn, standard, trn_status, standard_status):
    ready_account()
    results = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan(trn=trn, standard=standard)))
    assert results["quota Running On-Demand Trn instances (L-2C3B7624)"].status == trn_status
    check = results["quota Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A)"]
    assert check.status == standard_status
    if standard_status != PASSED:
        assert "--quota-code L-1216C47A --desired-value 12" in check.fix  # 3 (max_size) x 4 vCPUs


def test_running_instances_use_up_the_quota(moto, monkeypatch):
    """Three m7i.4xlarge (16 vCPUs each, moto's instance data) run for real in moto: 48 of the 52
    Standard vCPUs are taken, 4 are left for the system nodes' 8. A spot instance does not count."""
    ready_account()
    # moto's Amazon images, which the `moto` fixture leaves out, loaded for this test only: the
    # region's EC2 backend is made on its first call after the reset, with the setting of that moment.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "true")
    ec2 = client("ec2")
    # An x86_64 Amazon Linux 2023 image (a filter: all of moto's images make a 0.8 s response).
    al2023 = [{"Name": "name", "Values": ["al2023-ami-2023.*-x86_64"]}, {"Name": "architecture", "Values": ["x86_64"]}]
    image = ec2.describe_images(Owners=["amazon"], Filters=al2023)["Images"][0]["ImageId"]
    ec2.run_instances(ImageId=image, InstanceType="m7i.4xlarge", MinCount=3, MaxCount=3)
    name = "quota Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A)"
    check = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan(standard=52.0)))[name]
    assert check.status == WARNING and "48 in use" in check.found and "4 left" in check.found
    assert run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan(standard=60.0)))[name].status == PASSED
    instances = [
        {"InstanceType": "m7i.4xlarge"},
        {"InstanceType": "m7i.4xlarge", "InstanceLifecycle": "spot"},
        {"InstanceType": "trn2.48xlarge"},
    ]
    used = checks.vcpus_in_use(instances, {"m7i.4xlarge": 16, "trn2.48xlarge": 192}, quotas()["Quotas"])
    assert used == {"L-1216C47A": 16, "L-2C3B7624": 192}


def test_a_capacity_block_in_each_state(moto):
    ready_account()
    t = default_target(capacity_mode="capacity-block", reservation_id="cr-0123456789abcdef0", run_hours=3.0)

    def with_reservation(item):
        def plan(stub):
            stub.add_response(
                "describe_capacity_reservations", {"CapacityReservations": [item]}, {"CapacityReservationIds": ["cr-0123456789abcdef0"]}
            )

        return Session(eks=eks_plan(), service_quotas=quota_plan(), reservations=plan)

    name = "reservation cr-0123456789abcdef0"
    ok = run(t, with_reservation(reservation()))
    assert [ok[f"{name} {part}"].status for part in ("fit", "state", "end")] == [PASSED] * 3
    # The on-demand Trn quota is not needed for a Capacity Block; the system nodes' still is.
    assert "quota Running On-Demand Trn instances (L-2C3B7624)" not in ok
    assert ok["quota Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A)"].status == PASSED

    later = run(t, with_reservation(reservation(State="scheduled", StartDate=NOW + timedelta(hours=5), EndDate=NOW + timedelta(hours=29))))
    assert later[f"{name} state"].status == WARNING and "2026-12-01 14:00 UTC" in later[f"{name} state"].found
    assert later[f"{name} end"].status == PASSED  # 24 h from its start

    short = run(t, with_reservation(reservation(EndDate=NOW + timedelta(hours=2))))
    assert short[f"{name} end"].status == FAILED and "3.0 h" in short[f"{name} end"].found

    expired = run(t, with_reservation(reservation(State="expired")))
    assert expired[f"{name} state"].status == FAILED

    wrong = run(
        t, with_reservation(reservation(AvailabilityZone="us-east-2b", AvailabilityZoneId="use2-az2", InstanceType="trn1.32xlarge"))
    )
    assert wrong[f"{name} fit"].status == FAILED
    assert "us-east-2b" in wrong[f"{name} fit"].found and "trn1.32xlarge" in wrong[f"{name} fit"].found

    odcr = run(t, with_reservation(reservation(ReservationType="default")))
    assert odcr[f"{name} fit"].status == FAILED and "capacity_mode=reservation" in odcr[f"{name} fit"].found


def test_a_reservation_that_does_not_exist(moto):
    ready_account()
    t = default_target(capacity_mode="reservation", reservation_id="cr-0000000000000dead")

    def plan(stub):
        stub.add_client_error(
            "describe_capacity_reservations",
            service_error_code="InvalidCapacityReservationId.NotFound",
            service_message="The capacity reservation ID 'cr-0000000000000dead' does not exist",
            http_status_code=400,
        )

    results = run(t, Session(eks=eks_plan(), service_quotas=quota_plan(), reservations=plan))
    assert results["reservation cr-0000000000000dead"].status == FAILED


def test_an_odcr_with_too_few_free_instances(moto):
    ready_account()
    t = default_target(capacity_mode="reservation", reservation_id="cr-0123456789abcdef0", neuron_desired=2, neuron_max=2)

    def plan(stub):
        item = reservation(ReservationType="default", TotalInstanceCount=2, AvailableInstanceCount=1, EndDateType="unlimited")
        del item["EndDate"]
        stub.add_response(
            "describe_capacity_reservations", {"CapacityReservations": [item]}, {"CapacityReservationIds": ["cr-0123456789abcdef0"]}
        )

    results = run(t, Session(eks=eks_plan(), service_quotas=quota_plan(), reservations=plan))
    assert results["reservation cr-0123456789abcdef0 fit"].status == FAILED
    assert "1 free instance(s) of 2" in results["reservation cr-0123456789abcdef0 fit"].found
    assert results["reservation cr-0123456789abcdef0 end"].status == PASSED


def test_kubernetes_and_addon_versions(moto):
    ready_account()
    offered = {name: ["v9.9.9-eksbuild.1"] if name == "vpc-cni" else [pinned] for name, pinned in PINNED.items()}
    results = run(default_target(), Session(eks=eks_plan(status="EXTENDED_SUPPORT", offered=offered), service_quotas=quota_plan()))
    assert results["Kubernetes 1.35"].status == WARNING
    vpc = results["add-on vpc-cni v1.21.1-eksbuild.7"]
    assert vpc.status == FAILED and vpc.fix == "-c addons.vpc_cni_version=v9.9.9-eksbuild.1"
    assert results["add-on aws-mountpoint-s3-csi-driver v2.7.0-eksbuild.1"].status == PASSED

    def not_offered(stub):
        stub.add_response("describe_cluster_versions", {"clusterVersions": []}, {"clusterVersions": ["1.35"], "includeAll": True})
        for name in PINNED:
            stub.add_response("describe_addon_versions", {"addons": []}, {"addonName": name, "kubernetesVersion": "1.35"})

    gone = run(default_target(), Session(eks=not_offered, service_quotas=quota_plan()))
    assert gone["Kubernetes 1.35"].status == FAILED
    assert all(gone[f"add-on {name} {pinned}"].status == FAILED for name, pinned in PINNED.items())


def test_the_token_secret(moto):
    ready_account()
    arn = client("secretsmanager").create_secret(Name=SECRET_NAME, SecretString="hf_x")["ARN"]
    results = run(default_target(hf_token_secret_arn=arn), Session(eks=eks_plan(), service_quotas=quota_plan()))
    assert results["hf token secret"].status == PASSED
    missing = arn.replace(SECRET_NAME, "hf/other")
    assert (
        run(default_target(hf_token_secret_arn=missing), Session(eks=eks_plan(), service_quotas=quota_plan()))["hf token secret"].status
        == FAILED
    )
    client("secretsmanager").delete_secret(SecretId=arn, RecoveryWindowInDays=7)
    deleted = run(default_target(hf_token_secret_arn=arn), Session(eks=eks_plan(), service_quotas=quota_plan()))["hf token secret"]
    assert deleted.status == FAILED and "scheduled for deletion" in deleted.found


def test_the_data_bucket(moto):
    """No setting names the data bucket (CloudFormation does): it is the deployed data stack's
    DataBucketName output, and one that is gone is a failure (no deploy brings it back)."""
    ready_account()
    session = lambda **kw: Session(eks=eks_plan(), service_quotas=quota_plan(), **kw)  # noqa: E731
    first = run(default_target(), session())["data bucket"]
    assert first.status == PASSED and "SpecDecodeData not deployed" in first.found
    client("s3").create_bucket(Bucket="specdecodedata-databucket-ours", CreateBucketConfiguration={"LocationConstraint": REGION})
    create_stack("SpecDecodeData", {"DataBucketName": "specdecodedata-databucket-ours"})
    ours = run(default_target(), session())["data bucket"]
    assert ours.status == PASSED and "is ours (SpecDecodeData's DataBucketName output)" in ours.found
    client("s3").delete_bucket(Bucket="specdecodedata-databucket-ours")
    gone = run(default_target(), session())["data bucket"]
    assert gone.status == FAILED and "no longer exists" in gone.found
    assert gone.fix == checks.REBUILD
    assert gone.line(["env.region=us-east-2"]).endswith(
        "| fix: npx cdk destroy --all --force -c env.region=us-east-2 && npx cdk deploy --all -c env.region=us-east-2"
    )
    assert gone.line().endswith("| fix: npx cdk destroy --all --force && npx cdk deploy --all")

    def forbidden(stub):  # moto answers HeadBucket with 200 or 404 only
        stub.add_client_error("head_bucket", service_error_code="403", service_message="Forbidden", http_status_code=403)

    check = run(default_target(), session(head_bucket=forbidden))["data bucket"]
    assert check.status == WARNING and check.found.startswith("not checked: s3:HeadBucket specdecodedata-databucket-ours answered 403")
    assert check.fix == "aws s3api head-bucket --region us-east-2 --bucket specdecodedata-databucket-ours"


def test_no_setting_names_the_data_bucket():
    """The docs describe real settings only: the configuration has no bucket-name setting, the
    bucket's name is left to CloudFormation (no bucket_name in stacks/storage.py), and the docs'
    data-bucket row names the stack output, not a configured name."""
    from config.model import DataSettings

    assert not [f for f in DataSettings.__dataclass_fields__ if "name" in f]
    storage = (ROOT / "stacks" / "storage.py").read_text()
    assert "bucket_name=" not in storage and "removal_policy=removal" in storage
    text = (ROOT / "docs" / "preflight.md").read_text()
    assert "configured name" not in text
    [row] = [line for line in text.splitlines() if line.startswith("| data bucket |")]
    assert "DataBucketName" in row and "404" in row.split("|")[3]


def test_an_api_that_refuses_leaves_only_its_own_checks_unchecked(moto):
    ready_account()

    def refused(stub):
        stub.add_client_error(
            "list_service_quotas", service_error_code="AccessDeniedException", service_message="not authorized", http_status_code=400
        )

    results = run(default_target(), Session(eks=eks_plan(), service_quotas=refused))
    check = results["on-demand vCPU quotas"]
    # The one call that failed, the permission to grant, and the AWS CLI command of the same call.
    assert check.status == WARNING and check.found.startswith("not checked: servicequotas:ListServiceQuotas failed: AccessDeniedException")
    assert "grant servicequotas:ListServiceQuotas (docs/preflight.md, Permissions)" in check.found
    assert check.fix == "aws service-quotas list-service-quotas --region us-east-2 --service-code ec2"
    assert results["cdk bootstrap"].status == PASSED


# --- the pure functions -------------------------------------------------------------------------------


def test_exit_codes():
    p, w, f = (checks.Check("x", s, "") for s in (PASSED, WARNING, FAILED))
    assert checks.exit_code([p, p]) == 0 and checks.exit_code([p, w]) == 3 and checks.exit_code([w, f, p]) == 1
    assert checks.exit_code([]) == 0


def test_every_failed_and_in_progress_status_blocks():
    """Over CloudFormation's whole StackStatus enum (botocore's model): only settled states pass."""
    import botocore.session

    every = botocore.session.get_session().get_service_model("cloudformation").shape_for("StackStatus").enum
    assert len(every) == 23
    fine = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE", "IMPORT_ROLLBACK_COMPLETE"}
    fine |= {"REVIEW_IN_PROGRESS", "DELETE_COMPLETE"}  # an unexecuted change set; a deleted stack
    for status in every:
        assert (checks.blocking_fix(status, "S", REGION) is None) == (status in fine), status
    for status in ("ROLLBACK_COMPLETE", "UPDATE_ROLLBACK_FAILED", "DELETE_FAILED"):
        assert "aws cloudformation" in checks.blocking_fix(status, "S", REGION)


def test_quota_names_map_to_instance_families():
    listed = quotas()["Quotas"]
    assert checks.quota_for("trn2.48xlarge", listed)["QuotaCode"] == "L-2C3B7624"
    assert checks.quota_for("m7i.xlarge", listed)["QuotaCode"] == "L-1216C47A"
    assert checks.quota_for("t3.large", listed)["QuotaCode"] == "L-1216C47A"  # t, not trn
    assert checks.quota_for("g6.xlarge", listed)["QuotaCode"] == "L-DB2E81BA"
    assert checks.quota_for("p5.48xlarge", listed) is None
    assert checks.quota_families("Running On-Demand High Memory instances") == ("u",)
    assert checks.quota_families("running on-demand trn instances") == ("trn",)
    assert checks.quota_families("All Standard Spot Instance Requests") == ()


def test_both_node_groups_on_one_quota_are_summed():
    need = [checks.VcpuNeed("neuron_nodes", "m7i.48xlarge", 192, 1, 1), checks.VcpuNeed("system_nodes", "m7i.xlarge", 4, 2, 2)]
    [check] = checks.quota_checks(need, quotas(standard=199.0)["Quotas"])
    assert check.status == FAILED and "need 200" in check.found


def test_pinned_images_and_floating_tags():
    results = checks.pulls_checks(
        [("a", "public.ecr.aws/x/y:1.2.3"), ("b", "repo/img:latest"), ("c", "repo/img"), ("d", "r/i@sha256:" + "0" * 64)], "chart"
    )
    assert [c.status for c in results] == [PASSED, PASSED, WARNING, WARNING, PASSED]


def test_region_warns_when_the_cli_points_elsewhere():
    assert checks.region_check("us-east-2", True, "us-west-2").status == WARNING
    assert checks.region_check("us-east-2", True, "us-east-2").status == PASSED
    assert checks.region_check("us-east-2", False, "us-east-2").status == PASSED
    assert checks.region_check("us-east-1", False, "").status == WARNING


@pytest.mark.xdist_group("preflight-synthesized")  # not in the file's group: it waits for the synthesis
def test_the_bootstrap_requirement_of_the_synthesized_app(cli_assembly):
    """cdk.out's manifest (the shared `cdk synth` of the defaults): version 6 for the stacks and
    assets, 8 for the lookup role, qualifier hnb659fds, the DefaultStackSynthesizer's numbers."""
    needed = target.bootstrap_requirement(target.read_manifest(cli_assembly.wait().outdir))
    assert (needed.required, needed.recommended, needed.qualifier, needed.source) == (6, 8, "hnb659fds", "cdk.out/manifest.json")
    assert (checks.SYNTHESIZER_MIN_BOOTSTRAP_VERSION, checks.SYNTHESIZER_MIN_LOOKUP_BOOTSTRAP_VERSION) == (6, 8)


def test_a_higher_requirement_and_another_qualifier_come_from_the_manifest():
    manifest = {
        "artifacts": {
            "A": {"properties": {"requiresBootstrapStackVersion": 21, "bootstrapStackVersionSsmParameter": "/cdk-bootstrap/q1/version"}},
            "B": {"properties": {"requiresBootstrapStackVersion": 6, "lookupRole": {"requiresBootstrapStackVersion": 8}}},
        }
    }
    needed = target.bootstrap_requirement(manifest)
    assert (needed.required, needed.recommended, needed.qualifier) == (21, 21, "q1")


def test_the_app_stack_names_are_the_apps():
    source = (ROOT / "stacks" / "app.py").read_text()
    assert re.findall(r'^(?:DATA|PLATFORM)_STACK = "(\w+)"', source, re.M) == list(target.APP_STACKS)


def test_the_target_of_the_configuration():
    from config import load_config

    context = {
        "env.account": MOTO_ACCOUNT,
        "sweep.variants": "q17-k5:Qwen/Qwen3-1.7B:5",
        "neuron_nodes.desired_size": "2",
        "neuron_nodes.max_size": "2",
    }
    config = load_config(context, {})
    from config.sweep import sweep_plan

    hours = sweep_plan(config).wall_hours
    t = target.build_target(config, context, manifest=None, sweep_wall_hours=hours)
    assert t.account == MOTO_ACCOUNT and not t.region_configured and t.neuron_zone == "us-east-2a"
    assert t.run_hours == pytest.approx((45 + 120 + 15) / 60 + hours) and "sweep plan" in t.run_source
    assert dict(t.images)["benchmark image"] == config.benchmark.image
    # Pulled without a token secret too: every pod that runs project code fetches it with it.
    assert not config.serving.hf_token_secret_arn
    assert dict(t.images)["AWS CLI image (code fetch, token reader)"] == config.serving.aws_cli_image
    assert [a[0] for a in t.addons] == list(target.ADDON_SETTINGS)


# --- end to end: the command --------------------------------------------------------------------------


class FakeEksAndQuotas(BaseHTTPRequestHandler):
    """EKS (REST-JSON: GET /cluster-versions, GET /addons/supported-versions) and Service Quotas
    (JSON 1.1, X-Amz-Target ServiceQuotasV20190624.ListServiceQuotas) on loopback, answering
    with the shapes above; ``state`` picks the Kubernetes version's status."""

    state = {"k8s_status": "STANDARD_SUPPORT"}

    def _send(self, body: dict, content_type: str = "application/json") -> None:
        data = json.dumps(body, default=str).encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        url = urlparse(self.path)
        query = parse_qs(url.query)
        if url.path == "/cluster-versions":
            return self._send(cluster_versions(query["clusterVersions"][0], self.state["k8s_status"]))
        if url.path == "/addons/supported-versions":
            name = query["addonName"][0]
            return self._send(addon_versions(name, [PINNED[name]], query["kubernetesVersion"][0]))
        self.send_error(404)

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("X-Amz-Target") == "ServiceQuotasV20190624.ListServiceQuotas":
            return self._send(quotas(), "application/x-amz-json-1.1")
        self.send_error(404)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_eks():
    FakeEksAndQuotas.state = {"k8s_status": "STANDARD_SUPPORT"}
    with serve(FakeEksAndQuotas) as url:
        yield url, FakeEksAndQuotas.state


def preflight(moto_url: str, fake_url: str, *args: str, cdk_out=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        AWS_ENDPOINT_URL=moto_url,
        AWS_ENDPOINT_URL_EKS=fake_url,
        AWS_ENDPOINT_URL_SERVICE_QUOTAS=fake_url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION=REGION,
        AWS_EC2_METADATA_DISABLED="true",
        # Two attempts per call, not the default four: moto's 500 for Service Quotas (the
        # "unserved" run) is still retried once, after one backoff of 0.25-0.5 s instead of three
        # (1.75-3.5 s together).
        AWS_MAX_ATTEMPTS="2",
    )
    command = [sys.executable, "-m", "specbench", "preflight", "--cdk-out", str(cdk_out or ROOT / "no-cdk-out"), *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.long  # seconds of CPU: scheduled early (tests/conftest.py)
def test_the_command_end_to_end(moto_server):
    """`python -m specbench preflight` itself, against moto itself for EKS and Service Quotas (it
    answers 404 and 500): those checks could not run, which is a warning each, not a failure.
    Each run is a new process that loads boto3 (about 0.6 s of CPU), so every other state is run
    once, in tests/test_preflight_as_run.py, through scripts/preflight (which execs this same
    command) and `make preflight`: not bootstrapped and another account (exit 1, both failed lines),
    ready (exit 0, its lines), a Kubernetes version in extended support (exit 3, its one warning),
    a bad setting (exit 2, one line naming the field, no traceback) and no credentials (exit 1, one
    line naming NoCredentialsError)."""
    bootstrap("29")
    unserved = preflight(moto_server, moto_server)
    assert unserved.returncode == 3, unserved.stdout + unserved.stderr
    unchecked = [line for line in unserved.stdout.splitlines() if line.startswith("warning")]
    assert len(unchecked) == 5 and all(": not checked: " in line for line in unchecked), unserved.stdout


def test_bad_settings_are_reported_before_any_call_to_aws(monkeypatch, capsys):
    """No credentials and nothing listening at the endpoint: a bad setting is still the one-line
    usage error naming the field (exit 2), not a credentials error from the identity call."""
    from specbench import cli

    for name in [n for n in os.environ if n.startswith(("AWS_", "CDK_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert cli.main(["preflight", "-c", "neuron_nodes.capacity_mode=spot"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "neuron_nodes.capacity_mode" in err and "spot" in err and "GetCallerIdentity" not in err


def test_preflight_is_not_in_the_jobs_zip():
    """Only a checkout runs it (it reads config/): neither it nor boto3's preflight layer reaches the Job."""
    from specbench import bundle

    names = set(bundle.sources())
    assert "specbench/cli.py" in names
    assert not [name for name in names if name.startswith("specbench/preflight/")]


def docs_policy_actions() -> set[str]:
    text = (ROOT / "docs" / "preflight.md").read_text()
    policy = json.loads(re.search(r"```json\n(.*?)\n```", text, re.S).group(1))
    actions = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        listed = statement["Action"]
        actions |= {listed} if isinstance(listed, str) else set(listed)
    return actions


def test_the_documented_policy_is_exactly_what_preflight_calls(moto):
    """Every call of a run with every check switched on, as IAM actions (HeadBucket is authorised by
    s3:ListBucket; GetCallerIdentity needs no permission), equals the docs' least-privilege policy."""
    ready_account()
    arn = client("secretsmanager").create_secret(Name=SECRET_NAME, SecretString="hf_x")["ARN"]
    client("s3").create_bucket(Bucket="specdecodedata-databucket-x", CreateBucketConfiguration={"LocationConstraint": REGION})
    create_stack("SpecDecodeData", {"DataBucketName": "specdecodedata-databucket-x"})
    t = default_target(capacity_mode="capacity-block", reservation_id="cr-0123456789abcdef0", hf_token_secret_arn=arn)

    def plan(stub):
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [reservation()]},
            {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
        )

    retrier = Retrier(max_attempts=1, **NO_SLEEP)
    session = Session(eks=eks_plan(), service_quotas=quota_plan(), reservations=plan)
    results = account.run_checks(t, session, caller_account=MOTO_ACCOUNT, cli_region=REGION, now=NOW, retrier=retrier)
    assert {c.status for c in results} == {PASSED}, [c.line() for c in results if c.status != PASSED]
    prefixes = {"service-quotas": "servicequotas"}
    special = {"s3:head_bucket": "s3:ListBucket"}

    def action(call: str) -> str:
        service, operation = call.split(":")
        return special.get(call) or f"{prefixes.get(service, service)}:{''.join(part.title() for part in operation.split('_'))}"

    used = {action(call) for call in retrier.calls}
    assert len(used) == 12
    # The two calls only a failing state makes: tests/test_preflight_as_run.py makes them and checks
    # they are in the policy.
    assert used == docs_policy_actions() - {"ec2:DescribeRegions", "servicequotas:GetAWSDefaultServiceQuota"}
