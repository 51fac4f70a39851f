"""IAM roles for EKS Pod Identity: trusted only by the Pod Identity service in this account."""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


def pod_identity_role(scope: Construct, construct_id: str, *, description: str) -> iam.Role:
    """A role that EKS Pod Identity may assume (with session tags) on behalf of this account only."""
    account = Stack.of(scope).account
    principal = iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL).with_conditions({"StringEquals": {"aws:SourceAccount": account}})
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
