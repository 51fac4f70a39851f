"""Cluster add-ons: Neuron Helm chart, Container Insights, Mountpoint for S3 CSI; each with its own
props, and its dependencies declared."""

from __future__ import annotations

import json

from stacks.addons.container_insights import addon_configuration, log_group_names
from stacks.addons.neuron_helm import chart_values
from templates import all_dependencies, only, props, resources


def _node_groups(template):
    return set(resources(template, "AWS::EKS::Nodegroup"))


def _pod_identity_agent(template):
    return only(template, "AWS::EKS::Addon", lambda r: props(r)["AddonName"] == "eks-pod-identity-agent")[0]


# --- Neuron Helm chart --------------------------------------------------------------------------


def test_neuron_chart_is_pinned_from_its_oci_registry(platform):
    _, chart = only(platform, "Custom::AWSCDK-EKS-HelmChart")
    p = props(chart)
    assert p["Repository"] == "oci://public.ecr.aws/neuron/neuron-helm-chart"
    assert p["Chart"] == "neuron-helm-chart"
    assert p["Version"] == "1.10.0"
    assert p["Namespace"] == "kube-system"
    values = json.loads(p["Values"])
    assert values["neuronInstances"] == ["trn2.48xlarge"]
    assert values["devicePlugin"] == {"enabled": True}
    assert values["scheduler"] == {
        "enabled": True,
        "customScheduler": {"enabled": True, "image": {"repository": "registry.k8s.io/kube-scheduler", "tag": "v1.35.0"}},
    }


def test_neuron_chart_values_follow_settings():
    values = chart_values(("trn1.32xlarge",), scheduler=False)
    assert values["neuronInstances"] == ["trn1.32xlarge"]
    assert values["scheduler"] == {"enabled": False, "customScheduler": {"enabled": False}}
    # The chart's default tolerations already cover the Neuron taint; overriding would drop the rest.
    assert "tolerations" not in values["devicePlugin"]


def test_neuron_chart_waits_for_both_node_groups(platform):
    lid, _ = only(platform, "Custom::AWSCDK-EKS-HelmChart")
    assert _node_groups(platform) <= all_dependencies(platform, lid)


# --- Container Insights -------------------------------------------------------------------------


def test_container_insights_addon_has_neuron_metrics_and_pod_identity(platform):
    lid, addon = only(platform, "AWS::EKS::Addon", lambda r: props(r)["AddonName"] == "amazon-cloudwatch-observability")
    p = props(addon)
    config = json.loads(p["ConfigurationValues"])
    kubernetes = config["agent"]["config"]["logs"]["metrics_collected"]["kubernetes"]
    assert kubernetes == {"enhanced_container_insights": True, "accelerated_compute_metrics": True}
    assert config == addon_configuration()
    (association,) = p["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "cloudwatch-agent"
    role = platform["Resources"][association["RoleArn"]["Fn::GetAtt"][0]]
    assert [arn["Fn::Join"][1][-1] for arn in props(role)["ManagedPolicyArns"]] == [":iam::aws:policy/CloudWatchAgentServerPolicy"]
    deps = all_dependencies(platform, lid)
    assert _pod_identity_agent(platform) in deps and _node_groups(platform) <= deps
    assert "AddonVersion" not in p  # EKS default unless addons.cloudwatch_observability_version is set


def test_container_insights_log_groups_exist_before_the_agent(platform):
    lid, _ = only(platform, "AWS::EKS::Addon", lambda r: props(r)["AddonName"] == "amazon-cloudwatch-observability")
    deps = all_dependencies(platform, lid)
    groups = {
        props(r)["LogGroupName"]["Fn::Join"][1][-1]: (gid, r)
        for gid, r in resources(platform, "AWS::Logs::LogGroup").items()
        if "containerinsights" in json.dumps(props(r).get("LogGroupName", ""))
    }
    assert sorted(groups) == ["/application", "/dataplane", "/host", "/performance"]
    for gid, group in groups.values():
        assert gid in deps
        assert props(group)["RetentionInDays"] == 30
    assert log_group_names("c") == [f"/aws/containerinsights/c/{kind}" for kind in ("application", "dataplane", "host", "performance")]


def test_pod_identity_roles_trust_one_service_account_of_this_cluster(platform, data):
    trusts = {}
    for template in (platform, data):
        for role in resources(template, "AWS::IAM::Role").values():
            for statement in props(role)["AssumeRolePolicyDocument"]["Statement"]:
                if statement["Principal"].get("Service") == "pods.eks.amazonaws.com":
                    tags = statement["Condition"]["StringEquals"]
                    trusts[tags["aws:RequestTag/kubernetes-service-account"]] = (statement, tags)
    assert set(trusts) == {"cloudwatch-agent", "s3-csi-driver-sa", "specbench"}
    for statement, tags in trusts.values():
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
        assert tags["aws:RequestTag/eks-cluster-name"] in ("specdecode-trn2", {"Ref": only(platform, "AWS::EKS::Cluster")[0]})
    assert trusts["cloudwatch-agent"][1]["aws:RequestTag/kubernetes-namespace"] == "amazon-cloudwatch"
    assert trusts["s3-csi-driver-sa"][1]["aws:RequestTag/kubernetes-namespace"] == "kube-system"
    assert trusts["specbench"][1]["aws:RequestTag/kubernetes-namespace"] == "specdecode"


# --- Mountpoint for S3 --------------------------------------------------------------------------


def test_mountpoint_addon_binds_the_data_stacks_model_cache_role(platform, data):
    lid, addon = only(platform, "AWS::EKS::Addon", lambda r: props(r)["AddonName"] == "aws-mountpoint-s3-csi-driver")
    (association,) = props(addon)["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "s3-csi-driver-sa"
    reference = json.dumps(association["RoleArn"])
    role_id, _ = only(data, "AWS::IAM::Role", lambda r: "Mountpoint" in props(r).get("Description", ""))
    assert role_id in reference  # the role is the data stack's, passed across stacks
    deps = all_dependencies(platform, lid)
    assert _pod_identity_agent(platform) in deps and _node_groups(platform) <= deps
