"""Data stack: the long-lived bucket and the results dashboard, in their own stack so the cluster
can be destroyed and rebuilt (``cdk destroy SpecDecodePlatform``) while weights, compiled
artifacts, results and their dashboard stay put."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from config import PlatformConfig, layout
from config.sweep import first_job, staged_sweep
from config.variants import service_variants

from .log_policy import retention_period
from .results import ResultsDashboard, ResultsDashboardProps
from .storage import DataBucket, DataBucketProps


class DataStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: PlatformConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        props = DataBucketProps(
            cluster_name=config.cluster.name,
            keep_on_destroy=config.data.keep_bucket_on_destroy,
            benchmark_namespace=config.serving.namespace,
            metrics_namespace=config.benchmark.metrics_namespace,
            sweep_control_namespace=config.serving.namespace if staged_sweep(config) else "",
        )
        self.storage = DataBucket(self, "Data", props)
        self.bucket = self.storage.bucket
        self.model_cache_role = self.storage.model_cache_role
        self.benchmark_role = self.storage.benchmark_role
        self.sweep_control_role = self.storage.sweep_control_role
        CfnOutput(self, "DataBucketName", value=self.bucket.bucket_name, description="Weights, artifacts and results")
        for name, prefix in (("Models", layout.MODELS_PREFIX), ("Artifacts", layout.ARTIFACTS_PREFIX), ("Results", layout.RESULTS_PREFIX)):
            CfnOutput(self, f"{name}Uri", value=f"s3://{self.bucket.bucket_name}/{prefix}")
        r = config.results
        self.results = ResultsDashboard(
            self,
            "Results",
            ResultsDashboardProps(
                bucket=self.bucket,
                dashboard_name=r.dashboard_name,
                metrics_namespace=config.benchmark.metrics_namespace,
                cluster_name=config.cluster.name,
                serving_namespace=config.serving.namespace,
                baseline_variant=config.serving.baseline_service,
                draft_cost_ratio=r.draft_cost_ratio,
                bootstrap_resamples=r.bootstrap_resamples,
                lookback_hours=r.lookback_hours,
                refresh_minutes=r.refresh_minutes,
                log_retention=retention_period(config.data.log_retention_days),
                services=tuple(v.name for v in service_variants(config.serving)),
                budget_node_hours=config.budget.node_hours,
                profile=config.env.profile,
                sweep=first_job(config),
            ),
        )
        CfnOutput(self, "DashboardUrl", value=self.results.dashboard_url, description="Benchmark results dashboard")
        CfnOutput(self, "AggregatorFunctionName", value=self.results.function.function_name, description="Results aggregation Lambda")
