"""Preflight as a user runs it: the exit codes from the README's command and through a real GNU
make, the whole run's time bound against a loopback endpoint that accepts and never answers, an
answer that is not the service's (a proxy's HTML page), and fixes that paste into a shell.

The subprocess runs use tests/test_preflight.py's moto server and fake EKS / Service Quotas
endpoint (its fixtures, imported); the in-process runs its moto mock and Stubbers. Every server
here listens on 127.0.0.1 only, and every loop is bounded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler

import boto3
import pytest

from conftest import ROOT
from specbench.aws_retry import Retrier
from specbench.preflight import account, checks, commands, target
from specbench.preflight.checks import FAILED, PASSED, WARNING
from tests import test_preflight
from tests.loopback import serve
from tests.runs import wait_for
from tests.test_preflight import (
    MOTO_ACCOUNT,
    NO_SLEEP,
    NOW,
    REGION,
    SECRET_NAME,
    Session,
    bootstrap,
    client,
    create_stack,
    default_target,
    eks_plan,
    force_stack_status,
    quota_plan,
    quotas,
    reservation,
    run,
)

pytestmark = pytest.mark.xdist_group("moto-ec2")  # one worker pays moto's first calls (tests/test_preflight.py)
# tests/test_preflight.py's fixtures, used here by name: moto in this process, the moto server,
# the fake EKS and Service Quotas endpoint.
moto, moto_url, moto_server, fake_eks = test_preflight.moto, test_preflight.moto_url, test_preflight.moto_server, test_preflight.fake_eks


def aws_env(moto_url: str, fake_url: str, **extra: str) -> dict[str, str]:
    """The environment of a run: moto for every service, the fake for EKS and Service Quotas,
    fake keys, two attempts per call; no make variables of an outer make (MAKEFLAGS and its jobserver)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_")) and k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.update(
        AWS_ENDPOINT_URL=moto_url,
        AWS_ENDPOINT_URL_EKS=fake_url,
        AWS_ENDPOINT_URL_SERVICE_QUOTAS=fake_url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION=REGION,
        AWS_MAX_ATTEMPTS="2",
    )
    env.update(extra)
    return env


NO_CDK_OUT = ("--cdk-out", str(ROOT / "no-cdk-out"))


def script(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """The README's command, as a user runs it from the checkout."""
    return subprocess.run(
        [str(ROOT / "scripts" / "preflight"), *NO_CDK_OUT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def make(env: dict[str, str], context: str = "") -> subprocess.CompletedProcess:
    """A real GNU make: ``make preflight``, with .venv/.runtime taken as up to date (``-o``: the test
    must not install anything)."""
    command = [
        "make",
        "-s",
        "--no-print-directory",
        "-o",
        ".venv/.runtime",
        "preflight",
        f"CONTEXT={' '.join([*NO_CDK_OUT, context]).strip()}",
    ]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


# --- exit codes -------------------------------------------------------------------------------------


@pytest.mark.long  # seconds of CPU: several processes that each load boto3
@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")
def test_the_documented_codes_reach_the_shell_and_make_prints_them(moto_server, fake_eks):
    """scripts/preflight exits with preflight's own code (it execs `.venv/bin/python -m specbench
    preflight`); `make preflight` exits 0 or, as GNU make does for any failed recipe, 2, after one
    line naming the code and its meaning. Each run is a process that loads boto3 (~0.6 s of CPU), so
    each state is run once, here: the lines of the failed, warned, bad-settings and ready runs are
    checked on these runs (make's stdout and stderr are the script's), not on more runs of
    `python -m specbench preflight` (tests/test_preflight.py runs it once, for the unserved state)."""
    fake_url, state = fake_eks
    env = aws_env(moto_server, fake_url)
    assert subprocess.run(["make", "--version"], capture_output=True, text=True).stdout.startswith("GNU Make")

    # Not bootstrapped, and -c naming another account: two failed checks, each with its fix, exit 1.
    failed = script(env, "-c", "env.account=111111111111")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert re.search(
        r"^failed +cdk bootstrap: no CDKToolkit stack in us-east-2 \| fix: npx cdk bootstrap aws://123456789012/us-east-2$",
        failed.stdout,
        re.M,
    ), failed.stdout
    assert "failed   account: the credentials are in account 123456789012" in failed.stdout, failed.stdout

    bootstrap("29")
    state["k8s_status"] = "EXTENDED_SUPPORT"
    warned = script(env)
    assert warned.returncode == 3, warned.stdout + warned.stderr
    warnings = [line.split(":")[0] for line in warned.stdout.splitlines() if line.startswith("warning")]
    assert warnings == ["warning  Kubernetes 1.35"], warned.stdout
    through_make = make(env)
    assert through_make.returncode == 2 and "make preflight: preflight exited 3 (warnings only)" in through_make.stderr
    assert through_make.stdout == warned.stdout  # the same lines, only the code differs

    bad = make(env, "-c neuron_nodes.capacity_mode=spot")
    assert bad.returncode == 2 and "neuron_nodes.capacity_mode" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert "preflight exited 2 (bad arguments or settings)" in bad.stderr

    state["k8s_status"] = "STANDARD_SUPPORT"
    ready = make(env)
    assert ready.returncode == 0 and "preflight exited" not in ready.stderr, ready.stdout + ready.stderr
    lines = ready.stdout.splitlines()
    assert lines[0] == (
        "preflight of account 123456789012 (arn:aws:sts::123456789012:user/moto), region us-east-2, "
        "its AWS calls bounded to 60 s in all (--time-limit):"
    ), ready.stdout
    assert all(line.startswith("passed ") for line in lines[1:-1]) and re.match(
        r"^\d+ checks: \d+ passed, 0 warnings, 0 failed$", lines[-1]
    ), ready.stdout
    assert any(line.startswith("passed   add-on vpc-cni v1.21.1-eksbuild.7") for line in lines), ready.stdout  # from the fake EKS endpoint


def test_the_docs_give_the_readme_command_and_what_make_does():
    readme = (ROOT / "README.md").read_text()
    assert "Run `scripts/preflight`" in readme
    text = (ROOT / "docs" / "preflight.md").read_text()
    assert "`scripts/preflight` and `.venv/bin/python -m specbench preflight` exit with:" in text
    assert "`make preflight` cannot pass 1 or 3 on" in text
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^preflight: .*\n\t@scripts/preflight \$\(CONTEXT\); code=\$\$\?", makefile, re.M)
    assert os.access(ROOT / "scripts" / "preflight", os.X_OK)


# --- the whole run's bound ----------------------------------------------------------------------------


@dataclasses.dataclass
class Silent:
    """A silent endpoint's URL and its connections: [accepted, closed by the client or None], on
    time.monotonic."""

    url: str
    connections: list[list[float | None]] = dataclasses.field(default_factory=list)

    def held_s(self, limit_s: float = 30.0) -> list[float]:
        """How long each connection was held open by the client, once all are closed (a client
        process closes its socket as it exits; the server sees it within 0.2 s, a few s on a busy
        machine)."""
        assert wait_for(lambda: all(closed is not None for _, closed in self.connections), limit_s), self.connections
        return [closed - accepted for accepted, closed in self.connections]  # type: ignore[operator]


@contextlib.contextmanager
def silent_server():
    """A loopback endpoint that accepts every connection and never answers: each accepted socket is
    held open (at most 64) until the client closes it or the server stops; it records when."""
    listener = socket.create_server(("127.0.0.1", 0))
    silent = Silent(f"http://127.0.0.1:{listener.getsockname()[1]}")
    stop = threading.Event()

    def serve_silently() -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(listener, selectors.EVENT_READ)
            while not stop.is_set():
                for key, _ in selector.select(0.2):
                    if key.fileobj is listener:
                        if len(silent.connections) < 64:
                            connection = listener.accept()[0]
                            silent.connections.append([time.monotonic(), None])
                            selector.register(connection, selectors.EVENT_READ, len(silent.connections) - 1)
                    elif not key.fileobj.recv(65536):  # type: ignore[union-attr]  # the request is read and dropped; b"": closed
                        silent.connections[key.data][1] = time.monotonic()
                        selector.unregister(key.fileobj)
                        key.fileobj.close()  # type: ignore[union-attr]
            for key in list(selector.get_map().values()):
                if key.fileobj is not listener:
                    key.fileobj.close()  # type: ignore[union-attr]

    thread = threading.Thread(target=serve_silently, daemon=True)
    thread.start()
    try:
        yield silent
    finally:
        stop.set()
        thread.join(2)
        listener.close()


@pytest.mark.long
def test_an_endpoint_that_never_answers_is_cut_at_the_bound_and_named(moto_server, fake_eks):
    """EKS at an endpoint that accepts and never answers, a 3 s bound: the waiting call is cut at the
    bound (not 2 attempts x the read timeout), named, none is made after it, and the last line says
    so; exit 3 (not checked is a warning). Checked on the endpoint's side, not against the run's
    wall time, which a busy machine stretches (the process's start alone took 12 s at load 8). A
    machine too busy to reach the EKS call within 3 s (the endpoint saw no connection) gets one
    run at 6 s, still well inside botocore's read timeout."""
    fake_url, _ = fake_eks
    bootstrap("29")
    for limit in (3, 6):
        with silent_server() as silent:
            env = aws_env(moto_server, fake_url, AWS_ENDPOINT_URL_EKS=silent.url)
            result = script(env, "--time-limit", str(limit))
            assert result.returncode == 3, result.stdout + result.stderr
            # One attempt (AWS_MAX_ATTEMPTS is 2: a run that waited the read timeout out retries),
            # held by the process until it exited, before botocore's read timeout would close it.
            held = silent.held_s()
        if held:
            break
    assert len(held) == 1 and held[0] < account.CLIENT_CONFIG.read_timeout, (limit, held, result.stdout)
    lines = result.stdout.splitlines()
    assert lines[0].endswith(f"its AWS calls bounded to {limit} s in all (--time-limit):")
    [waited] = [line for line in lines if line.startswith("warning  Kubernetes 1.35:")]
    assert "not checked: eks:DescribeClusterVersions failed: TimeLimitExceeded" in waited
    assert "| fix: scripts/preflight --time-limit 120 | or: aws eks describe-cluster-versions --region us-east-2" in waited
    after = [line for line in lines if line.startswith("warning  add-on ")]
    assert len(after) == 3 and all("TimeLimitSpent" in line and "while eks:DescribeClusterVersions waited" in line for line in after)
    assert lines[-1].endswith(f"; the {limit} s bound ran out while eks:DescribeClusterVersions waited")


def test_the_deadline_cuts_a_waiting_call_and_refuses_the_rest():
    release, returned = threading.Event(), threading.Event()
    started = time.monotonic()  # the bound runs from the Deadline's creation
    deadline = account.Deadline(0.2)
    assert deadline.run("ec2:DescribeRegions", lambda: "answer") == "answer"
    with pytest.raises(account.TimeLimitExceeded, match=r"0.2 s bound"):
        deadline.run("eks:DescribeClusterVersions", lambda: (release.wait(60), returned.set()))
    # Cut while the call still waited (abandoned, not waited for), and not before the bound.
    assert not returned.is_set() and time.monotonic() - started >= 0.2
    with pytest.raises(account.TimeLimitSpent, match="while eks:DescribeClusterVersions waited"):
        deadline.run("s3:HeadBucket", lambda: "never called")
    release.set()
    # An error of the call is the caller's, as it was raised.
    with pytest.raises(KeyError):
        account.Deadline(5).run("x:Y", lambda: {}["missing"])


def test_a_service_that_timed_out_is_not_called_again(monkeypatch):
    """After one call to a service times out (its read timeout, short here), its other calls are
    not made (NotAnswering): one silent endpoint costs one call's attempts."""
    from botocore.config import Config

    monkeypatch.setattr(account, "CLIENT_CONFIG", Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=0.3))
    with silent_server() as silent:
        monkeypatch.setenv("AWS_ENDPOINT_URL_EKS", silent.url)
        session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
        reader = account.Reader(session, REGION, Retrier(max_attempts=1, **NO_SLEEP))
        results: list[checks.Check] = []
        account._eks_checks(reader, default_target(), results)
        assert len(silent.connections) == 1  # one call, one attempt: the others were not made
    by_name = {c.name: c for c in results}
    assert "eks:DescribeClusterVersions failed: ReadTimeoutError" in by_name["Kubernetes 1.35"].found
    addons = [c for name, c in by_name.items() if name.startswith("add-on")]
    assert len(addons) == 3 and all("NotAnswering" in c.found and "eks:DescribeClusterVersions" in c.found for c in addons)


# --- answers that are not the service's -------------------------------------------------------------


class CaptivePortal(BaseHTTPRequestHandler):
    """Answers every request 200 with a web page (``kind``: HTML, XHTML that parses as XML, or a
    plain-text body), as a proxy or captive portal does."""

    kind = "html"

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body, content_type = {
            "html": (b"<html><body>Sign in to the hotel network</body></html>", "text/html; charset=utf-8"),
            "xhtml": (b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body>Sign in</body></html>', "application/xml"),
            "text": (b"Sign in to continue", "text/plain"),
        }[self.kind]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture
def portal():
    with serve(CaptivePortal) as url:
        yield url


@pytest.mark.parametrize("kind", ["html", "text"])
def test_a_web_page_from_eks_is_unreadable_not_a_missing_version(portal, monkeypatch, kind):
    """botocore reads EKS's (REST-JSON) body that is not JSON as an empty answer, which read as
    "not offered by EKS": it is reported as unreadable, not checked, naming the call."""
    CaptivePortal.kind = kind
    monkeypatch.setenv("AWS_ENDPOINT_URL_EKS", portal)
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
    results: list[checks.Check] = []
    account._eks_checks(account.Reader(session, REGION, Retrier(max_attempts=1, **NO_SLEEP)), default_target(), results)
    version = results[0]
    assert version.status == WARNING, version.line()
    assert version.found.startswith("not checked: eks:DescribeClusterVersions failed: UnreadableAnswer (the answer is not EKS's")
    assert all(c.status == WARNING and "UnreadableAnswer" in c.found for c in results)


def test_an_xhtml_page_from_ec2_is_unreadable_not_an_empty_region(portal, monkeypatch):
    """An XML page parses for EC2's XML protocol as an answer with no zones ("no AZ ... in this
    region"): an answer whose root is not <DescribeAvailabilityZonesResponse> is unreadable."""
    CaptivePortal.kind = "xhtml"
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", portal)
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
    results: list[checks.Check] = []
    account._offering_checks(account.Reader(session, REGION, Retrier(max_attempts=1, **NO_SLEEP)), default_target(), results)
    [check] = results
    assert check.status == WARNING and "ec2:DescribeAvailabilityZones failed: UnreadableAnswer" in check.found


def test_which_answers_are_the_services():
    reason = account.foreign_reason
    assert reason("rest-json", "DescribeClusterVersions", 200, "application/json", b'{"clusterVersions": []}') == ""
    assert reason("rest-json", "DescribeClusterVersions", 200, "application/json", b"[]").endswith("JSON that is not an object")
    assert reason("json", "ListServiceQuotas", 200, "text/html", b"<html/>") == "HTTP 200, Content-Type text/html"
    assert reason("ec2", "DescribeRegions", 200, "text/xml", b'<?xml version="1.0"?>\n<DescribeRegionsResponse xmlns="x"/>') == ""
    assert "not a DescribeRegionsResponse" in reason("ec2", "DescribeRegions", 200, "text/xml", b"<html/>")
    assert reason("query", "GetCallerIdentity", 200, "text/xml", b"<GetCallerIdentityResponse/>") == ""
    assert reason("rest-xml", "HeadBucket", 200, "", b"") == ""  # no body to judge
    assert reason("rest-json", "DescribeClusterVersions", 404, "text/html", b"<html/>") == ""  # errors: botocore's own path


# --- fixes that paste ---------------------------------------------------------------------------------

# Each fix runs in bash with failglob (an unmatched glob is an error, as zsh's default NOMATCH
# makes it: "no matches found") and with stand-ins for the commands it calls, which record their
# arguments: a fix pastes if it runs, and each command gets the words shlex reads from it.
_STANDINS = 'aws() { printf "%s\\n" "$@" >> "$OUT"; }; npx() { aws "$@"; }; function scripts/preflight { aws "$@"; }'


def pastes(fix: str, tmp_path) -> None:
    assert "#" not in fix and "<" not in fix and "\x00" not in fix, fix
    for one in fix.split(commands.OR):
        out = tmp_path / "words"
        out.write_text("")
        done = subprocess.run(
            ["bash", "-c", f"shopt -s failglob; {_STANDINS}; {one}"],
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"], "OUT": str(out), "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=10,
        )
        assert done.returncode == 0 and not done.stderr, (one, done.stderr)


def failing_lines(moto_results: list[dict[str, checks.Check]]) -> list[checks.Check]:
    return [c for results in moto_results for c in results.values() if c.status == FAILED or c.found.startswith("not checked")]


def test_every_failed_and_unchecked_line_has_a_fix_that_pastes(moto, tmp_path):
    """Over many failing account states (moto and Stubber): each failed or not-checked line has a
    fix, each alternative of it runs in bash with failglob, and not-checked lines name one call."""
    session = lambda **kw: Session(eks=kw.pop("eks", eks_plan()), service_quotas=kw.pop("sq", quota_plan()), **kw)  # noqa: E731
    seen = [run(default_target(account="111111111111", neuron_zone="us-east-2z"), session())]  # no bootstrap either
    bootstrap("5")
    seen.append(run(default_target(), session(sq=quota_plan(trn=96.0, standard=4.0))))
    create_stack("SpecDecodePlatform")
    for status in ("ROLLBACK_COMPLETE", "DELETE_FAILED", "UPDATE_IN_PROGRESS", "IMPORT_ROLLBACK_FAILED"):
        force_stack_status("SpecDecodePlatform", status)
        seen.append(run(default_target(), session()))
    arn = client("secretsmanager").create_secret(Name=SECRET_NAME, SecretString="hf_x")["ARN"]
    client("secretsmanager").delete_secret(SecretId=arn, RecoveryWindowInDays=7)
    seen.append(run(default_target(hf_token_secret_arn=arn), session()))
    seen.append(run(default_target(hf_token_secret_arn=arn.replace(SECRET_NAME, "hf/other")), session()))
    create_stack("SpecDecodeData", {"DataBucketName": "specdecodedata-databucket-gone"})

    def not_offered(stub):
        stub.add_response("describe_cluster_versions", {"clusterVersions": []}, {"clusterVersions": ["1.35"], "includeAll": True})
        for name in ("vpc-cni", "aws-mountpoint-s3-csi-driver", "amazon-cloudwatch-observability"):
            stub.add_response("describe_addon_versions", {"addons": []}, {"addonName": name, "kubernetesVersion": "1.35"})

    def refused(stub):
        stub.add_client_error("list_service_quotas", service_error_code="AccessDeniedException", service_message="no", http_status_code=400)

    seen.append(run(default_target(), session(eks=not_offered, sq=refused)))
    for item in (
        reservation(State="cancelled", EndDate=NOW + timedelta(hours=1), InstanceType="trn1.32xlarge"),
        reservation(ReservationType="default", AvailableInstanceCount=0, EndDate=NOW + timedelta(hours=1)),
    ):

        def plan(stub, item=item):
            stub.add_response(
                "describe_capacity_reservations",
                {"CapacityReservations": [item]},
                {"CapacityReservationIds": [item["CapacityReservationId"]]},
            )

        mode = "capacity-block" if item["ReservationType"] == "capacity-block" else "reservation"
        seen.append(run(default_target(capacity_mode=mode, reservation_id=item["CapacityReservationId"]), session(reservations=plan)))
    lines = failing_lines(seen)
    names = {c.name for c in lines}
    for expected in (
        "account",
        "cdk bootstrap",
        "stack SpecDecodePlatform",
        "trn2.48xlarge in us-east-2z",
        "hf token secret",
        "data bucket",
        "Kubernetes 1.35",
        "on-demand vCPU quotas",
        "reservation cr-0123456789abcdef0 fit",
        "reservation cr-0123456789abcdef0 state",
        "reservation cr-0123456789abcdef0 end",
    ):
        assert expected in names, expected
    for check in lines:
        assert check.fix, check.line()
        printed = check.line(["env.region=us-east-2", "cluster.admin_principal_arns=arn:aws:iam::1:role/A B"]).split(" | fix: ", 1)[1]
        pastes(printed, tmp_path)
        if check.found.startswith("not checked"):
            assert re.match(r"not checked: [a-z0-9]+:[A-Z][A-Za-z]+ failed: ", check.found), check.found
    waits = [c for c in lines if "--query" in c.fix]
    assert waits and all(re.search(r"--query '[^']*'", c.fix) for c in waits)


def test_the_identity_fixes_paste_and_name_the_ways_to_credentials(tmp_path):
    none = checks.identity_fix("NoCredentialsError", REGION, {})
    assert none.startswith("aws configure | or: ") and "export AWS_PROFILE=" in none
    assert "aws sso login" in checks.identity_advice("NoCredentialsError") and "AWS_PROFILE" in checks.identity_advice("NoCredentialsError")
    listed = checks.identity_fix("NoCredentialsError", REGION, {"dev": False, "work sso": True})
    assert "aws sso login --profile 'work sso' && export AWS_PROFILE='work sso'" in listed and "export AWS_PROFILE=dev" in listed
    expired = checks.identity_fix("UnauthorizedSSOTokenError", REGION, {"work": True}, current="work")
    assert expired.startswith("aws sso login --profile work | or: aws configure")
    assert checks.identity_fix("EndpointConnectionError", REGION, {}) == "aws sts get-caller-identity --region us-east-2"
    assert checks.identity_fix("TimeLimitExceeded", REGION, {}).startswith("--time-limit 120 | or: aws sts")
    for fix in (none, listed, expired, checks.identity_fix("ProfileNotFound", REGION, {})):
        pastes(commands.rerun(fix, ["env.region=us-east-2"]), tmp_path)


def test_the_no_credentials_line_names_the_call_and_the_fix(moto_server, fake_eks):
    """No credentials anywhere: exit 1 and one line on stderr, naming the call and the fix (the one
    run of this state: `python -m specbench preflight` is what the script execs)."""
    env = aws_env(moto_server, fake_eks[0], AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent")
    del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    none = script(env)
    assert none.returncode == 1 and len(none.stderr.strip().splitlines()) == 1, none.stderr
    assert "sts:GetCallerIdentity in us-east-2): NoCredentialsError" in none.stderr
    assert "| fix: aws configure | or: aws configure sso --profile specdecode && export AWS_PROFILE=specdecode" in none.stderr


def test_command_words_are_the_clis():
    """The CLI's command and option names are botocore's xform_name(name, "-") of the API's."""
    from botocore import xform_name

    for name in (
        "DescribeClusterVersions",
        "ListServiceQuotas",
        "GetAWSDefaultServiceQuota",
        "HeadBucket",
        "DescribeInstanceTypeOfferings",
    ):
        if name != "GetAWSDefaultServiceQuota":  # an acronym: the CLI says get-aws-default-service-quota
            assert commands._kebab(name) == xform_name(name, "-")
    assert commands.cli_command("eks", "DescribeClusterVersions", REGION, {"clusterVersions": ["1.35"], "includeAll": True}) == (
        "aws eks describe-cluster-versions --region us-east-2 --cluster-versions 1.35 --include-all"
    )
    filters = {"LocationType": "region", "Filters": [{"Name": "instance-type", "Values": ["trn2.48xlarge", "m7i.xlarge"]}]}
    assert commands.cli_command("ec2", "DescribeInstanceTypeOfferings", REGION, filters, "InstanceTypeOfferings[].Location") == (
        "aws ec2 describe-instance-type-offerings --region us-east-2 --location-type region "
        "--filters Name=instance-type,Values=trn2.48xlarge,m7i.xlarge --query 'InstanceTypeOfferings[].Location'"
    )
    assert commands.cli_command("s3", "HeadBucket", REGION, {"Bucket": "b"}) == "aws s3api head-bucket --region us-east-2 --bucket b"
    assert commands.rerun("-c a=b | or: aws x", ["k=v w"]) == "scripts/preflight -c 'k=v w' -c a=b | or: aws x"


# --- what the fixes name -----------------------------------------------------------------------------


def test_a_bootstrap_of_another_qualifier_is_named_with_both_fixes(moto):
    """CDKToolkit made with qualifier `myqual` (its `Qualifier` parameter), the app on the default:
    the fix sets the app's qualifier to the stack's, or bootstraps with the app's."""
    template = {"Parameters": {"Qualifier": {"Type": "String", "Default": "hnb659fds"}}, "Resources": {"B": {"Type": "AWS::S3::Bucket"}}}
    client("cloudformation").create_stack(
        StackName="CDKToolkit", TemplateBody=json.dumps(template), Parameters=[{"ParameterKey": "Qualifier", "ParameterValue": "myqual"}]
    )
    client("ssm").put_parameter(Name="/cdk-bootstrap/myqual/version", Value="29", Type="String")
    check = run(default_target(), Session(eks=eks_plan(), service_quotas=quota_plan()))["cdk bootstrap"]
    assert check.status == FAILED and "bootstrapped with qualifier myqual, the app uses hnb659fds" in check.found
    assert check.fix == f"-c @aws-cdk/core:bootstrapQualifier=myqual | or: npx cdk bootstrap aws://{MOTO_ACCOUNT}/{REGION}"
    # With the fix the check passes; the context's qualifier wins over an older cdk.out's.
    manifest = {
        "artifacts": {
            "S": {
                "properties": {"requiresBootstrapStackVersion": 6, "bootstrapStackVersionSsmParameter": "/cdk-bootstrap/hnb659fds/version"}
            }
        }
    }
    fixed = default_target(bootstrap=target.bootstrap_requirement(manifest, "myqual"))
    assert run(fixed, Session(eks=eks_plan(), service_quotas=quota_plan()))["cdk bootstrap"].status == PASSED


def test_a_region_that_offers_the_type_is_named_when_the_chosen_one_does_not(moto, monkeypatch):
    """No AZ of us-east-1 offers trn2.48xlarge in moto's data (snapshots of the API); us-east-2 does:
    the fix moves the region, the Neuron AZ and the VPC's AZs there."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    t = default_target(region="us-east-1", availability_zones=("us-east-1a", "us-east-1b", "us-east-1c"), neuron_zone="us-east-1a")
    check = run(t, Session(eks=eks_plan(), service_quotas=quota_plan()), cli_region="us-east-1")["trn2.48xlarge in us-east-1a"]
    assert check.status == FAILED and "us-east-2 offers it in us-east-2a, us-east-2b, us-east-2c" in check.found
    assert check.fix == (
        "-c env.region=us-east-2 -c neuron_nodes.availability_zone=us-east-2a -c env.availability_zones=us-east-2a,us-east-2b,us-east-2c"
    )
    assert account.region_order(["eu-west-1", "us-west-2", "us-east-1", "ap-south-2", "us-east-2"], "us-east-1") == [
        "us-east-2",
        "us-west-2",
        "ap-south-2",
        "eu-west-1",
    ]


def test_another_az_of_the_region_is_named_with_the_vpcs_azs():
    ids = {"us-east-2a": "use2-az1", "us-east-2b": "use2-az2", "us-east-2c": "use2-az3", "us-east-2d": "use2-az4"}
    check = checks.neuron_offering_check(
        "trn2.48xlarge", "us-east-2a", ids, {"use2-az4"}, region=REGION, vpc_zones=("us-east-2a", "us-east-2b", "us-east-2c")
    )
    assert check.fix == "-c neuron_nodes.availability_zone=us-east-2d -c env.availability_zones=us-east-2d,us-east-2b,us-east-2c"


# --- quotas ---------------------------------------------------------------------------------------------


def odcr_session(quota_values: dict, default_trn: float | None = None):
    def plan(stub):
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [reservation(ReservationType="default", EndDateType="unlimited")]},
            {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
        )

    def sq(stub):
        listed = [q for q in quotas(**quota_values)["Quotas"] if default_trn is None or q["QuotaCode"] != "L-2C3B7624"]
        stub.add_response("list_service_quotas", {"Quotas": listed}, {"ServiceCode": "ec2"})
        if default_trn is not None:
            quota = {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624", "QuotaName": "Running On-Demand Trn instances", "Value": default_trn}
            stub.add_response("get_aws_default_service_quota", {"Quota": quota}, {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624"})

    return Session(eks=eks_plan(), service_quotas=sq, reservations=plan)


TRN_QUOTA = "quota Running On-Demand Trn instances (L-2C3B7624)"


def test_an_odcr_counts_against_the_on_demand_quota(moto):
    """An on-demand capacity reservation's instances are on-demand ones: the Trn quota is checked
    in `reservation` mode (only a Capacity Block is left out of it)."""
    bootstrap("29")
    t = default_target(capacity_mode="reservation", reservation_id="cr-0123456789abcdef0")
    short = run(t, odcr_session({"trn": 96.0}))[TRN_QUOTA]
    assert short.status == FAILED and "96 vCPUs; neuron_nodes 1 x trn2.48xlarge (192 vCPUs) need 192" in short.found
    assert run(t, odcr_session({"trn": 192.0}))[TRN_QUOTA].status == PASSED


def test_a_quota_the_list_leaves_out_is_read_as_the_aws_default(moto):
    bootstrap("29")
    t = default_target(capacity_mode="reservation", reservation_id="cr-0123456789abcdef0")
    check = run(t, odcr_session({}, default_trn=384.0))[TRN_QUOTA]
    assert check.status == PASSED and "384 vCPUs (the AWS default: ListServiceQuotas lists no applied value)" in check.found
    low = run(t, odcr_session({}, default_trn=0.0))[TRN_QUOTA]
    assert low.status == FAILED and "the AWS default" in low.found


def test_a_family_without_any_quota_found_is_not_checked():
    [check] = checks.quota_checks([checks.VcpuNeed("system_nodes", "p5.48xlarge", 192, 1, 1)], quotas()["Quotas"], region=REGION)
    assert check.status == WARNING and check.found.startswith("not checked: servicequotas:ListServiceQuotas")
    assert "--query 'Quotas[?starts_with(QuotaName, `Running On-Demand`)]" in check.fix


# --- Kubernetes support -----------------------------------------------------------------------------------


def test_kubernetes_1_35_is_in_standard_support_until_2027_03_27():
    from datetime import datetime, timezone

    item = {
        "clusterVersion": "1.35",
        "versionStatus": "STANDARD_SUPPORT",
        "endOfStandardSupportDate": datetime(2027, 3, 27, tzinfo=timezone.utc),
        "endOfExtendedSupportDate": datetime(2028, 3, 27, tzinfo=timezone.utc),
    }
    check = checks.kubernetes_version_check("1.35", [item], REGION)
    assert check.status == PASSED and check.found == "offered (standard support until 2027-03-27)"
    text = (ROOT / "docs" / "preflight.md").read_text()
    assert "Kubernetes 1.35: in extended support" not in text and "1.35: 2027-03-27" in text
    newest = checks.kubernetes_version_check(
        "1.99", [{"clusterVersion": "1.9"}, {"clusterVersion": "1.34"}, {"clusterVersion": "1.35"}], REGION
    )
    assert newest.status == FAILED and newest.fix == "-c cluster.kubernetes_version=1.35"


# --- the policy -------------------------------------------------------------------------------------------


def test_the_fallback_calls_are_in_the_documented_policy(moto, monkeypatch):
    """The calls only a failing state makes (other regions' offerings, the default quota) are in
    the docs' policy too, by their IAM action names."""
    from tests.test_preflight import docs_policy_actions

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    retrier = Retrier(max_attempts=1, **NO_SLEEP)
    t = default_target(region="us-east-1", availability_zones=("us-east-1a", "us-east-1b"), neuron_zone="us-east-1a")
    t = t.__class__(**{**t.__dict__, "capacity_mode": "reservation", "reservation_id": "cr-0123456789abcdef0"})
    session = odcr_session({}, default_trn=384.0)
    account.run_checks(t, session, caller_account=MOTO_ACCOUNT, cli_region="us-east-1", now=NOW, retrier=retrier)
    names = {
        "ec2:describe_regions": "ec2:DescribeRegions",
        "service-quotas:get_aws_default_service_quota": "servicequotas:GetAWSDefaultServiceQuota",
    }
    assert set(names) <= set(retrier.calls)
    assert set(names.values()) <= docs_policy_actions()


def test_a_bucket_check_without_its_stack_names_the_call_and_a_fix():
    check = account._bucket_check(None, default_target(), {"SpecDecodePlatform": None})
    assert check.status == WARNING and check.found.startswith("not checked: cloudformation:DescribeStacks failed: SpecDecodeData")
    assert check.fix == "aws cloudformation describe-stacks --region us-east-2 --stack-name SpecDecodeData --query 'Stacks[0].Outputs'"
