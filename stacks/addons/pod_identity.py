"""IAM roles for EKS Pod Identity: trusted only by the Pod Identity service in this account."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


def pod_identity_role(scope: Construct, construct_id: str, *, description: str) -> iam.Role:
    """A role that EKS Pod Identity may assume (with session tags) on behalf of this account only."""
    account = Stack.of(scope).account
    principal = iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL).with_conditions({"StringEquals": {"aws:SourceAccount": account}})
    return iam.Role(scope, construct_id, assumed_by=iam.SessionTagsPrincipal(principal), description=description)


def pod_identity_association(role: iam.IRole, service_account: str) -> eks.CfnAddon.PodIdentityAssociationProperty:
    """Binds ``role`` to the add-on's service account (EKS knows the add-on's namespace)."""
    return eks.CfnAddon.PodIdentityAssociationProperty(role_arn=role.role_arn, service_account=service_account)
