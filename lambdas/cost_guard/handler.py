"""The cost guard Lambda: scales the Neuron node group to 0 after a benchmark run, and whenever
its nodes have run past the node-hour budget (then it also notifies the SNS topic).

Invoked by EventBridge: on a schedule (the budget check) and when a run's ``publish.json`` lands
in the results prefix (the benchmark Job writes it last, after its results). One check:
    1. lists the node group's instances (EC2 DescribeInstances on the tags EKS puts on managed
       node group instances, ``eks:cluster-name`` and ``eks:nodegroup-name``);
    2. adds them to the ledger in the data bucket, sums the node-hours (budget.py);
    3. over budget, or after a run when that setting is on: UpdateNodegroupConfig with
       min 0, desired 0 (max unchanged) on this node group only; over budget: SNS Publish;
    4. writes the ledger back and publishes NeuronNodeHours for the dashboard.
Dependencies: the Lambda runtime's boto3 and budget.py next to this file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import boto3
import budget
from botocore.config import Config
from botocore.exceptions import ClientError

log = logging.getLogger()
log.setLevel(logging.INFO)

# Tags EKS puts on a managed node group's instances (its service-linked role's policy is scoped
# by ec2:ResourceTag/eks:nodegroup-name: AWS managed policy AWSServiceRoleForAmazonEKSNodegroup).
CLUSTER_TAG = "eks:cluster-name"
NODEGROUP_TAG = "eks:nodegroup-name"


@dataclass(frozen=True)
class Settings:
    cluster: str
    nodegroup: str
    max_size: int
    budget_node_hours: float
    scale_after_run: bool
    topic_arn: str
    ledger_bucket: str
    ledger_key: str
    metrics_namespace: str
    price_per_hour: float | None
    region: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        def need(name: str) -> str:
            value = env.get(name, "")
            if not value:
                raise ValueError(f"environment variable {name} is not set")
            return value

        price = env.get("NODE_PRICE_PER_HOUR", "")
        return cls(
            cluster=need("CLUSTER_NAME"),
            nodegroup=need("NODEGROUP_NAME"),
            max_size=int(need("MAX_SIZE")),
            budget_node_hours=float(need("BUDGET_NODE_HOURS")),
            scale_after_run=need("SCALE_AFTER_RUN") == "true",
            topic_arn=need("TOPIC_ARN"),
            ledger_bucket=need("LEDGER_BUCKET"),
            ledger_key=need("LEDGER_KEY"),
            metrics_namespace=need("METRICS_NAMESPACE"),
            price_per_hour=float(price) if price else None,
            region=need("AWS_REGION"),
        )


def is_after_run(event: Mapping[str, Any]) -> bool:
    """An S3 "Object Created" event (the run's publish.json); a scheduled event is a budget check."""
    return event.get("source") == "aws.s3" and event.get("detail-type") == "Object Created"


def instances(ec2: Any, s: Settings) -> list[dict[str, Any]]:
    filters = [
        {"Name": f"tag:{CLUSTER_TAG}", "Values": [s.cluster]},
        {"Name": f"tag:{NODEGROUP_TAG}", "Values": [s.nodegroup]},
        {"Name": "instance-state-name", "Values": sorted(budget.RUNNING_STATES)},
    ]
    found: list[dict[str, Any]] = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page["Reservations"]:
            found += reservation["Instances"]
    return found


def load_ledger(s3: Any, s: Settings) -> dict[str, Any]:
    try:
        body = s3.get_object(Bucket=s.ledger_bucket, Key=s.ledger_key)["Body"].read()
    except ClientError as err:
        if err.response["Error"]["Code"] in ("NoSuchKey", "404"):
            return budget.empty_ledger()
        raise
    return budget.read_ledger(json.loads(body))


def scale_to_zero(eks: Any, s: Settings) -> bool:
    """UpdateNodegroupConfig, min and desired 0, max as deployed. False when EKS is still busy with
    another update of the node group (ResourceInUseException): the next check tries again."""
    try:
        eks.update_nodegroup_config(
            clusterName=s.cluster,
            nodegroupName=s.nodegroup,
            scalingConfig={"minSize": 0, "maxSize": s.max_size, "desiredSize": 0},
        )
    except ClientError as err:
        if err.response["Error"]["Code"] == "ResourceInUseException":
            log.warning("node group %s is being updated; scale-down left to the next check", s.nodegroup)
            return False
        raise
    return True


def run(event: Mapping[str, Any], s: Settings, clients: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    seen = budget.running(instances(clients["ec2"], s))
    ledger = budget.record(load_ledger(clients["s3"], s), seen, now)
    decision = budget.decide(ledger, seen, s.budget_node_hours, after_run=is_after_run(event), scale_after_run=s.scale_after_run)
    scaled = scale_to_zero(clients["eks"], s) if decision.scale_down else False
    notified = False
    if decision.notify and (scaled or not decision.scale_down):
        subject, body = budget.message(decision, s.cluster, s.nodegroup, s.price_per_hour, s.region)
        clients["sns"].publish(TopicArn=s.topic_arn, Subject=subject, Message=body)
        notified = True
    done = budget.Decision(**{**asdict(decision), "scale_down": scaled, "notify": notified})
    ledger = budget.after_action(ledger, done, now)
    clients["s3"].put_object(
        Bucket=s.ledger_bucket, Key=s.ledger_key, Body=json.dumps(ledger, indent=1, sort_keys=True).encode(), ContentType="application/json"
    )
    dimensions = [{"Name": "ClusterName", "Value": s.cluster}]
    clients["cloudwatch"].put_metric_data(
        Namespace=s.metrics_namespace,
        MetricData=[
            {"MetricName": "NeuronNodeHours", "Dimensions": dimensions, "Timestamp": now, "Value": decision.node_hours, "Unit": "Count"},
            {"MetricName": "NeuronNodesUp", "Dimensions": dimensions, "Timestamp": now, "Value": float(len(seen)), "Unit": "Count"},
        ],
    )
    spent = budget.dollars(decision.node_hours, s.price_per_hour)
    summary = {**asdict(done), "nodes_up": len(seen), "dollars": spent}
    log.info("cost guard: %s", json.dumps(summary, default=str))
    return summary


def clients(region: str) -> dict[str, Any]:
    config = Config(retries={"mode": "standard", "max_attempts": 5})  # throttling and 5xx retried
    return {name: boto3.client(name, region_name=region, config=config) for name in ("ec2", "eks", "sns", "s3", "cloudwatch")}


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    s = Settings.from_env(os.environ)
    return run(event, s, clients(s.region), datetime.now(budget.UTC))
