"""The Trn2 node group, including a pin on the aws_eks_v2 Trainium workaround."""

from __future__ import annotations

import pytest

from conftest import RESERVATION
from templates import only, props


def _neuron_group(template):
    return only(template, "AWS::EKS::Nodegroup", lambda r: props(r)["Labels"] == {"specdecode/pool": "neuron"})[1]


def _launch_template(template, group):
    return template["Resources"][props(group)["LaunchTemplate"]["Id"]["Ref"]]


def _subnet_azs(template, group):
    return [props(template["Resources"][s["Ref"]])["AvailabilityZone"] for s in props(group)["Subnets"]]


def test_ami_type_is_the_cloudformation_spelling_of_al2023_neuron(platform):
    """The typed AMI type (no instance types on the group, so no trn2 check) renders lower-case x86_64."""
    group = _neuron_group(platform)
    assert props(group)["AmiType"] == "AL2023_x86_64_NEURON"


def test_instance_type_lives_in_the_launch_template(platform):
    """The workaround, half 2: no InstanceTypes on the node group (that path fails validation)."""
    group = _neuron_group(platform)
    assert "InstanceTypes" not in props(group)
    data = props(_launch_template(platform, group))["LaunchTemplateData"]
    assert data["InstanceType"] == "trn2.48xlarge"
    assert props(group)["LaunchTemplate"]["Version"] == {"Fn::GetAtt": [props(group)["LaunchTemplate"]["Id"]["Ref"], "LatestVersionNumber"]}


def test_root_volume_and_imds(platform):
    data = props(_launch_template(platform, _neuron_group(platform)))["LaunchTemplateData"]
    (root,) = data["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/xvda"
    assert root["Ebs"] == {
        "DeleteOnTermination": True,
        "Encrypted": True,
        "Iops": 6000,
        "Throughput": 500,
        "VolumeSize": 500,
        "VolumeType": "gp3",
    }
    # IMDSv2 only; hop limit 2 (Mountpoint CSI v2 pods find their region through IMDS).
    assert data["MetadataOptions"] == {"HttpPutResponseHopLimit": 2, "HttpTokens": "required"}
    assert "CapacityReservationSpecification" not in data and "InstanceMarketOptions" not in data


def test_taint_label_size_and_single_az(platform):
    group = _neuron_group(platform)
    p = props(group)
    assert p["Taints"] == [{"Effect": "NO_SCHEDULE", "Key": "aws.amazon.com/neuron", "Value": "true"}]
    assert p["CapacityType"] == "ON_DEMAND"
    assert p["ScalingConfig"] == {"DesiredSize": 1, "MaxSize": 1, "MinSize": 0}
    assert _subnet_azs(platform, group) == ["us-east-2a"]


def test_capacity_block_variant(variant_platform):
    group = _neuron_group(variant_platform)
    assert props(group)["CapacityType"] == "CAPACITY_BLOCK"
    assert _subnet_azs(variant_platform, group) == ["us-east-2c"]
    data = props(_launch_template(variant_platform, group))["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {"CapacityReservationTarget": {"CapacityReservationId": RESERVATION}}


def test_on_demand_reservation_targets_the_reservation_without_capacity_block_market():
    from aws_cdk import App, Stack
    from aws_cdk import aws_ec2 as ec2

    from stacks.neuron_nodes import NeuronNodeGroupProps, capacity_type, launch_template_data

    stack = Stack(App(), "Probe")
    data = launch_template_data(
        NeuronNodeGroupProps(
            cluster=None,
            subnets=ec2.SubnetSelection(),
            instance_type="trn2.48xlarge",
            min_size=0,
            desired_size=1,
            max_size=1,
            root_volume_gib=500,
            root_volume_iops=6000,
            root_volume_throughput_mibps=500,
            capacity_mode="reservation",
            capacity_reservation_id=RESERVATION,
        )
    )
    rendered = stack.resolve(ec2.CfnLaunchTemplate(stack, "Lt", launch_template_data=data).launch_template_data)
    assert rendered["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": RESERVATION}}
    assert "instanceMarketOptions" not in rendered
    assert capacity_type("reservation").name == "ON_DEMAND"


def test_upstream_still_rejects_trn2_with_the_neuron_ami_type():
    """Pins why the instance type lives in the launch template. If this starts failing, aws_eks_v2
    learned that trn2 is an accelerated type: the instance type can move back to the node group."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_eks_v2 as eks

    stack = Stack(App(), "Probe")
    cluster = eks.Cluster(
        stack, "C", version=eks.KubernetesVersion.V1_35, default_capacity_type=eks.DefaultCapacityType.NODEGROUP, default_capacity=0
    )
    with pytest.raises(RuntimeError, match="AmiTypeDoesNotMatchInstanceArchitecture"):
        cluster.add_nodegroup_capacity(
            "Trn2", instance_types=[ec2.InstanceType("trn2.48xlarge")], ami_type=eks.NodegroupAmiType.AL2023_X86_64_NEURON
        )
    # ...and without an AMI type it silently picks a standard AMI with no Neuron driver: AL2 in a bare
    # app, AL2023 standard under the project's cdk.json flag @aws-cdk/aws-eks:defaultToAL2023.
    fallback = cluster.add_nodegroup_capacity("Trn2Default", instance_types=[ec2.InstanceType("trn2.48xlarge")])
    assert stack.resolve(fallback.node.default_child.ami_type) == "AL2_x86_64"
    flagged = Stack(App(context={"@aws-cdk/aws-eks:defaultToAL2023": True}), "Flagged")
    cluster = eks.Cluster(
        flagged, "C", version=eks.KubernetesVersion.V1_35, default_capacity_type=eks.DefaultCapacityType.NODEGROUP, default_capacity=0
    )
    fallback = cluster.add_nodegroup_capacity("Trn2Default", instance_types=[ec2.InstanceType("trn2.48xlarge")])
    assert flagged.resolve(fallback.node.default_child.ami_type) == "AL2023_x86_64_STANDARD"
