"""Cluster add-ons, one construct per capability (cdk-eks-blueprints style).

Every add-on takes typed props, including ``depends_on``: what must exist before it is installed
(and, on ``cdk destroy``, what is removed only after it). Dependencies are declared, never implied
by construction order.
"""

from .container_insights import ContainerInsightsAddOn, ContainerInsightsProps
from .mountpoint_s3 import MountpointS3AddOn, MountpointS3Props
from .neuron_helm import NeuronHelmAddOn, NeuronHelmProps
from .vpc_cni import VpcCniAddOn, VpcCniProps

__all__ = [
    "ContainerInsightsAddOn",
    "ContainerInsightsProps",
    "MountpointS3AddOn",
    "MountpointS3Props",
    "NeuronHelmAddOn",
    "NeuronHelmProps",
    "VpcCniAddOn",
    "VpcCniProps",
]
