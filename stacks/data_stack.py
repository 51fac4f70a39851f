"""Data stack: the long-lived bucket, in its own stack so the cluster can be destroyed and rebuilt
(``cdk destroy SpecDecodePlatform``) while weights, compiled artifacts and results stay put."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from config import PlatformConfig, layout

from .storage import DataBucket, DataBucketProps


class DataStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: PlatformConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        props = DataBucketProps(
            cluster_name=config.cluster.name,
            keep_on_destroy=config.data.keep_bucket_on_destroy,
            benchmark_namespace=config.serving.namespace,
            metrics_namespace=config.benchmark.metrics_namespace,
        )
        self.storage = DataBucket(self, "Data", props)
        self.bucket = self.storage.bucket
        self.model_cache_role = self.storage.model_cache_role
        self.benchmark_role = self.storage.benchmark_role
        CfnOutput(self, "DataBucketName", value=self.bucket.bucket_name, description="Weights, artifacts and results")
        for name, prefix in (("Models", layout.MODELS_PREFIX), ("Artifacts", layout.ARTIFACTS_PREFIX), ("Results", layout.RESULTS_PREFIX)):
            CfnOutput(self, f"{name}Uri", value=f"s3://{self.bucket.bucket_name}/{prefix}")
