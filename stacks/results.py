"""Results dashboard: the Lambda that aggregates every benchmark run under ``results/`` into a
CloudWatch dashboard (and a summary per run), and what triggers it.

It runs on a schedule, so the dashboard's live widgets and the speedup statistics stay current,
and as soon as a run's ``publish.json`` lands (the Job writes it last, after its metrics), so a
finished run shows up without waiting for the schedule. It lives in the data stack: results and
their dashboard outlive the cluster. Its role may read ``results/``, write only the per-run
``aggregate.json``, publish only into the benchmark's namespace and write only its own dashboard.
Reading ``results/`` covers the sweeps' stage documents and points (``results/sweeps/``) the
dashboard's top row shows: no further permission.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from config import layout
from specbench.bundle import lambda_zip_bytes
from specbench.outputs import dashboard

from .nag import acknowledge, wildcard_finding

# The object a benchmark run writes last; its creation triggers an aggregation.
PUBLISH_MARKER = "publish.json"


def run_published(bucket: s3.IBucket) -> events.EventPattern:
    """S3's EventBridge event for a benchmark run's publish.json landing in ``bucket`` (the aggregation
    Lambda and the cost guard both start from it)."""
    return events.EventPattern(
        source=["aws.s3"],
        detail_type=["Object Created"],
        detail={
            "bucket": {"name": [bucket.bucket_name]},
            "object": {"key": events.Match.wildcard(f"{layout.RESULTS_PREFIX}*/{PUBLISH_MARKER}")},
        },
    )


# The per-run summary the Lambda writes (an S3 event on it matches no rule, so no loop).
AGGREGATE_OBJECT = "aggregate.json"


@dataclass(frozen=True)
class ResultsDashboardProps:
    # The data bucket; runs are under layout.RESULTS_PREFIX and must send events to EventBridge.
    bucket: s3.IBucket
    dashboard_name: str
    # CloudWatch namespace the benchmark publishes into (read, and written by the Lambda).
    metrics_namespace: str
    # Dimensions of the live widgets: the EKS cluster and the serving namespace.
    cluster_name: str
    serving_namespace: str
    # The service every speculative variant's speedup is measured against.
    baseline_variant: str
    # c in S = E/(k*c+1), and the bootstrap resamples of each speedup's confidence interval.
    draft_cost_ratio: float
    bootstrap_resamples: int
    lookback_hours: int
    refresh_minutes: int
    log_retention: logs.RetentionDays
    # The dashboard's top row (specbench/outputs/deployment_state.py): the services (baseline first),
    # budget.node_hours (0: none), env.profile ("" or rehearsal), and the configured sweep (config/sweep.py
    # first_job: strategy none, grid or staged, its first Job's points and node-hours).
    services: tuple[str, ...]
    budget_node_hours: float
    profile: str
    sweep: tuple[str, int, float]
    memory_mib: int = 1024
    timeout: Duration = field(default_factory=lambda: Duration.minutes(5))


def lambda_asset() -> str:
    """The Lambda's zip, written to a fresh temporary directory: the asset hash is the zip's content,
    which is byte-stable, so identical sources synthesize identical templates."""
    directory = Path(tempfile.mkdtemp(prefix="specbench-aggregate-"))
    # Staging copies the asset into the cloud assembly when the Function is created; the copy here
    # is not needed afterwards.
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    path = directory / "aggregate.zip"
    path.write_bytes(lambda_zip_bytes())
    return str(path)


def deployment_environment(
    services: tuple[str, ...], budget_node_hours: float, profile: str, sweep: tuple[str, int, float]
) -> dict[str, str]:
    """The variables of the dashboard's top row (lambdas/aggregate/handler.py Settings reads them)."""
    strategy, points, node_hours = sweep
    return {
        "SERVICES": ",".join(services),
        "BUDGET_NODE_HOURS": str(budget_node_hours),
        "ENV_PROFILE": profile,
        "SWEEP_STRATEGY": strategy,
        "SWEEP_FIRST_JOB_POINTS": str(points),
        "SWEEP_FIRST_JOB_NODE_HOURS": str(node_hours),
    }


def schedule_expression(minutes: int) -> str:
    return f"rate({minutes} minute)" if minutes == 1 else f"rate({minutes} minutes)"


def aggregator_statements(
    bucket: s3.IBucket, log_group: logs.ILogGroup, dashboard_arn: str, metrics_namespace: str
) -> list[iam.PolicyStatement]:
    """Least privilege for the aggregation Lambda."""
    results = layout.RESULTS_PREFIX
    return [
        iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]),
        iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.bucket_arn], conditions={"StringLike": {"s3:prefix": f"{results}*"}}
        ),
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{results}*")]),
        iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{results}*/{AGGREGATE_OBJECT}")]),
        # Neither supports resource-level permissions.
        iam.PolicyStatement(actions=["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"], resources=["*"]),
        # No resource-level permissions either; the namespace condition is its scope.
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": metrics_namespace}},
        ),
        iam.PolicyStatement(actions=["cloudwatch:PutDashboard", "cloudwatch:GetDashboard"], resources=[dashboard_arn]),
    ]


class ResultsDashboard(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: ResultsDashboardProps) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.dashboard_name = props.dashboard_name
        self.dashboard_url = (
            f"https://{stack.region}.console.aws.amazon.com/cloudwatch/home?region={stack.region}#dashboards:name={props.dashboard_name}"
        )
        dashboard_arn = stack.format_arn(
            service="cloudwatch",
            region="",
            resource="dashboard",
            resource_name=props.dashboard_name,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        # The dashboard is a stack resource, so `cdk destroy` deletes it; it starts as the "no data yet"
        # body (with the Neuron widgets) and the Lambda replaces the body on every refresh. A deploy
        # that changes this initial body resets it until the next refresh.
        self.dashboard = cloudwatch.CfnDashboard(
            self,
            "Dashboard",
            dashboard_name=props.dashboard_name,
            dashboard_body=dashboard.to_json(
                dashboard.body(
                    None,
                    dashboard.DashboardSettings(
                        name=props.dashboard_name,
                        region=stack.region,
                        metrics_namespace=props.metrics_namespace,
                        cluster_name=props.cluster_name,
                        serving_namespace=props.serving_namespace,
                        lookback_hours=props.lookback_hours,
                        baseline=props.baseline_variant,
                        budget_node_hours=props.budget_node_hours,
                        profile=props.profile,
                    ),
                )
            ),
        )
        # The aggregator's logs are not results: they go with the stack.
        self.log_group = logs.LogGroup(self, "Logs", retention=props.log_retention, removal_policy=RemovalPolicy.DESTROY)
        # An explicit role instead of the one Function creates, which carries the AWS-managed
        # AWSLambdaBasicExecutionRole (logs on every log group in the account).
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Results aggregator: reads results/, writes aggregate.json per run, its metrics namespace and dashboard",
        )
        for statement in aggregator_statements(props.bucket, self.log_group, dashboard_arn, props.metrics_namespace):
            self.role.add_to_policy(statement)
        # No reserved concurrency: it would fail the deploy in new accounts, whose concurrency limit
        # is 10 (AWS keeps 10 unreserved). Overlapping runs are harmless, each rewrites the same outputs.
        self.function = lambda_.Function(
            self,
            "Function",
            description="Aggregates benchmark runs under results/ into the CloudWatch dashboard",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(lambda_asset()),
            role=self.role,
            log_group=self.log_group,
            memory_size=props.memory_mib,
            timeout=props.timeout,
            environment={
                "RESULTS_BUCKET": props.bucket.bucket_name,
                "RESULTS_PREFIX": layout.RESULTS_PREFIX,
                "DASHBOARD_NAME": props.dashboard_name,
                "METRICS_NAMESPACE": props.metrics_namespace,
                "CLUSTER_NAME": props.cluster_name,
                "SERVING_NAMESPACE": props.serving_namespace,
                "BASELINE_VARIANT": props.baseline_variant,
                "DRAFT_COST_RATIO": str(props.draft_cost_ratio),
                "LOOKBACK_HOURS": str(props.lookback_hours),
                "BOOTSTRAP_RESAMPLES": str(props.bootstrap_resamples),
                **deployment_environment(props.services, props.budget_node_hours, props.profile, props.sweep),
            },
        )
        target = targets.LambdaFunction(self.function, retry_attempts=2, max_event_age=Duration.hours(1))
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Refresh the results dashboard",
            schedule=events.Schedule.expression(schedule_expression(props.refresh_minutes)),
            targets=[target],
        )
        # S3 delivers these only when the bucket sends its events to EventBridge (DataBucket does).
        self.on_publish = events.Rule(
            self,
            "OnRunPublished",
            description=f"Aggregate as soon as a benchmark run writes its {PUBLISH_MARKER}",
            event_pattern=run_published(props.bucket),
            targets=[target],
        )

        bucket_arn = props.bucket.bucket_arn
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:GetMetricData and ListMetrics support no resource-level permissions; "
            "PutMetricData is limited to the benchmark's namespace by a condition.",
        )
        acknowledge(
            self.role,
            wildcard_finding(self, bucket_arn, f"/{layout.RESULTS_PREFIX}*"),
            f"Read-only access limited to the {layout.RESULTS_PREFIX} prefix: the aggregator reads every run's folder.",
        )
        acknowledge(
            self.role,
            wildcard_finding(self, bucket_arn, f"/{layout.RESULTS_PREFIX}*/{AGGREGATE_OBJECT}"),
            f"Writes only the {AGGREGATE_OBJECT} summary inside each run's folder; the wildcard is the run id.",
        )
