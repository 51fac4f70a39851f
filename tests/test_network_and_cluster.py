"""Network and cluster: VPC over the configured AZs, flow logs, control plane, access, system nodes.

cdk-nag's EKS rules only inspect the legacy aws_eks classes and never fire on aws_eks_v2, so
control-plane logging and endpoint access are asserted here instead.
"""

from __future__ import annotations

import json

from conftest import ADMIN_ROLE, ADMIN_USER
from templates import only, props, resources


def test_vpc_spans_the_configured_azs_with_private_node_subnets(platform):
    _, vpc = only(platform, "AWS::EC2::VPC")
    assert props(vpc)["CidrBlock"] == "10.40.0.0/16"
    subnets = resources(platform, "AWS::EC2::Subnet").values()
    by_kind = {}
    for subnet in subnets:
        public = props(subnet)["MapPublicIpOnLaunch"]
        by_kind.setdefault(public, []).append((props(subnet)["AvailabilityZone"], props(subnet)["CidrBlock"]))
    assert sorted(az for az, _ in by_kind[False]) == ["us-east-2a", "us-east-2b", "us-east-2c"]
    assert sorted(az for az, _ in by_kind[True]) == ["us-east-2a", "us-east-2b", "us-east-2c"]
    assert all(cidr.endswith("/18") for _, cidr in by_kind[False])
    assert len(resources(platform, "AWS::EC2::NatGateway")) == 1


def test_vpc_flow_logs_go_to_a_log_group_with_retention(platform):
    _, flow = only(platform, "AWS::EC2::FlowLog")
    assert props(flow)["TrafficType"] == "ALL"
    group = platform["Resources"][props(flow)["LogGroupName"]["Ref"]]
    assert props(group)["RetentionInDays"] == 30


def test_cluster_version_and_every_control_plane_log_type(platform):
    _, cluster = only(platform, "AWS::EKS::Cluster")
    p = props(cluster)
    assert p["Name"] == "specdecode-trn2" and p["Version"] == "1.35"
    logged = {entry["Type"] for entry in p["Logging"]["ClusterLogging"]["EnabledTypes"]}
    assert logged == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert p["AccessConfig"]["AuthenticationMode"] == "API"  # access entries, no aws-auth ConfigMap
    assert p["ComputeConfig"]["Enabled"] is False  # managed node groups, not Auto Mode


def test_control_plane_log_group_is_created_first_with_retention(platform):
    lid, group = only(platform, "AWS::Logs::LogGroup", lambda r: props(r).get("LogGroupName") == "/aws/eks/specdecode-trn2/cluster")
    assert props(group)["RetentionInDays"] == 30
    cluster_id, cluster = only(platform, "AWS::EKS::Cluster")
    assert lid in cluster["DependsOn"]


def test_endpoint_public_side_is_limited_to_the_configured_cidrs(platform):
    _, cluster = only(platform, "AWS::EKS::Cluster")
    vpc_config = props(cluster)["ResourcesVpcConfig"]
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["EndpointPublicAccess"] is True
    assert vpc_config["PublicAccessCidrs"] == ["0.0.0.0/0"]


def test_private_endpoint_variant_has_no_public_access(variant_platform):
    _, cluster = only(variant_platform, "AWS::EKS::Cluster")
    vpc_config = props(cluster)["ResourcesVpcConfig"]
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["EndpointPublicAccess"] is False
    assert "PublicAccessCidrs" not in vpc_config


def _admin_entries(template):
    return {
        props(r)["PrincipalArn"]: r
        for r in resources(template, "AWS::EKS::AccessEntry").values()
        if isinstance(props(r)["PrincipalArn"], str)
    }


def test_no_human_admins_unless_configured(platform):
    assert _admin_entries(platform) == {}  # only the kubectl provider's own entry exists


def test_configured_admins_get_cluster_admin_access_entries(variant_platform):
    entries = _admin_entries(variant_platform)
    assert set(entries) == {ADMIN_ROLE, ADMIN_USER}
    for entry in entries.values():
        (policy,) = props(entry)["AccessPolicies"]
        assert policy["AccessScope"] == {"Type": "cluster"}
        assert policy["PolicyArn"]["Fn::Join"][1][-1].endswith("cluster-access-policy/AmazonEKSClusterAdminPolicy")


def test_system_node_group(platform):
    _, group = only(platform, "AWS::EKS::Nodegroup", lambda r: props(r)["Labels"] == {"specdecode/pool": "system"})
    p = props(group)
    assert p["AmiType"] == "AL2023_x86_64_STANDARD"  # the typed property, rendered as CloudFormation spells it
    assert p["InstanceTypes"] == ["m7i.xlarge"]
    assert p["ScalingConfig"] == {"DesiredSize": 2, "MaxSize": 3, "MinSize": 2}
    assert "DiskSize" not in p  # in the launch template (EKS rejects both)
    assert "Taints" not in p
    assert len(p["Subnets"]) == 3


def test_system_nodes_require_imdsv2_and_an_encrypted_root_volume(platform):
    _, group = only(platform, "AWS::EKS::Nodegroup", lambda r: props(r)["Labels"] == {"specdecode/pool": "system"})
    template_id = props(group)["LaunchTemplate"]["Id"]["Ref"]
    assert props(group)["LaunchTemplate"]["Version"] == {"Fn::GetAtt": [template_id, "LatestVersionNumber"]}
    data = props(platform["Resources"][template_id])["LaunchTemplateData"]
    assert data == {
        "BlockDeviceMappings": [
            {
                "DeviceName": "/dev/xvda",
                "Ebs": {"DeleteOnTermination": True, "Encrypted": True, "VolumeSize": 50, "VolumeType": "gp3"},
            }
        ],
        # Hop limit 2: the Mountpoint CSI node plugin runs in the pod network on every node (stacks/node_metadata.py).
        "MetadataOptions": {"HttpPutResponseHopLimit": 2, "HttpTokens": "required"},
    }


def _warnings(assembly) -> list[str]:
    metadata = json.loads(assembly.file("SpecDecodePlatform.metadata.json").read_text())
    return [entry["data"] for entries in metadata.values() for entry in entries if entry["type"] == "aws:cdk:warning"]


def test_synth_warns_when_nobody_could_use_kubectl(cli_assembly, variant_assembly):
    assert any("cluster.admin_principal_arns is empty" in w for w in _warnings(cli_assembly))
    assert not any("cluster.admin_principal_arns" in w for w in _warnings(variant_assembly))
