"""Network: a VPC over the configured AZs, nodes in private subnets, flow logs kept with retention."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from config.subnets import subnet_masks


@dataclass(frozen=True)
class NetworkProps:
    cidr: str
    availability_zones: tuple[str, ...]
    nat_gateways: int
    log_retention: logs.RetentionDays


class Network(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: NetworkProps) -> None:
        super().__init__(scope, construct_id)
        private_mask, public_mask = subnet_masks(props.cidr)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(props.cidr),
            availability_zones=list(props.availability_zones),
            nat_gateways=props.nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=public_mask),
                ec2.SubnetConfiguration(name="nodes", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=private_mask),
            ],
        )
        self.flow_log_group = logs.LogGroup(self, "FlowLogs", retention=props.log_retention, removal_policy=RemovalPolicy.DESTROY)
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group))

    def node_subnets(self, availability_zone: str | None = None) -> ec2.SubnetSelection:
        """Private subnets, optionally only the one in ``availability_zone``."""
        return ec2.SubnetSelection(
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
            availability_zones=[availability_zone] if availability_zone else None,
        )
