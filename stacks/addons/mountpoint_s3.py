"""Mountpoint for Amazon S3 CSI driver (EKS add-on), its driver bound through Pod Identity to the
data stack's model-cache role (read/write on models/ and neuron-artifacts/ only).

The serving pods mount model weights and compiled Neuron artifacts from the bucket through it, so
a restarted pod neither re-downloads the weights nor recompiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from config import layout

from .pod_identity import pod_identity_addon

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
        self.addon = pod_identity_addon(
            self,
            cluster=props.cluster,
            addon_name=ADDON_NAME,
            version=props.version,
            role=props.role,
            service_account=layout.MOUNTPOINT_SERVICE_ACCOUNT,
            depends_on=props.depends_on,
        )
