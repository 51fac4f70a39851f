"""The benchmark on the cluster: its cdk8s chart, applied after every service it measures, and the
Pod Identity association that gives its service account the data stack's benchmark role.

That role (stacks/storage.py) may do three things and nothing else: publish metrics into the
configured CloudWatch namespace, put and get objects under the data bucket's ``results/`` prefix,
and list that prefix. The chart's manifest depends on every service manifest and on the
association, so ``cdk deploy`` creates the Job last, with working credentials, and
``cdk destroy`` deletes it first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from charts import BenchmarkChart
from config import layout


@dataclass(frozen=True)
class BenchmarkRunProps:
    cluster: eks.Cluster
    chart: BenchmarkChart
    # The data stack's benchmark role: results/ and the metrics namespace only.
    role: iam.IRole
    # The service manifests: applied before the benchmark, deleted after it.
    depends_on: Sequence[IDependable] = field(default_factory=tuple)


class BenchmarkRun(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: BenchmarkRunProps) -> None:
        super().__init__(scope, construct_id)
        cluster = props.cluster
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=props.chart.spec.namespace,
            service_account=layout.BENCHMARK_SERVICE_ACCOUNT,
            role_arn=props.role.role_arn,
        )
        self.association.node.add_dependency(cluster.eks_pod_identity_agent)
        self.manifest = cluster.add_cdk8s_chart("BenchmarkChart", props.chart)
        # Credentials are bound before the pod asks for them, and stay until it is gone.
        self.manifest.node.add_dependency(self.association, *props.depends_on)
