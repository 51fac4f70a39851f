"""The cost guard (issue 36): node-hour arithmetic, the decision, the handler against moto and a
stubbed EKS client (the exact UpdateNodegroupConfig call), the settings, and its wiring in synth."""

from __future__ import annotations

import functools
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from config import ConfigError, load_config
from tests import moto_aws
from tests.templates import only, props, resources

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lambdas" / "cost_guard"))
import budget  # noqa: E402
import handler  # noqa: E402

# One worker pays moto's first EC2 calls (tests/test_preflight.py).
pytestmark = pytest.mark.xdist_group("moto-ec2")
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=budget.UTC)
REGION = "us-east-2"


def _ledger(*spans: tuple[float, float]) -> dict:
    """Instances that ran from NOW-start hours to NOW-end hours."""
    ledger = budget.empty_ledger()
    for i, (start, end) in enumerate(spans):
        ledger["instances"][f"i-{i}"] = {
            "launch": (NOW - timedelta(hours=start)).isoformat(),
            "last_seen": (NOW - timedelta(hours=end)).isoformat(),
        }
    return ledger


def test_node_hours_sum_every_instance_seen_from_launch_to_last_seen():
    assert budget.node_hours(_ledger((10, 4), (3, 0))) == pytest.approx(9.0)
    assert budget.node_hours(budget.empty_ledger()) == 0.0


def test_record_extends_running_instances_and_keeps_ended_ones():
    ledger = budget.record(_ledger((10, 4)), [("i-9", NOW - timedelta(hours=2))], NOW)
    assert budget.node_hours(ledger) == pytest.approx(8.0)
    running = budget.running(
        [
            {"InstanceId": "i-a", "State": {"Name": "running"}, "LaunchTime": NOW},
            {"InstanceId": "i-b", "State": {"Name": "terminated"}, "LaunchTime": NOW},
        ]
    )
    assert running == [("i-a", NOW)]


def test_over_budget_scales_down_and_notifies_once_whatever_the_jobs_do():
    seen = [("i-0", NOW - timedelta(hours=50))]
    ledger = budget.record(budget.empty_ledger(), seen, NOW)
    first = budget.decide(ledger, seen, 48.0, after_run=False, scale_after_run=False)
    assert (first.over_budget, first.scale_down, first.notify) == (True, True, True)
    # Shutting down after our call: no second call, no second mail.
    done = budget.after_action(ledger, first, NOW)
    again = budget.decide(done, seen, 48.0, after_run=False, scale_after_run=True)
    assert (again.scale_down, again.notify) == (False, False)
    # A node brought back after the scale-down while still over budget: down again, and say so.
    back = [("i-1", NOW + timedelta(minutes=5))]
    later = budget.record(done, back, NOW + timedelta(minutes=15))
    third = budget.decide(later, back, 48.0, after_run=False, scale_after_run=True)
    assert (third.scale_down, third.notify) == (True, True)


def test_within_budget_only_a_finished_run_scales_down_and_only_when_the_setting_is_on():
    seen = [("i-0", NOW - timedelta(hours=2))]
    ledger = budget.record(budget.empty_ledger(), seen, NOW)
    assert not budget.decide(ledger, seen, 48.0, after_run=False, scale_after_run=True).scale_down
    assert budget.decide(ledger, seen, 48.0, after_run=True, scale_after_run=True).scale_down
    assert not budget.decide(ledger, seen, 48.0, after_run=True, scale_after_run=False).scale_down
    # No budget (0) is never over, however long the node ran.
    assert not budget.decide(_ledger((1000, 0)), seen, 0.0, after_run=False, scale_after_run=True).over_budget
    # Nothing up: no call at all.
    assert not budget.decide(ledger, [], 1.0, after_run=True, scale_after_run=True).scale_down


def test_dollars_only_with_a_known_price():
    assert budget.dollars(10.0, 14.56) == pytest.approx(145.6)
    assert budget.dollars(10.0, None) is None


def test_a_malformed_ledger_is_refused_not_reset():
    with pytest.raises(ValueError, match="launch <= last_seen"):
        budget.read_ledger(_ledger((1, 2)))


def _settings(bucket: str, topic: str, budget_hours: float = 48.0) -> handler.Settings:
    return handler.Settings(
        cluster="specdecode-trn2",
        nodegroup="NeuronNodes-abc",
        max_size=1,
        budget_node_hours=budget_hours,
        scale_after_run=True,
        topic_arn=topic,
        ledger_bucket=bucket,
        ledger_key="cost-guard/specdecode-trn2/neuron-node-hours.json",
        metrics_namespace="Qwen/LLMPerf",
        price_per_hour=14.56,
        region=REGION,
    )


@functools.cache
def _eks() -> Any:
    """The EKS client the tests stub: their own (a Stubber registers on its events, which the shared
    clients of tests/moto_aws.py must not carry), made once from the shared session (a client costs
    ~70 ms of CPU); each Stubber is a context manager, so none is left active between tests."""
    return moto_aws.session().client("eks", region_name=REGION)


@pytest.fixture
def aws(monkeypatch):
    """A fresh moto state per test (each test writes its own ledger, mail and metrics), the clients
    shared across tests (tests/moto_aws.py). Without moto's default AMIs (MOTO_EC2_LOAD_DEFAULT_AMIS,
    moto/settings.py, read whenever a region's EC2 backend is made, at the first EC2 call and at the
    reset when the mock ends): ~1,300 images with a volume and a snapshot each, ~0.5 s of CPU per
    region each time. The instances run on an image registered here: the guard never reads images."""
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    moto_aws.lend_session_to_moto()  # moto's EC2 module imported with the shared session's models
    with moto_aws.mocked():
        s3 = moto_aws.bucket("data", REGION)
        sns = moto_aws.client("sns", REGION)
        topic = sns.create_topic(Name="guard")["TopicArn"]
        sqs = moto_aws.client("sqs", REGION)
        queue = sqs.create_queue(QueueName="mail")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
        ec2 = moto_aws.client("ec2", REGION)
        image = ec2.register_image(Name="node", RootDeviceName="/dev/xvda")["ImageId"]
        tags = [{"Key": "eks:cluster-name", "Value": "specdecode-trn2"}, {"Key": "eks:nodegroup-name", "Value": "NeuronNodes-abc"}]
        ec2.run_instances(
            ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large", TagSpecifications=[{"ResourceType": "instance", "Tags": tags}]
        )
        other = [{"Key": "eks:cluster-name", "Value": "specdecode-trn2"}, {"Key": "eks:nodegroup-name", "Value": "SystemNodes-x"}]
        ec2.run_instances(
            ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large", TagSpecifications=[{"ResourceType": "instance", "Tags": other}]
        )
        yield {
            "s3": s3,
            "sns": sns,
            "sqs": sqs,
            "queue": queue,
            "ec2": ec2,
            "eks": _eks(),
            "topic": topic,
            "cloudwatch": moto_aws.client("cloudwatch", REGION),
        }


def _clients(aws: dict) -> dict:
    return {k: aws[k] for k in ("ec2", "eks", "sns", "s3", "cloudwatch")}


UPDATE = {
    "clusterName": "specdecode-trn2",
    "nodegroupName": "NeuronNodes-abc",
    "scalingConfig": {"minSize": 0, "maxSize": 1, "desiredSize": 0},
}
S3_EVENT = {"source": "aws.s3", "detail-type": "Object Created", "detail": {"object": {"key": "results/r1/publish.json"}}}


def test_a_finished_run_makes_exactly_one_update_call_for_the_neuron_node_group_only(aws):
    s = _settings("data", aws["topic"])
    launch = aws["ec2"].describe_instances()["Reservations"][0]["Instances"][0]["LaunchTime"]
    with Stubber(aws["eks"]) as stub:
        stub.add_response("update_nodegroup_config", {"update": {"id": "u1", "status": "InProgress"}}, UPDATE)
        summary = handler.run(S3_EVENT, s, _clients(aws), launch + timedelta(hours=1))
        stub.assert_no_pending_responses()
    assert summary["scale_down"] is True and summary["notify"] is False and summary["nodes_up"] == 1
    stored = json.loads(aws["s3"].get_object(Bucket="data", Key=s.ledger_key)["Body"].read())
    assert len(stored["instances"]) == 1 and stored["scaled_down_at"]
    assert aws["sqs"].receive_message(QueueUrl=aws["queue"]).get("Messages") is None


def test_over_budget_on_schedule_scales_down_and_publishes_with_the_cost(aws):
    s = _settings("data", aws["topic"], budget_hours=2.0)
    launch = aws["ec2"].describe_instances()["Reservations"][0]["Instances"][0]["LaunchTime"]
    with Stubber(aws["eks"]) as stub:
        stub.add_response("update_nodegroup_config", {"update": {"id": "u1"}}, UPDATE)
        summary = handler.run({"source": "aws.events", "detail-type": "Scheduled Event"}, s, _clients(aws), launch + timedelta(hours=3))
        stub.assert_no_pending_responses()
    assert summary["over_budget"] and summary["notify"] and summary["dollars"] == pytest.approx(3 * 14.56)
    (mail,) = aws["sqs"].receive_message(QueueUrl=aws["queue"])["Messages"]
    body = json.loads(mail["Body"])
    assert "scaled to 0" in body["Subject"] and "--scaling-config desiredSize=1" in body["Message"] and "$43.68" in body["Message"]
    metrics = aws["cloudwatch"].list_metrics(Namespace="Qwen/LLMPerf", MetricName="NeuronNodeHours")["Metrics"]
    assert metrics and metrics[0]["Dimensions"] == [{"Name": "ClusterName", "Value": "specdecode-trn2"}]


def test_within_budget_on_schedule_makes_no_eks_call(aws):
    s = _settings("data", aws["topic"])
    launch = aws["ec2"].describe_instances()["Reservations"][0]["Instances"][0]["LaunchTime"]
    with Stubber(aws["eks"]):  # any call would fail: no response queued
        summary = handler.run({"source": "aws.events"}, s, _clients(aws), launch + timedelta(hours=1))
    assert summary["scale_down"] is False and summary["node_hours"] == pytest.approx(1.0)


def test_an_eks_update_in_progress_is_left_to_the_next_check(aws):
    s = _settings("data", aws["topic"], budget_hours=0.5)
    launch = aws["ec2"].describe_instances()["Reservations"][0]["Instances"][0]["LaunchTime"]
    with Stubber(aws["eks"]) as stub:
        stub.add_client_error("update_nodegroup_config", "ResourceInUseException", expected_params=UPDATE)
        summary = handler.run({"source": "aws.events"}, s, _clients(aws), launch + timedelta(hours=1))
    stored = json.loads(aws["s3"].get_object(Bucket="data", Key=s.ledger_key)["Body"].read())
    assert summary["scale_down"] is False and stored["scaled_down_at"] is None and stored["notified_at"] is None


@pytest.mark.parametrize("email", ["not an address", "ops@", "a b@example.com", "ops@example"])
def test_a_notify_email_that_is_not_an_address_is_refused_naming_the_field(email):
    with pytest.raises(ConfigError, match=r"budget\.notify_email.*is not an e-mail address"):
        load_config({"budget.notify_email": email})


def test_budget_settings_bounds():
    assert load_config({"budget.notify_email": "ops+gpu@example.co.uk"}).budget.notify_email == "ops+gpu@example.co.uk"
    assert load_config({"budget.node_hours": "0"}).budget.node_hours == 0.0
    for key, value in (("budget.node_hours", "-1"), ("budget.check_minutes", "1"), ("neuron_nodes.min_size", "1")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config({key: value})
    assert load_config({"neuron_nodes.min_size": "1", "budget.node_hours": "0", "neuron_nodes.scale_to_zero_after_run": "false"})


@pytest.mark.xdist_group("cost-guard-synthesized")  # not with the moto group: it waits for the synthesis
def test_the_guard_may_update_only_the_neuron_node_group_and_is_wired_to_both_triggers(platform):
    neuron_id, _ = only(platform, "AWS::EKS::Nodegroup", lambda r: "Neuron" in json.dumps(r["Metadata"]))
    _, policy = only(platform, "AWS::IAM::Policy", lambda r: "CostGuard" in r["Properties"]["PolicyName"])
    statements = props(policy)["PolicyDocument"]["Statement"]
    actions = sorted(a for st in statements for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"]))
    assert actions == sorted(
        [
            "cloudwatch:PutMetricData",
            "ec2:DescribeInstances",
            "eks:UpdateNodegroupConfig",
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "s3:GetObject",
            "s3:ListBucket",
            "s3:PutObject",
            "sns:Publish",
        ]
    )
    (eks,) = [st for st in statements if st["Action"] == "eks:UpdateNodegroupConfig"]
    assert eks["Resource"] == {"Fn::GetAtt": [neuron_id, "Arn"]}
    assert not any(st["Resource"] == "*" and str(st["Action"]).startswith(("eks:", "s3:", "sns:")) for st in statements)
    rules = [props(r) for r in resources(platform, "AWS::Events::Rule").values() if "Neuron" in r["Properties"].get("Description", "")]
    assert {"rate(15 minutes)"} == {r.get("ScheduleExpression") for r in rules if "ScheduleExpression" in r}
    assert any(
        r.get("EventPattern", {}).get("detail", {}).get("object") == {"key": [{"wildcard": "results/*/publish.json"}]} for r in rules
    )
    _, function = only(platform, "AWS::Lambda::Function", lambda r: "CostGuard" in json.dumps(r.get("Properties", {}).get("Role", "")))
    env = props(function)["Environment"]["Variables"]
    assert env["NODEGROUP_NAME"] == {"Fn::GetAtt": [neuron_id, "NodegroupName"]} and env["SCALE_AFTER_RUN"] == "true"
