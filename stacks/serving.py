"""The serving workloads on the cluster: the cdk8s charts (model cache, then one chart per vLLM
service, then the benchmark) applied through the cluster's kubectl provider, the code asset every
pod that runs project code fetches (stacks/benchmark.py ``code_asset``, charts/code.py), and the
Pod Identity binding of the model-cache Job: get that one code object and, when a Hugging Face
token secret is configured, read that one secret (named by its full ARN, so the policy has no
wildcard).

Each chart is one manifest resource. The model cache depends on the add-ons it needs (Neuron
device plugin and scheduler, Mountpoint CSI driver), every service depends on the model cache,
and the benchmark (stacks/benchmark.py) on every service, so ``cdk deploy`` applies them in that
order and ``cdk destroy`` deletes the benchmark, then the services, while the cluster and its
add-ons are still there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import cdk8s
from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct, IDependable

from charts import BenchmarkSpec, ServingPlan, serving_charts
from charts.dist import code_key as dist_code_key
from charts.model_cache import SERVICE_ACCOUNT
from charts.sweep import SweepSpec

from .addons.pod_identity import associate, pod_identity_role
from .benchmark import BenchmarkRun, BenchmarkRunProps, code_asset, with_code
from .sweep_control import SweepControlAccess, SweepControlAccessProps


@dataclass(frozen=True)
class ServingWorkloadsProps:
    cluster: eks.Cluster
    plan: ServingPlan
    depends_on: Sequence[IDependable] = field(default_factory=tuple)
    # The benchmark and its service account's role; without a spec, no benchmark is applied.
    benchmark: BenchmarkSpec | None = None
    benchmark_role: iam.IRole | None = None
    # The sweep (charts/sweep.py): applied after the benchmark, whose ConfigMap, service account and
    # Pod Identity association its pods use. None: no sweep configured.
    sweep: SweepSpec | None = None
    # sweep.strategy=staged: the controller's role (the data stack's, stacks/sweep_control.py).
    sweep_control_role: iam.IRole | None = None


class ServingWorkloads(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: ServingWorkloadsProps) -> None:
        super().__init__(scope, construct_id)
        cluster, plan = props.cluster, props.plan
        bench, sweep = props.benchmark, props.sweep
        # The pods' code: a file asset built at synth, fetched by the pods (stacks/benchmark.py). One
        # asset: the model-cache Job runs its fill from the benchmark's zip.
        self.code = code_asset(self, "BenchmarkCode", plan.model_cache.bundle)
        plan = replace(plan, model_cache=replace(plan.model_cache, code_bucket=self.code.s3_bucket_name, code_key=self.code.s3_object_key))
        if bench is not None:
            if bench.bundle != plan.model_cache.bundle:
                raise ValueError("ServingWorkloadsProps.benchmark must run the model cache's code (one code asset)")
            bench = with_code(bench, self.code)
            if sweep is not None:
                if sweep.benchmark.bundle != bench.bundle:
                    raise ValueError("ServingWorkloadsProps.sweep must run the benchmark's code")
                sweep = replace(sweep, benchmark=with_code(sweep.benchmark, self.code))
        charts = serving_charts(cdk8s.App(), plan, bench, sweep)
        self.model_cache = cluster.add_cdk8s_chart("ModelCacheChart", charts.model_cache)
        self.model_cache.node.add_dependency(*props.depends_on)
        # Credentials (and the role's policy, a child of the role) are bound before the Job asks.
        self.model_cache.node.add_dependency(*self._model_cache_identity(cluster, plan, self.code))
        self.services: dict[str, eks.KubernetesManifest] = {}
        for chart in charts.services:
            manifest = cluster.add_cdk8s_chart(f"Service-{chart.spec.name}", chart)
            manifest.node.add_dependency(self.model_cache)
            self.services[chart.spec.name] = manifest
        self.benchmark: BenchmarkRun | None = None
        if charts.benchmark is not None:
            if props.benchmark_role is None:
                raise ValueError("ServingWorkloadsProps.benchmark needs benchmark_role")
            self.benchmark = BenchmarkRun(
                self,
                "Benchmark",
                BenchmarkRunProps(
                    cluster=cluster,
                    chart=charts.benchmark,
                    role=props.benchmark_role,
                    code=self.code,
                    depends_on=tuple(self.services.values()),
                ),
            )
        self.sweep: eks.KubernetesManifest | None = None
        if charts.sweep is not None and self.benchmark is not None:
            self.sweep = cluster.add_cdk8s_chart("SweepChart", charts.sweep)
            self.sweep.node.add_dependency(self.benchmark.manifest)
        self.sweep_control: SweepControlAccess | None = None
        if self.sweep is not None and charts.sweep is not None and charts.sweep.spec.control_settings:
            # sweep.strategy=staged: the controller's role bound, and its code readable, before its pod starts.
            if props.sweep_control_role is None:
                raise ValueError("ServingWorkloadsProps.sweep of a staged sweep needs sweep_control_role")
            swept = charts.sweep.spec.benchmark
            dist_copy = s3.Bucket.from_bucket_name(self, "SweepControlDataBucket", swept.bucket_name).arn_for_objects(
                dist_code_key(swept.bundle)
            )
            code = (self.code.bucket.arn_for_objects(self.code.s3_object_key), dist_copy)
            self.sweep_control = SweepControlAccess(
                self, "SweepControl", SweepControlAccessProps(cluster, swept.namespace, props.sweep_control_role, code)
            )
            self.sweep.node.add_dependency(self.sweep_control.association, self.sweep_control.code_read)

    def _model_cache_identity(
        self, cluster: eks.Cluster, plan: ServingPlan, code: s3_assets.Asset
    ) -> tuple[iam.Role, eks.CfnPodIdentityAssociation]:
        """The model-cache Job's service account may get the one code object (its init container
        fetches the fill from it: the CDK asset, or charts.dist's upload of the same zip under the
        data bucket's results/code/) and, when one is configured, read the one token secret; nothing
        else (Asset.grant_read would add List* and GetBucket* on the whole assets bucket)."""
        cache = plan.model_cache
        role = pod_identity_role(
            self,
            "ModelCacheJobRole",
            description="Model-cache Job: get the code object, read the Hugging Face token secret if one is set",
            cluster_name=cluster.cluster_name,
            namespace=cache.namespace,
            service_account=SERVICE_ACCOUNT,
        )
        dist_copy = Stack.of(self).format_arn(
            service="s3",
            region="",
            account="",
            resource=cache.bucket_name,
            resource_name=dist_code_key(cache.bundle),
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        asset = code.bucket.arn_for_objects(code.s3_object_key)
        role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[asset, dist_copy]))
        if cache.hf_token_secret_arn:
            role.add_to_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[cache.hf_token_secret_arn]))
        return role, associate(self, "ModelCacheJob", cluster, cache.namespace, SERVICE_ACCOUNT, role)
