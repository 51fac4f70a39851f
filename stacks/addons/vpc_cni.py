"""Amazon VPC CNI as a managed EKS add-on, pinned, with its network policy agent switched on, so
the NetworkPolicies of the app namespace are enforced (without it they are accepted and ignored).

The configuration key and value are the ones the EKS user guide gives for the add-on
(awsdocs/amazon-eks-user-guide latest/ug/networking/cni-network-policy-configure.adoc, "Enable the
network policy parameter for the add-on": ``{"enableNetworkPolicy": "true"}``, the value a string).
The agent enforces with eBPF and needs the BPF file system, which every EKS-optimized AL2023 AMI
mounts (same page, step 3). The CNI keeps using the node role (AmazonEKS_CNI_Policy) from the host
network namespace, as the self-managed CNI EKS installed did.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IDependable

ADDON_NAME = "vpc-cni"


def addon_configuration() -> dict:
    return {"enableNetworkPolicy": "true"}


@dataclass(frozen=True)
class VpcCniProps:
    cluster: eks.Cluster
    version: str
    depends_on: Sequence[IDependable] = field(default_factory=tuple)


class VpcCniAddOn(Construct):
    """The node groups depend on this add-on (platform stack), so nodes join with the policy agent
    already running and no pod starts unenforced."""

    def __init__(self, scope: Construct, construct_id: str, props: VpcCniProps) -> None:
        super().__init__(scope, construct_id)
        self.addon = eks.CfnAddon(
            self,
            "Addon",
            addon_name=ADDON_NAME,
            cluster_name=props.cluster.cluster_name,
            addon_version=props.version,
            # EKS installed a self-managed aws-node DaemonSet with the cluster: take it over.
            resolve_conflicts="OVERWRITE",
            configuration_values=json.dumps(addon_configuration(), sort_keys=True),
            # Deleting the add-on must never remove pod networking from nodes that are still being
            # drained on `cdk destroy`: keep the software, drop only the EKS management.
            preserve_on_delete=True,
        )
        # The cluster name is a Ref, so the add-on already waits for the cluster itself.
        if props.depends_on:
            self.addon.node.add_dependency(*props.depends_on)
