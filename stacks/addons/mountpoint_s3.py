"""Mountpoint for Amazon S3 CSI driver (EKS add-on), its driver bound through Pod Identity to the
data stack's model-cache role (read/write on models/ and neuron-artifacts/ only).

The serving pods mount model weights and compiled Neuron artifacts from the bucket through it, so
a restarted pod neither re-downloads the weights nor recompiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from config import layout

from .pod_identity import pod_identity_association

ADDON_NAME = "aws-mountpoint-s3-csi-driver"


@dataclass(frozen=True)
class MountpointS3Props:
    cluster: eks.Cluster
    role: iam.IRole
    version: str = ""
    depends_on: Sequence[IDependable] = field(default_factory=tuple)


class MountpointS3AddOn(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: MountpointS3Props) -> None:
        super().__init__(scope, construct_id)
        self.addon = eks.CfnAddon(
            self,
            "Addon",
            addon_name=ADDON_NAME,
            cluster_name=props.cluster.cluster_name,
            addon_version=props.version or None,
            resolve_conflicts="OVERWRITE",
            pod_identity_associations=[pod_identity_association(props.role, layout.MOUNTPOINT_SERVICE_ACCOUNT)],
        )
        self.addon.node.add_dependency(props.cluster.eks_pod_identity_agent, *props.depends_on)
