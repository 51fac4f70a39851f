"""Storage: one bucket for model weights, compiled Neuron artifacts and benchmark results (its
object events sent to EventBridge), the Pod Identity role that may touch the model-cache prefixes, and the benchmark Job's role that may
touch only ``results/`` (and publish its metrics).

Prefixes are fixed in config.layout (models/, neuron-artifacts/, results/). The bucket is
encrypted, TLS-only, private and versioned; noncurrent versions and failed uploads expire so
re-uploaded weights do not pile up. The roles live beside the bucket so that the data stack alone
says who may touch the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from config import layout

from .addons.pod_identity import pod_identity_role
from .nag import acknowledge, wildcard_finding
from .sweep_control import control_role


@dataclass(frozen=True)
class DataBucketProps:
    # The EKS cluster whose Mountpoint driver may use the model-cache role.
    cluster_name: str
    keep_on_destroy: bool = True
    noncurrent_version_days: int = 30
    # Prefixes the Mountpoint CSI driver may read and write: the model cache, not results.
    model_cache_prefixes: tuple[str, ...] = (layout.MODELS_PREFIX, layout.ARTIFACTS_PREFIX)
    # The benchmark Job's Kubernetes namespace (its service account is layout.BENCHMARK_SERVICE_ACCOUNT)
    # and the CloudWatch namespace it may publish metrics into.
    benchmark_namespace: str = "specdecode"
    metrics_namespace: str = "Qwen/LLMPerf"
    # sweep.strategy=staged: the namespace of the sweep's controller (stacks/sweep_control.py), whose
    # role may touch only results/sweeps/. Empty: no staged sweep, no role.
    sweep_control_namespace: str = ""


def prefix_read_write_statements(bucket: s3.IBucket, prefixes: Sequence[str]) -> list[iam.PolicyStatement]:
    """Least privilege for Mountpoint: list the bucket under the prefixes, read/write their objects."""
    return [
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
        ),
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"],
            resources=[bucket.arn_for_objects(f"{p}*") for p in prefixes],
        ),
    ]


def benchmark_statements(bucket: s3.IBucket, metrics_namespace: str) -> list[iam.PolicyStatement]:
    """Least privilege for ``specbench run``: objects under results/, its dataset cache under datasets/
    (read a cached file, store a fetched one; listing lets a missing key read as 404, not 403), and its
    metrics namespace."""
    results, cached = layout.RESULTS_PREFIX, layout.DATASETS_PREFIX
    return [
        # PutMetricData has no resource-level permissions; the namespace condition is its scope.
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": metrics_namespace}},
        ),
        iam.PolicyStatement(
            actions=["s3:PutObject", "s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{results}*"), bucket.arn_for_objects(f"{cached}*")],
        ),
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{results}*", f"{cached}*"]}},
        ),
    ]


class DataBucket(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: DataBucketProps) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if props.keep_on_destroy else RemovalPolicy.DESTROY
        common = dict(
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=removal,
            auto_delete_objects=not props.keep_on_destroy,
        )
        self.access_logs = s3.Bucket(self, "AccessLogs", lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))], **common)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="data-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    noncurrent_version_expiration=Duration.days(props.noncurrent_version_days),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
            **common,
        )
        # Object events go to EventBridge, where the results aggregator's rule picks out each run's
        # publish.json. Set on the L1 bucket: the L2's event_bridge_enabled goes through the
        # BucketNotifications custom resource, one more Lambda (with an AWS-managed policy) for one flag.
        cfn_bucket = self.bucket.node.default_child
        cfn_bucket.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
            event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(event_bridge_enabled=True)
        )
        self.model_cache_role = pod_identity_role(
            self,
            "ModelCacheRole",
            description="Mountpoint for S3 CSI driver: model weights and Neuron artifacts",
            cluster_name=props.cluster_name,
            namespace=layout.MOUNTPOINT_NAMESPACE,
            service_account=layout.MOUNTPOINT_SERVICE_ACCOUNT,
        )
        for statement in prefix_read_write_statements(self.bucket, props.model_cache_prefixes):
            self.model_cache_role.add_to_policy(statement)
        for prefix in props.model_cache_prefixes:
            acknowledge(
                self.model_cache_role,
                wildcard_finding(self, self.bucket.bucket_arn, f"/{prefix}*"),
                f"Object access is limited to the {prefix} prefix; the wildcard is the key below it.",
            )
        self.benchmark_role = pod_identity_role(
            self,
            "BenchmarkRole",
            description="Benchmark Job: results/ in the data bucket, metrics in its CloudWatch namespace",
            cluster_name=props.cluster_name,
            namespace=props.benchmark_namespace,
            service_account=layout.BENCHMARK_SERVICE_ACCOUNT,
        )
        for statement in benchmark_statements(self.bucket, props.metrics_namespace):
            self.benchmark_role.add_to_policy(statement)
        acknowledge(
            self.benchmark_role,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:PutMetricData supports no resource-level permissions; a condition limits it to the benchmark's namespace.",
        )
        acknowledge(
            self.benchmark_role,
            wildcard_finding(self, self.bucket.bucket_arn, f"/{layout.RESULTS_PREFIX}*"),
            f"Object access is limited to the {layout.RESULTS_PREFIX} prefix, where each benchmark run writes its own folder.",
        )
        self.sweep_control_role: iam.Role | None = None
        if props.sweep_control_namespace:
            self.sweep_control_role = control_role(self, self.bucket, props.cluster_name, props.sweep_control_namespace)
        acknowledge(
            self.benchmark_role,
            wildcard_finding(self, self.bucket.bucket_arn, f"/{layout.DATASETS_PREFIX}*"),
            f"Object access is limited to the {layout.DATASETS_PREFIX} prefix: the dataset cache, one object per file sha256.",
        )
