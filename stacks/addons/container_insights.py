"""CloudWatch Container Insights with enhanced observability and Neuron metrics (EKS add-on
``amazon-cloudwatch-observability``), its agent bound to a role through Pod Identity.

The log groups the agent writes to are created here first, with retention, so they are removed on
``cdk destroy`` instead of outliving the cluster; the add-on depends on them, so it is deleted
(and stops writing) before they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import RemovalPolicy
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct, IDependable

from config import layout

from .pod_identity import pod_identity_addon, pod_identity_role

ADDON_NAME = "amazon-cloudwatch-observability"
LOG_GROUP_KINDS = ("application", "dataplane", "host", "performance")


def log_group_names(cluster_name: str) -> list[str]:
    return [f"/aws/containerinsights/{cluster_name}/{kind}" for kind in LOG_GROUP_KINDS]


def addon_configuration() -> dict:
    """Enhanced Container Insights with accelerated-compute (Neuron) metrics switched on explicitly,
    so a change of the add-on's defaults cannot silently drop the NeuronCore metrics."""
    return {
        "agent": {
            "config": {
                "logs": {"metrics_collected": {"kubernetes": {"enhanced_container_insights": True, "accelerated_compute_metrics": True}}}
            }
        }
    }


@dataclass(frozen=True)
class ContainerInsightsProps:
    cluster: eks.Cluster
    log_retention: logs.RetentionDays
    version: str = ""
    depends_on: Sequence[IDependable] = field(default_factory=tuple)


class ContainerInsightsAddOn(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: ContainerInsightsProps) -> None:
        super().__init__(scope, construct_id)
        cluster_name = props.cluster.cluster_name
        self.log_groups = [
            logs.LogGroup(
                self,
                f"{name.rsplit('/', 1)[-1].capitalize()}Logs",
                log_group_name=name,
                retention=props.log_retention,
                removal_policy=RemovalPolicy.DESTROY,
            )
            for name in log_group_names(cluster_name)
        ]
        self.role = pod_identity_role(
            self,
            "AgentRole",
            description="CloudWatch agent and Fluent Bit of Container Insights",
            cluster_name=cluster_name,
            namespace=layout.CLOUDWATCH_NAMESPACE,
            service_account=layout.CLOUDWATCH_SERVICE_ACCOUNT,
        )
        # The AWS-documented policy for the CloudWatch agent: metric and log writes plus EC2/EBS
        # describe calls; Pod Identity limits it to the add-on's one service account.
        self.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name("CloudWatchAgentServerPolicy"))
        self.addon = pod_identity_addon(
            self,
            cluster=props.cluster,
            addon_name=ADDON_NAME,
            version=props.version,
            role=self.role,
            service_account=layout.CLOUDWATCH_SERVICE_ACCOUNT,
            configuration=addon_configuration(),
            depends_on=(*self.log_groups, *props.depends_on),
        )
