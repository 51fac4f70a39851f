"""Platform stack: network -> cluster (system nodes) -> Neuron nodes -> add-ons. Reads top to
bottom like the architecture diagram in docs/architecture.md."""

from __future__ import annotations

from aws_cdk import Aspects, CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from charts import benchmark_spec, serving_plan
from charts.sweep import sweep_spec
from config import PlatformConfig
from config.cost import node_price
from config.sweep import enabled as sweep_enabled

from .addons import (
    ContainerInsightsAddOn,
    ContainerInsightsProps,
    MountpointS3AddOn,
    MountpointS3Props,
    NeuronHelmAddOn,
    NeuronHelmProps,
    VpcCniAddOn,
    VpcCniProps,
)
from .cluster import ClusterProps, SystemNodeGroupProps, TrainiumCluster
from .cost_guard import CostGuard, CostGuardProps
from .log_policy import LogGroupPolicy, retention_period
from .network import Network, NetworkProps
from .neuron_nodes import NeuronNodeGroup, NeuronNodeGroupProps
from .serving import ServingWorkloads, ServingWorkloadsProps


class PlatformStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: PlatformConfig,
        bucket: s3.IBucket,
        model_cache_role: iam.IRole,
        benchmark_role: iam.IRole,
        sweep_control_role: iam.IRole | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self._azs = list(config.env.availability_zones)
        retention = retention_period(config.data.log_retention_days)

        self.network = Network(
            self,
            "Network",
            NetworkProps(
                cidr=config.network.vpc_cidr,
                availability_zones=config.env.availability_zones,
                nat_gateways=config.network.nat_gateways,
                log_retention=retention,
            ),
        )
        c = config.cluster
        s = config.system_nodes
        self.eks = TrainiumCluster(
            self,
            "Eks",
            ClusterProps(
                name=c.name,
                kubernetes_version=c.kubernetes_version,
                vpc=self.network.vpc,
                node_subnets=self.network.node_subnets(),
                private_endpoint_only=c.endpoint_access == "private",
                public_access_cidrs=c.public_access_cidrs,
                admin_principal_arns=c.admin_principal_arns,
                log_retention=retention,
                system_nodes=SystemNodeGroupProps(s.instance_type, s.min_size, s.desired_size, s.max_size, s.disk_size_gib),
            ),
        )
        cluster = self.eks.cluster
        a = config.addons
        # Network policy enforcement (VPC CNI's agent) comes before any node joins, so no pod starts
        # unenforced; the NetworkPolicies themselves are in the serving charts.
        self.vpc_cni = VpcCniAddOn(self, "VpcCni", VpcCniProps(cluster=cluster, version=a.vpc_cni_version))
        self.eks.system_nodes.node.add_dependency(self.vpc_cni.addon)
        n = config.neuron_nodes
        self.neuron = NeuronNodeGroup(
            self,
            "Neuron",
            NeuronNodeGroupProps(
                cluster=cluster,
                subnets=self.network.node_subnets(n.availability_zone),
                instance_type=n.instance_type,
                min_size=n.min_size,
                desired_size=n.desired_size,
                max_size=n.max_size,
                root_volume_gib=n.root_volume_gib,
                root_volume_iops=n.root_volume_iops,
                root_volume_throughput_mibps=n.root_volume_throughput_mibps,
                capacity_mode=n.capacity_mode,
                capacity_reservation_id=n.capacity_reservation_id,
            ),
        )
        self.neuron.nodegroup.node.add_dependency(self.vpc_cni.addon)
        b = config.budget
        # A sweep started by the deploy runs on these nodes after the benchmark: a scale-down on the
        # benchmark's publish.json would stop it, so then only the budget check runs.
        after_run = n.scale_to_zero_after_run and not (sweep_enabled(config) and config.sweep.start_on_deploy)
        self.cost_guard = CostGuard(
            self,
            "CostGuard",
            CostGuardProps(
                nodegroup=self.neuron.nodegroup,
                cluster_name=c.name,
                max_size=n.max_size,
                bucket=bucket,
                metrics_namespace=config.benchmark.metrics_namespace,
                budget_node_hours=b.node_hours,
                check_minutes=b.check_minutes,
                scale_after_run=after_run,
                notify_email=b.notify_email,
                price_per_hour=node_price(config)[0],
                log_retention=retention,
            ),
        )
        # Kubernetes-side objects go in after every node group and admin access entry exist, and so
        # are deleted before them on destroy (aws-cdk #34897: otherwise deletes can lose access).
        nodes_and_access = (self.eks.system_nodes, self.neuron.nodegroup, *self.eks.admin_access)
        self.neuron_helm = NeuronHelmAddOn(
            self,
            "NeuronHelm",
            NeuronHelmProps(
                cluster=cluster,
                version=a.neuron_helm_chart_version,
                instance_types=(n.instance_type,),
                scheduler=a.neuron_scheduler,
                scheduler_image=a.neuron_scheduler_image,
                depends_on=nodes_and_access,
            ),
        )
        self.container_insights = ContainerInsightsAddOn(
            self,
            "ContainerInsights",
            ContainerInsightsProps(
                cluster=cluster, log_retention=retention, version=a.cloudwatch_observability_version, depends_on=nodes_and_access
            ),
        )
        self.mountpoint = MountpointS3AddOn(
            self,
            "MountpointS3",
            MountpointS3Props(cluster=cluster, role=model_cache_role, version=a.mountpoint_s3_csi_version, depends_on=nodes_and_access),
        )
        # The serving charts need the device plugin and scheduler (Neuron chart) and the bucket
        # volumes (Mountpoint driver); the add-ons already wait for the nodes and admin access.
        # The benchmark comes last, after every service; its role (data stack) may write only results/.
        plan = serving_plan(config, bucket.bucket_name)
        bench = benchmark_spec(config, plan)
        self.serving = ServingWorkloads(
            self,
            "Serving",
            ServingWorkloadsProps(
                cluster=cluster,
                plan=plan,
                depends_on=(self.neuron_helm.chart, self.mountpoint.addon),
                benchmark=bench,
                benchmark_role=benchmark_role,
                sweep_control_role=sweep_control_role,
                sweep=sweep_spec(config, plan, bench) if sweep_enabled(config) else None,
            ),
        )

        Aspects.of(self).add(LogGroupPolicy(config.data.log_retention_days))

        CfnOutput(self, "ClusterName", value=cluster.cluster_name)
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --region {self.region} --name {cluster.cluster_name}",
        )
        CfnOutput(self, "NeuronNodegroupName", value=self.neuron.nodegroup.nodegroup_name)
        CfnOutput(self, "CostGuardTopicArn", value=self.cost_guard.topic.topic_arn, description="Cost guard notifications")
        CfnOutput(self, "CostGuardFunctionName", value=self.cost_guard.function.function_name, description="Cost guard Lambda")

    @property
    def availability_zones(self) -> list[str]:
        # The configured AZs, so synth needs no AZ lookup (and no credentials) in any account.
        return self._azs
