"""EKS Pod Identity: roles bound to one service account, their associations, the code objects their
pods may read, and add-ons that use them. An association waits for the Pod Identity agent add-on (a
pod started before the agent gets no credentials); a code read names the objects themselves
(``Asset.grant_read`` would add List* and GetBucket* on the whole assets bucket)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


def pod_identity_role(
    scope: Construct, construct_id: str, *, description: str, cluster_name: str, namespace: str, service_account: str
) -> iam.Role:
    """A role only EKS Pod Identity may assume, and only for one service account of one cluster.

    The conditions use the session tags Pod Identity adds to its AssumeRole request: eks-cluster-arn,
    eks-cluster-name, kubernetes-namespace, kubernetes-service-account, kubernetes-pod-name,
    kubernetes-pod-uid (EKS user guide, pod-id-abac.adoc "EKS Pod Identity session tags"; trust
    policy with sts:TagSession: pod-id-role.adoc). A trust policy sees them as request tags,
    ``aws:RequestTag/<key>``; ``aws:PrincipalTag/<key>`` is for the session's own policies
    afterwards. The cluster is matched by ARN, not name: a same-named cluster in another region or
    account (or a re-created one elsewhere) has another ARN. The ARN is built from the name, so
    roles in the data stack, created before the cluster, can use it too.
    """
    cluster_arn = Stack.of(scope).format_arn(
        service="eks", resource="cluster", resource_name=cluster_name, arn_format=ArnFormat.SLASH_RESOURCE_NAME
    )
    principal = iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL).with_conditions(
        {
            "StringEquals": {
                "aws:RequestTag/eks-cluster-arn": cluster_arn,
                "aws:RequestTag/kubernetes-namespace": namespace,
                "aws:RequestTag/kubernetes-service-account": service_account,
            }
        }
    )
    return iam.Role(scope, construct_id, assumed_by=iam.SessionTagsPrincipal(principal), description=description)


def pod_identity_addon(
    scope: Construct,
    *,
    cluster: eks.Cluster,
    addon_name: str,
    version: str,
    role: iam.IRole,
    service_account: str,
    configuration: dict | None = None,
    depends_on: Sequence[IDependable] = (),
) -> eks.CfnAddon:
    """An EKS add-on whose service account gets ``role`` through Pod Identity.

    The L1 is used because the L2 ``eks.Addon`` has no Pod Identity option. The add-on depends on
    the cluster's Pod Identity agent, without which its pods would start with no credentials.
    """
    addon = eks.CfnAddon(
        scope,
        "Addon",
        addon_name=addon_name,
        cluster_name=cluster.cluster_name,
        addon_version=version or None,
        resolve_conflicts="OVERWRITE",
        configuration_values=json.dumps(configuration, sort_keys=True) if configuration else None,
        pod_identity_associations=[eks.CfnAddon.PodIdentityAssociationProperty(role_arn=role.role_arn, service_account=service_account)],
    )
    addon.node.add_dependency(cluster.eks_pod_identity_agent, *depends_on)
    return addon


def associate(
    scope: Construct, construct_id: str, cluster: eks.Cluster, namespace: str, service_account: str, role: iam.IRole
) -> eks.CfnPodIdentityAssociation:
    association = eks.CfnPodIdentityAssociation(
        scope,
        construct_id,
        cluster_name=cluster.cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=role.role_arn,
    )
    association.node.add_dependency(cluster.eks_pod_identity_agent)
    return association


def code_read(scope: Construct, construct_id: str, role: iam.IRole, objects: Sequence[str]) -> iam.Policy:
    """``s3:GetObject`` on exactly ``objects`` (ARNs), attached to ``role``."""
    statement = iam.PolicyStatement(actions=["s3:GetObject"], resources=list(objects))
    return iam.Policy(scope, construct_id, roles=[role], statements=[statement])
