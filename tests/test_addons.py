"""Cluster add-ons: Neuron Helm chart, Container Insights, Mountpoint for S3 CSI; each with its own
props, and its dependencies declared."""

from __future__ import annotations

import json

import pytest

from config import ConfigError, load_config
from config.model import AddonSettings
from templates import all_dependencies, direct_dependencies, only, props, resources

# The stacks' pure functions are imported inside the tests that use them: their modules import
# aws_cdk (2.6 s of jsii start-up and a node process), which at module level every xdist worker
# would pay while collecting (issue 24).


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
    from stacks.addons.neuron_helm import chart_values

    values = chart_values(("trn1.32xlarge",), scheduler=False)
    assert values["neuronInstances"] == ["trn1.32xlarge"]
    assert values["scheduler"] == {"enabled": False, "customScheduler": {"enabled": False}}
    # The chart's default tolerations already cover the Neuron taint; overriding would drop the rest.
    assert "tolerations" not in values["devicePlugin"]


def test_neuron_chart_waits_for_both_node_groups(platform):
    lid, _ = only(platform, "Custom::AWSCDK-EKS-HelmChart")
    assert _node_groups(platform) <= all_dependencies(platform, lid)


def _namespace_manifests(template) -> dict[str, str]:
    """Namespace name -> logical id of the kubectl manifest that creates it (plain JSON manifests)."""
    found = {}
    for lid, resource in resources(template, "Custom::AWSCDK-EKS-KubernetesResource").items():
        manifest = props(resource)["Manifest"]
        if isinstance(manifest, str):
            for obj in json.loads(manifest):
                if obj["kind"] == "Namespace":
                    found[obj["metadata"]["name"]] = lid
    return found


@pytest.mark.parametrize("fixture", ["platform", "variant_platform"])
def test_every_namespace_the_neuron_chart_renders_into_exists_before_it(fixture, request):
    """Chart 1.10.0 renders the node problem detector into neuron-healthcheck-system and creates no
    Namespace; CDK creates only the release namespace. The set is derived from the values passed."""
    from stacks.addons.neuron_helm import rendered_namespaces

    template = request.getfixturevalue(fixture)
    lid, chart = only(template, "Custom::AWSCDK-EKS-HelmChart")
    release = props(chart)["Namespace"]
    needed = rendered_namespaces(json.loads(props(chart)["Values"]), release) - {release}
    assert "neuron-healthcheck-system" in needed
    created = _namespace_manifests(template)
    assert needed <= set(created)
    # Applied before the chart, so deleted after it on destroy.
    assert {created[name] for name in needed} <= direct_dependencies(template, lid)
    for name in needed:
        assert _node_groups(template) <= all_dependencies(template, created[name])


def test_chart_namespaces_follow_the_values():
    from stacks.addons.neuron_helm import chart_values, rendered_namespaces

    values = chart_values(("trn2.48xlarge",), scheduler=True)
    assert rendered_namespaces(values, "kube-system") == {"kube-system", "neuron-healthcheck-system"}
    assert rendered_namespaces({**values, "npd": {"enabled": False}}, "kube-system") == {"kube-system"}
    moved = {**values, "npd": {"enabled": True, "namespaceOverride": "npd"}}
    assert rendered_namespaces(moved, "kube-system") == {"kube-system", "npd"}
    # An empty override falls back to the release namespace (the chart's `default .Release.Namespace`).
    assert rendered_namespaces({**values, "npd": {"namespaceOverride": ""}}, "neuron") == {"kube-system", "neuron"}
    # The custom scheduler renders only with the scheduler extension on.
    off = {"devicePlugin": {"enabled": False}, "npd": {"enabled": False}, "scheduler": {"customScheduler": {"namespaceOverride": "x"}}}
    assert rendered_namespaces(off, "kube-system") == set()


def test_node_problem_detector_stays_in_monitor_mode():
    from stacks.addons.neuron_helm import chart_values

    assert chart_values(("trn2.48xlarge",), scheduler=True)["npd"] == {"enabled": True, "nodeRecovery": {"enabled": False}}


# --- Container Insights -------------------------------------------------------------------------


def test_container_insights_addon_has_neuron_metrics_and_pod_identity(platform):
    from stacks.addons.container_insights import addon_configuration

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
    assert p["AddonVersion"] == "v5.2.3-eksbuild.1"


def test_container_insights_log_groups_exist_before_the_agent(platform):
    from stacks.addons.container_insights import log_group_names

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
    # model-cache: the model-cache Job's role (the code object, and the Hugging Face token when one is set).
    assert set(trusts) == {"cloudwatch-agent", "model-cache", "s3-csi-driver-sa", "specbench"}
    cluster_arn = "arn:aws:eks:us-east-2:123456789012:cluster/"
    for statement, tags in trusts.values():
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
        # Scoped by cluster ARN (region and account included), not by a name any cluster can have.
        assert set(tags) == {f"aws:RequestTag/{key}" for key in ("eks-cluster-arn", "kubernetes-namespace", "kubernetes-service-account")}
        assert tags["aws:RequestTag/eks-cluster-arn"] in (
            cluster_arn + "specdecode-trn2",
            {"Fn::Join": ["", [cluster_arn, {"Ref": only(platform, "AWS::EKS::Cluster")[0]}]]},
        )
    assert trusts["cloudwatch-agent"][1]["aws:RequestTag/kubernetes-namespace"] == "amazon-cloudwatch"
    assert trusts["s3-csi-driver-sa"][1]["aws:RequestTag/kubernetes-namespace"] == "kube-system"
    assert trusts["specbench"][1]["aws:RequestTag/kubernetes-namespace"] == "specdecode"
    assert trusts["model-cache"][1]["aws:RequestTag/kubernetes-namespace"] == "specdecode"


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
    assert props(addon)["AddonVersion"] == "v2.7.0-eksbuild.1"  # the v2 line: the one taking Pod Identity


# --- VPC CNI (network policy enforcement) --------------------------------------------------------


def test_vpc_cni_addon_enforces_network_policies_and_comes_before_the_nodes(platform):
    lid, addon = only(platform, "AWS::EKS::Addon", lambda r: props(r)["AddonName"] == "vpc-cni")
    p = props(addon)
    # Key and string value as the EKS user guide gives them (cni-network-policy-configure).
    assert json.loads(p["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    assert p["AddonVersion"] == "v1.21.1-eksbuild.7"
    assert p["ResolveConflicts"] == "OVERWRITE"  # takes over the self-managed aws-node EKS installed
    assert p["PreserveOnDelete"] is True  # destroy never strips pod networking from draining nodes
    for group in _node_groups(platform):
        assert lid in direct_dependencies(platform, group)


# --- Add-on versions -----------------------------------------------------------------------------


def test_addon_versions_are_pinned_to_the_cited_defaults(platform):
    from stacks.addons.versions import SOURCES

    defaults = AddonSettings()
    assert {
        "amazon-cloudwatch-observability": defaults.cloudwatch_observability_version,
        "aws-mountpoint-s3-csi-driver": defaults.mountpoint_s3_csi_version,
        "vpc-cni": defaults.vpc_cni_version,
    } == SOURCES
    pinned = {props(r)["AddonName"]: props(r).get("AddonVersion") for r in resources(platform, "AWS::EKS::Addon").values()}
    assert {name: pinned[name] for name in SOURCES} == SOURCES


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("addons.mountpoint_s3_csi_version", "v1.15.0-eksbuild.1", "is too old (only v2 accepts Pod Identity)"),
        ("addons.mountpoint_s3_csi_version", "", "is not an EKS add-on version"),
        ("addons.vpc_cni_version", "v1.15.0-eksbuild.1", "is too old (the egress policy's ipBlock.except needs v1.15.1+)"),
        ("addons.vpc_cni_version", "1.21.1", "is not an EKS add-on version"),
        ("addons.cloudwatch_observability_version", "v3.0.0-eksbuild.1", "is too old (Pod Identity needs v3.1+)"),
        ("addons.cloudwatch_observability_version", "latest", "is not an EKS add-on version"),
    ],
)
def test_addon_versions_are_validated(key, value, message):
    with pytest.raises(ConfigError) as err:
        load_config({key: value}, {})
    (problem,) = [str(p) for p in err.value.problems]
    assert problem.startswith(key) and message in problem


def test_addon_versions_accept_newer_builds():
    config = load_config({"addons.vpc_cni_version": "v1.15.1-eksbuild.3", "addons.mountpoint_s3_csi_version": "v2.0.0-eksbuild.1"}, {})
    assert (config.addons.vpc_cni_version, config.addons.mountpoint_s3_csi_version) == ("v1.15.1-eksbuild.3", "v2.0.0-eksbuild.1")
