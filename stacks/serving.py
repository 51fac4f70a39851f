"""The serving workloads on the cluster: the cdk8s charts (model cache, then one chart per vLLM
service, then the benchmark) applied through the cluster's kubectl provider and, when a Hugging
Face token secret is configured, the Pod Identity binding that lets the model-cache Job read that
one secret (named by its full ARN, so the policy has no wildcard).

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
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from charts import BenchmarkSpec, ServingPlan, serving_charts
from charts.model_cache import SERVICE_ACCOUNT
from charts.sweep import SweepSpec

from .addons.pod_identity import pod_identity_role
from .benchmark import BenchmarkRun, BenchmarkRunProps, code_asset, with_code


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


class ServingWorkloads(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: ServingWorkloadsProps) -> None:
        super().__init__(scope, construct_id)
        cluster, plan = props.cluster, props.plan
        bench, sweep = props.benchmark, props.sweep
        # The pods' code: a file asset built at synth, fetched by the pods (stacks/benchmark.py).
        self.code = code_asset(self, "BenchmarkCode", bench.bundle) if bench is not None else None
        if bench is not None and self.code is not None:
            bench = with_code(bench, self.code)
            if sweep is not None:
                if sweep.benchmark.bundle != bench.bundle:
                    raise ValueError("ServingWorkloadsProps.sweep must run the benchmark's code")
                sweep = replace(sweep, benchmark=with_code(sweep.benchmark, self.code))
        charts = serving_charts(cdk8s.App(), plan, bench, sweep)
        self.model_cache = cluster.add_cdk8s_chart("ModelCacheChart", charts.model_cache)
        self.model_cache.node.add_dependency(*props.depends_on)
        if plan.model_cache.hf_token_secret_arn:
            self.model_cache.node.add_dependency(self._token_reader(cluster, plan))
        self.services: dict[str, eks.KubernetesManifest] = {}
        for chart in charts.services:
            manifest = cluster.add_cdk8s_chart(f"Service-{chart.spec.name}", chart)
            manifest.node.add_dependency(self.model_cache)
            self.services[chart.spec.name] = manifest
        self.benchmark: BenchmarkRun | None = None
        if charts.benchmark is not None:
            if props.benchmark_role is None:
                raise ValueError("ServingWorkloadsProps.benchmark needs benchmark_role")
            assert self.code is not None  # made with the benchmark above
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

    def _token_reader(self, cluster: eks.Cluster, plan: ServingPlan) -> eks.CfnPodIdentityAssociation:
        """The model-cache Job's service account may read the one token secret, nothing else."""
        cache = plan.model_cache
        role = pod_identity_role(
            self,
            "TokenReaderRole",
            description="Model-cache Job: read the Hugging Face token secret",
            cluster_name=cluster.cluster_name,
            namespace=cache.namespace,
            service_account=SERVICE_ACCOUNT,
        )
        role.add_to_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[cache.hf_token_secret_arn]))
        association = eks.CfnPodIdentityAssociation(
            self,
            "TokenReader",
            cluster_name=cluster.cluster_name,
            namespace=cache.namespace,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.role_arn,
        )
        association.node.add_dependency(cluster.eks_pod_identity_agent)
        return association
