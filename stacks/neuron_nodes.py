"""Neuron node group: Trn2 managed nodes on the AL2023 Neuron AMI, tainted for Neuron workloads.

aws_eks_v2 (2.275) does not know trn2 is an accelerated type: naming it in ``instance_types`` with
the Neuron AMI type fails validation, and without an AMI type it silently picks AL2. So the
instance type goes in the launch template and the CloudFormation AMI type is set on the L1
resource (spelled ``AL2023_x86_64_NEURON``; the enum's value ``AL2023_X86_64_NEURON`` fails
CloudFormation's validation). tests/test_neuron_nodes.py pins both halves of the workaround.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from config import layout

NEURON_AMI_TYPE = "AL2023_x86_64_NEURON"
ROOT_DEVICE = "/dev/xvda"  # AL2023 EKS AMIs boot from /dev/xvda


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
        block_device_mappings=[
            ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                device_name=ROOT_DEVICE,
                ebs=ec2.CfnLaunchTemplate.EbsProperty(
                    volume_size=props.root_volume_gib,
                    volume_type="gp3",
                    iops=props.root_volume_iops,
                    throughput=props.root_volume_throughput_mibps,
                    encrypted=True,
                    delete_on_termination=True,
                ),
            )
        ],
        # IMDSv2 only; hop limit 2 so node agents in containers can still read the region.
        metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(http_tokens="required", http_put_response_hop_limit=2),
        capacity_reservation_specification=reservation,
        instance_market_options=market,
    )


class NeuronNodeGroup(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: NeuronNodeGroupProps) -> None:
        super().__init__(scope, construct_id)
        self.launch_template = ec2.CfnLaunchTemplate(self, "LaunchTemplate", launch_template_data=launch_template_data(props))
        self.nodegroup = props.cluster.add_nodegroup_capacity(
            "NeuronNodes",
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            capacity_type=capacity_type(props.capacity_mode),
            min_size=props.min_size,
            desired_size=props.desired_size,
            max_size=props.max_size,
            subnets=props.subnets,
            labels={layout.NODE_POOL_LABEL: layout.NEURON_POOL},
            taints=[eks.TaintSpec(effect=eks.TaintEffect.NO_SCHEDULE, key=layout.NEURON_TAINT_KEY, value=layout.NEURON_TAINT_VALUE)],
        )
        self.nodegroup.node.default_child.add_property_override("AmiType", NEURON_AMI_TYPE)
