"""Neuron node group: Trn2 managed nodes on the AL2023 Neuron AMI, tainted for Neuron workloads.

aws_eks_v2 (2.275) does not know trn2 is an accelerated type: it checks the AMI type against
``instanceTypes`` and rejects trn2 with the Neuron AMI type (its accelerated list has no ``trn``).
So the instance type goes in the launch template and the node group gets no ``instanceTypes``; the
typed ``ami_type=NodegroupAmiType.AL2023_X86_64_NEURON`` then passes through unchecked and renders
as the string CloudFormation expects, ``AL2023_x86_64_NEURON`` (no L1 override needed).
tests/test_neuron_nodes.py pins the rendered value and the upstream check that makes this necessary.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from config import layout

from .node_metadata import encrypted_root_volume, metadata_options


@dataclass(frozen=True)
class NeuronNodeGroupProps:
    cluster: eks.Cluster
    subnets: ec2.SubnetSelection
    instance_type: str
    min_size: int
    desired_size: int
    max_size: int
    root_volume_gib: int
    root_volume_iops: int
    root_volume_throughput_mibps: int
    capacity_mode: str  # one of config.catalog.CAPACITY_MODES
    capacity_reservation_id: str = ""


# Instance types cfn-lint's EC2 data does not list yet: its rule E3628 checks a launch template's
# instance type against per-region lists derived from the Pricing API, and cfn-lint 1.58.0
# (data/schemas/extensions/aws_ec2_instance/instancetype_enum.json) lists trn2.48xlarge only in
# ap-south-2 and us-east-2, trn2.3xlarge in no region. For these types only, the Neuron launch
# template tells cfn-lint to skip that one rule (cfn-lint README, "Resource based metadata":
# Metadata cfn-lint config ignore_checks). tests/test_rehearsal.py fails once cfn-lint lists them.
CFN_LINT_UNLISTED_TYPES = ("trn2.3xlarge",)
CFN_LINT_INSTANCE_TYPE_RULE = "E3628"


def cfn_lint_metadata(instance_type: str) -> dict | None:
    """The launch template's cfn-lint metadata: skip E3628 only for a type cfn-lint does not list."""
    if instance_type not in CFN_LINT_UNLISTED_TYPES:
        return None
    return {"config": {"ignore_checks": [CFN_LINT_INSTANCE_TYPE_RULE]}}


def capacity_type(mode: str) -> eks.CapacityType:
    return eks.CapacityType.CAPACITY_BLOCK if mode == "capacity-block" else eks.CapacityType.ON_DEMAND


def launch_template_data(props: NeuronNodeGroupProps) -> ec2.CfnLaunchTemplate.LaunchTemplateDataProperty:
    """Instance type, root volume, IMDSv2, and the capacity reservation when there is one."""
    reservation = None
    market = None
    if props.capacity_mode in ("capacity-block", "reservation"):
        reservation = ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
            capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                capacity_reservation_id=props.capacity_reservation_id
            )
        )
    if props.capacity_mode == "capacity-block":
        market = ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block")
    return ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
        instance_type=props.instance_type,
        block_device_mappings=[encrypted_root_volume(props.root_volume_gib, props.root_volume_iops, props.root_volume_throughput_mibps)],
        metadata_options=metadata_options(),  # IMDSv2 only; hop limit and why: node_metadata.py
        capacity_reservation_specification=reservation,
        instance_market_options=market,
    )


class NeuronNodeGroup(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: NeuronNodeGroupProps) -> None:
        super().__init__(scope, construct_id)
        self.launch_template = ec2.CfnLaunchTemplate(self, "LaunchTemplate", launch_template_data=launch_template_data(props))
        if cfn_lint_metadata(props.instance_type):
            self.launch_template.add_metadata("cfn-lint", cfn_lint_metadata(props.instance_type))
        self.nodegroup = props.cluster.add_nodegroup_capacity(
            "NeuronNodes",
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_NEURON,
            capacity_type=capacity_type(props.capacity_mode),
            min_size=props.min_size,
            desired_size=props.desired_size,
            max_size=props.max_size,
            subnets=props.subnets,
            labels={layout.NODE_POOL_LABEL: layout.NEURON_POOL},
            taints=[eks.TaintSpec(effect=eks.TaintEffect.NO_SCHEDULE, key=layout.NEURON_TAINT_KEY, value=layout.NEURON_TAINT_VALUE)],
        )
