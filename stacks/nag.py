"""Acknowledged findings of cdk-nag's AwsSolutions pack and CloudFormation's synth-time validation.

Each acknowledgment sits on the narrowest construct it applies to and says why the finding does
not apply; anything not listed here fails synth. cdk-nag's EKS rules only inspect the legacy
aws_eks classes, so cluster logging and endpoint access are asserted in
tests/test_network_and_cluster.py.
"""

from __future__ import annotations

import json

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import Construct

MANAGED = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"
ECR_PUBLIC_CONDITIONAL = (
    'AwsSolutions-IAM4[Policy::{"Fn::If":["EksClusterKubectlProviderHandlerHasEcrPublicC426D1A5",'
    '{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},'
    '{"Ref":"AWS::NoValue"}]}]'
)

# (construct path under the platform stack, finding id, reason)
PLATFORM_ACKNOWLEDGMENTS: tuple[tuple[str, str, str], ...] = (
    ("Eks/Cluster/Role", MANAGED.format("AmazonEKSClusterPolicy"), "EKS requires this AWS-managed policy on the cluster service role."),
    *(
        (
            f"Eks/Cluster/KubectlProvider/{fn}",
            MANAGED.format(f"service-role/{policy}"),
            "aws-cdk-lib's kubectl provider Lambda: CloudWatch Logs and VPC ENI permissions it needs to run in the cluster VPC.",
        )
        for fn in ("Handler", "Provider/framework-onEvent")
        for policy in ("AWSLambdaBasicExecutionRole", "AWSLambdaVPCAccessExecutionRole")
    ),
    (
        "Eks/Cluster/KubectlProvider/Handler",
        MANAGED.format("AmazonEC2ContainerRegistryReadOnly"),
        "The kubectl handler pulls Helm charts from OCI registries (read-only).",
    ),
    ("Eks/Cluster/KubectlProvider/Handler", ECR_PUBLIC_CONDITIONAL, "The Neuron Helm chart is pulled from public.ecr.aws (read-only)."),
    (
        "Eks/Cluster/KubectlProvider/Handler",
        "AwsSolutions-L1",
        "Runtime is set by aws-cdk-lib's kubectl provider and moves with the pinned aws-cdk-lib version.",
    ),
    *(
        (
            f"Eks/Cluster/Nodegroup{group}",
            MANAGED.format(policy),
            "EKS managed node groups require this AWS-managed policy on the node role.",
        )
        for group in ("SystemNodes", "NeuronNodes")
        for policy in ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly")
    ),
    (
        "ContainerInsights/AgentRole",
        MANAGED.format("CloudWatchAgentServerPolicy"),
        "AWS-documented policy of the CloudWatch agent (metric/log writes, EC2/EBS describes); "
        "Pod Identity binds it to one service account.",
    ),
    (
        "Network/Vpc",
        "CloudFormation-Validate::W3010",
        "AZs are deliberate: trn2 capacity and reservations exist only in specific AZs, so they are configured, not looked up.",
    ),
)


def _at(stack: Stack, path: str) -> Construct:
    construct: Construct = stack
    for part in path.split("/"):
        construct = construct.node.find_child(part)
    return construct


def wildcard_finding(scope: Construct, resource: str, suffix: str) -> str:
    """cdk-nag's id for an IAM5 finding on ``resource + suffix`` (e.g. a bucket ARN and "/models/*"),
    rendered as cdk-nag renders it: ``<LogicalId.Attr>`` for a GetAtt, an Fn::Join's parts joined
    (each rendered the same way: an imported bucket's ARN ``arn:aws:s3:::`` + its name), compact
    JSON for any other intrinsic."""
    return f"AwsSolutions-IAM5[Resource::{_rendered(Stack.of(scope).resolve(resource))}{suffix}]"


def _rendered(value: object) -> str:
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_rendered(part) for part in parts)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def acknowledge(scope: Construct, finding: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


def acknowledge_findings(platform: Stack) -> None:
    for path, finding, reason in PLATFORM_ACKNOWLEDGMENTS:
        acknowledge(_at(platform, path), finding, reason)
    handler = _at(platform, "Eks/Cluster/KubectlProvider/Handler")
    acknowledge(
        _at(platform, "Eks/Cluster/KubectlProvider/Provider/framework-onEvent"),
        wildcard_finding(platform, handler.function_arn, ":*"),  # type: ignore[attr-defined]
        "The provider framework may invoke only the kubectl handler's versions and aliases (<handler arn>:*).",
    )
