"""Cluster: an aws_eks_v2 cluster with a kubectl provider, control-plane logging, access entries for
the configured admins, and a small system managed node group for CoreDNS, add-ons and the benchmark."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Annotations, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_logs as logs
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from constructs import Construct

from config import layout

from .node_metadata import encrypted_root_volume, metadata_options

ALL_CONTROL_PLANE_LOGS = [
    eks.ClusterLoggingTypes.API,
    eks.ClusterLoggingTypes.AUDIT,
    eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    eks.ClusterLoggingTypes.SCHEDULER,
]


@dataclass(frozen=True)
class SystemNodeGroupProps:
    instance_type: str
    min_size: int
    desired_size: int
    max_size: int
    disk_size_gib: int


@dataclass(frozen=True)
class ClusterProps:
    name: str
    kubernetes_version: str
    vpc: ec2.IVpc
    node_subnets: ec2.SubnetSelection
    private_endpoint_only: bool
    public_access_cidrs: tuple[str, ...]
    admin_principal_arns: tuple[str, ...]
    log_retention: logs.RetentionDays
    system_nodes: SystemNodeGroupProps


def endpoint_access(private_only: bool, public_cidrs: tuple[str, ...]) -> eks.EndpointAccess:
    if private_only:
        return eks.EndpointAccess.PRIVATE
    return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_cidrs)


class TrainiumCluster(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: ClusterProps) -> None:
        super().__init__(scope, construct_id)
        # EKS writes control-plane logs to this group name; creating it here gives it a retention
        # and removes it on destroy instead of leaving an ever-growing group behind.
        self.control_plane_logs = logs.LogGroup(
            self,
            "ControlPlaneLogs",
            log_group_name=f"/aws/eks/{props.name}/cluster",
            retention=props.log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=props.name,
            version=eks.KubernetesVersion.of(props.kubernetes_version),
            vpc=props.vpc,
            vpc_subnets=[props.node_subnets],
            endpoint_access=endpoint_access(props.private_endpoint_only, props.public_access_cidrs),
            cluster_logging=ALL_CONTROL_PLANE_LOGS,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(self, "KubectlLayer")),
        )
        self.cluster.node.default_child.node.add_dependency(self.control_plane_logs)

        if not props.admin_principal_arns:
            Annotations.of(self).add_warning_v2(
                "specdecode:noAdminPrincipals",
                "cluster.admin_principal_arns is empty: only CloudFormation's role can use kubectl on this cluster. "
                "Pass -c cluster.admin_principal_arns=arn:aws:iam::<account>:role/<your role>.",
            )
        self.admin_access = [
            eks.AccessEntry(
                self,
                f"Admin{index}",
                cluster=self.cluster,
                principal=arn,
                access_policies=[
                    eks.AccessPolicy.from_access_policy_name("AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER)
                ],
            )
            for index, arn in enumerate(props.admin_principal_arns)
        ]

        system = props.system_nodes
        # A launch template so IMDSv2 and root-volume encryption are this stack's choice, not the
        # account defaults. With a launch template the disk size goes in it (EKS rejects DiskSize
        # next to one); the instance type stays on the node group, where CDK checks it against the
        # AMI type (it renders AL2023_X86_64_STANDARD as CloudFormation's `AL2023_x86_64_STANDARD`).
        self.system_launch_template = ec2.CfnLaunchTemplate(
            self,
            "SystemLaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                block_device_mappings=[encrypted_root_volume(system.disk_size_gib)],
                metadata_options=metadata_options(),
            ),
        )
        self.system_nodes = self.cluster.add_nodegroup_capacity(
            "SystemNodes",
            instance_types=[ec2.InstanceType(system.instance_type)],
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.system_launch_template.ref, version=self.system_launch_template.attr_latest_version_number
            ),
            min_size=system.min_size,
            desired_size=system.desired_size,
            max_size=system.max_size,
            subnets=props.node_subnets,
            labels={layout.NODE_POOL_LABEL: layout.SYSTEM_POOL},
        )
