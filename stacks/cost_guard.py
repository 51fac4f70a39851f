"""Cost guard: the Lambda that scales the Neuron node group to 0 after a benchmark run and when the
node-hour budget is spent, its SNS topic, and what triggers it (lambdas/cost_guard).

It lives in the platform stack, next to the node group it may change and nothing else: its role may
call eks:UpdateNodegroupConfig on that node group's ARN only (the Service Authorization Reference
for Amazon EKS lists resource type ``nodegroup`` for UpdateNodegroupConfig:
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html),
list instances (ec2:DescribeInstances supports no resource-level permissions), read and write
its one ledger object, publish to its topic and to the benchmark's metrics namespace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from config import layout

from .nag import acknowledge
from .results import PUBLISH_MARKER, run_published, schedule_expression

HANDLER_DIR = Path(__file__).resolve().parent.parent / "lambdas" / "cost_guard"


def ledger_key(cluster_name: str) -> str:
    """One ledger per deployment's cluster: a rebuilt cluster (same name) continues the count until
    the object is deleted (docs/cost-guard.md)."""
    return f"{layout.COST_GUARD_PREFIX}{cluster_name}/neuron-node-hours.json"


@dataclass(frozen=True)
class CostGuardProps:
    nodegroup: eks.Nodegroup
    cluster_name: str
    max_size: int
    bucket: s3.IBucket
    metrics_namespace: str
    budget_node_hours: float  # 0: no budget
    check_minutes: int
    scale_after_run: bool
    notify_email: str
    price_per_hour: float | None
    log_retention: logs.RetentionDays
    timeout: Duration = field(default_factory=lambda: Duration.minutes(2))


def guard_statements(
    nodegroup_arn: str, bucket: s3.IBucket, key: str, topic_arn: str, log_group_arn: str, metrics_namespace: str
) -> list[iam.PolicyStatement]:
    """Least privilege for the guard."""
    return [
        iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group_arn]),
        iam.PolicyStatement(actions=["eks:UpdateNodegroupConfig"], resources=[nodegroup_arn]),
        iam.PolicyStatement(actions=["ec2:DescribeInstances"], resources=["*"]),
        iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[bucket.arn_for_objects(key)]),
        # GetObject on a missing key answers 404 (not 403) only with ListBucket; scoped to the key.
        iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn], conditions={"StringEquals": {"s3:prefix": key}}),
        iam.PolicyStatement(actions=["sns:Publish"], resources=[topic_arn]),
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"], resources=["*"], conditions={"StringEquals": {"cloudwatch:namespace": metrics_namespace}}
        ),
    ]


class CostGuard(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: CostGuardProps) -> None:
        super().__init__(scope, construct_id)
        # SSE with the AWS managed key for SNS; publishing needs no key permissions in the role.
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="Spec-decode cost guard",
            enforce_ssl=True,
            master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
        )
        if props.notify_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(props.notify_email))
        self.log_group = logs.LogGroup(self, "Logs", retention=props.log_retention, removal_policy=RemovalPolicy.DESTROY)
        key = ledger_key(props.cluster_name)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Cost guard: scales the Neuron node group to 0; reads its instances, its ledger, publishes to its topic",
        )
        nodegroup_arn = props.nodegroup.nodegroup_arn
        topic_arn, log_arn = self.topic.topic_arn, self.log_group.log_group_arn
        # The bucket by name, whose ARN is built from it: the name is already exported from the data
        # stack, so the ARN needs no further cross-stack output.
        ledger_bucket = s3.Bucket.from_bucket_name(self, "LedgerBucket", props.bucket.bucket_name)
        for statement in guard_statements(nodegroup_arn, ledger_bucket, key, topic_arn, log_arn, props.metrics_namespace):
            self.role.add_to_policy(statement)
        self.function = lambda_.Function(
            self,
            "Function",
            description="Scales the Neuron node group to 0 after a run and when the node-hour budget is spent",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc", "__init__.py"]),
            role=self.role,
            log_group=self.log_group,
            memory_size=256,
            timeout=props.timeout,
            environment={
                "CLUSTER_NAME": props.cluster_name,
                "NODEGROUP_NAME": props.nodegroup.nodegroup_name,
                "MAX_SIZE": str(props.max_size),
                "BUDGET_NODE_HOURS": str(props.budget_node_hours),
                "SCALE_AFTER_RUN": "true" if props.scale_after_run else "false",
                "TOPIC_ARN": self.topic.topic_arn,
                "LEDGER_BUCKET": props.bucket.bucket_name,
                "LEDGER_KEY": key,
                "METRICS_NAMESPACE": props.metrics_namespace,
                "NODE_PRICE_PER_HOUR": "" if props.price_per_hour is None else str(props.price_per_hour),
            },
        )
        # A scheduled check and a run's event may overlap; each writes the ledger with what it saw, so
        # the later write may drop the other's scale-down mark (the next check repeats the call, at
        # worst one more notification). No reserved concurrency: see stacks/results.py.
        target = targets.LambdaFunction(self.function, retry_attempts=2, max_event_age=Duration.hours(1))
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Node-hour budget check of the Neuron node group",
            schedule=events.Schedule.expression(schedule_expression(props.check_minutes)),
            targets=[target],
        )
        self.on_run = None
        if props.scale_after_run:
            self.on_run = events.Rule(
                self,
                "OnRunPublished",
                description=f"Scale the Neuron nodes to 0 once a benchmark run has written its {PUBLISH_MARKER}",
                event_pattern=run_published(props.bucket),
                targets=[target],
            )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ec2:DescribeInstances supports no resource-level permissions; "
            "PutMetricData is limited to the benchmark's namespace by a condition.",
        )
