"""AWS Neuron Helm chart: the Neuron device plugin (advertises ``aws.amazon.com/neuron`` and
``aws.amazon.com/neuroncore``), the Neuron scheduler extension and the node problem detector.

aws_eks_v2 applies an old device-plugin manifest for inf/trn1 node groups only, never for trn2, so
the project installs the chart itself, pinned: the kubectl handler runs ``helm pull REPO --version V``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IDependable

from config import layout

# Verified version: 1.10.0 (seen pulled from this registry with digest sha256:ed5d8f73b7a05d3a1edf17b2
# bfaf277ea995ad1c65b115fa8ba2c7b4dc649346); its neuronInstances list has trn2.48xlarge, 1.0.0's
# does not. The kubectl handler pins by version only: `helm pull REPO --version V`.
REPOSITORY = "oci://public.ecr.aws/neuron/neuron-helm-chart"
CHART = "neuron-helm-chart"
RELEASE = "neuron"


@dataclass(frozen=True)
class NeuronHelmProps:
    cluster: eks.Cluster
    version: str
    instance_types: tuple[str, ...]
    scheduler: bool = True
    # kube-scheduler image of the chart's second scheduler ("repository:tag"); empty = the chart's.
    scheduler_image: str = ""
    depends_on: Sequence[IDependable] = field(default_factory=tuple)


def chart_values(instance_types: Sequence[str], scheduler: bool, scheduler_image: str = "") -> dict[str, Any]:
    """Values for chart 1.10.0 (keys read from its values.yaml).

    ``neuronInstances`` is the node-affinity list of the device plugin and node problem detector:
    chart 1.0.0's list has no trn2, so it is set to the configured type rather than trusted. The
    chart's default device-plugin tolerations already cover the ``aws.amazon.com/neuron`` taint;
    setting them here would replace its other defaults. The scheduler extension runs as a
    separate scheduler (``customScheduler``) that only pods naming it use; the chart pins its image
    to kube-scheduler v1.31 whatever the cluster, so the image is set to match the cluster.
    """
    custom: dict[str, Any] = {"enabled": scheduler}
    if scheduler and scheduler_image:
        repository, tag = scheduler_image.rsplit(":", 1)
        custom["image"] = {"repository": repository, "tag": tag}
    return {
        "neuronInstances": list(instance_types),
        "devicePlugin": {"enabled": True},
        "npd": {"enabled": True},
        "scheduler": {"enabled": scheduler, "customScheduler": custom},
    }


class NeuronHelmAddOn(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: NeuronHelmProps) -> None:
        super().__init__(scope, construct_id)
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=props.cluster,
            repository=REPOSITORY,
            chart=CHART,
            release=RELEASE,
            version=props.version,
            namespace=layout.NEURON_HELM_NAMESPACE,
            values=chart_values(props.instance_types, props.scheduler, props.scheduler_image),
            wait=True,
            timeout=Duration.minutes(10),
        )
        self.chart.node.add_dependency(*props.depends_on)
