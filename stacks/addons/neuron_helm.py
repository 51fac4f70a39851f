"""AWS Neuron Helm chart: the Neuron device plugin (advertises ``aws.amazon.com/neuron`` and
``aws.amazon.com/neuroncore``), the Neuron scheduler extension and the node problem detector.

aws_eks_v2 applies an old device-plugin manifest for inf/trn1 node groups only, never for trn2, so
the project installs the chart itself, pinned: the kubectl handler runs ``helm pull REPO --version V``.

The chart renders its parts into more than the release namespace, and creates none of them: the node
problem detector goes to ``neuron-healthcheck-system`` (``npd.namespaceOverride`` in its values.yaml;
chart 1.10.0's npd files, under templates/npd/, have no Namespace object and 1.10.0 has no switch that
creates one; Neuron's docs create it by hand). CDK's ``CreateNamespace`` covers only the release
namespace, so every other namespace is applied here as a manifest the chart depends on: created
before ``helm install``, deleted after ``helm uninstall``. (Chart sources at commit c8a2374 have an
``npd.namespace.create`` switch, but that commit is older than 1.10.0, not newer: it pins device
plugin 2.30.0.0 where 1.10.0 pins 2.32.0.0. Should a later published version add such a switch,
turn it on and drop the manifest here.)
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

# The chart's parts, from its values.yaml (aws-neuron/neuron-helm-charts charts/neuron-helm-chart):
# value path -> (enabled by default, default namespaceOverride). A part renders only when it and
# every part above it on the path is enabled (custom-scheduler.yaml: `if and .Values.scheduler.enabled
# .Values.scheduler.customScheduler.enabled`); an empty override means the release namespace
# (_helpers.tpl: `default .Release.Namespace .Values.<part>.namespaceOverride`).
CHART_PARTS: dict[tuple[str, ...], tuple[bool, str]] = {
    ("devicePlugin",): (True, "kube-system"),
    ("scheduler",): (False, "kube-system"),
    ("scheduler", "customScheduler"): (True, "kube-system"),
    ("npd",): (True, "neuron-healthcheck-system"),
}


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
        # The detector only reads the kernel log and sets a NeuronHealth node condition, through the
        # built-in system:node-problem-detector ClusterRole the chart binds. Its recovery mode would
        # call autoscaling:SetInstanceHealth / DescribeAutoScalingInstances, ec2:DescribeInstances and
        # cloudwatch:PutMetricData (Neuron docs, "Permissions for Neuron Node Problem Detector and
        # Recovery", an IRSA role): that replaces a Trn2 node on a hardware error, which would throw
        # away a Capacity Block instance, so it stays off (the chart's default, pinned here).
        "npd": {"enabled": True, "nodeRecovery": {"enabled": False}},
        "scheduler": {"enabled": scheduler, "customScheduler": custom},
    }


def _lookup(values: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        values = values.get(key) or {}
    return values


def rendered_namespaces(values: dict[str, Any], release_namespace: str) -> set[str]:
    """Every namespace the chart's enabled parts render into, for the values the project passes."""
    found = set()
    for path, (_, namespace_default) in CHART_PARTS.items():
        chain = [path[: i + 1] for i in range(len(path))]
        if all(_lookup(values, p).get("enabled", CHART_PARTS[p][0]) for p in chain):
            found.add(_lookup(values, path).get("namespaceOverride", namespace_default) or release_namespace)
    return found


def namespace_manifest(name: str) -> dict[str, Any]:
    # The detector runs privileged (its container reads /dev/kmsg; _helpers.tpl defaults its
    # securityContext to `privileged: true`): say so instead of relying on the cluster default.
    labels = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


class NeuronHelmAddOn(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: NeuronHelmProps) -> None:
        super().__init__(scope, construct_id)
        values = chart_values(props.instance_types, props.scheduler, props.scheduler_image)
        extra = sorted(rendered_namespaces(values, layout.NEURON_HELM_NAMESPACE) - {layout.NEURON_HELM_NAMESPACE})
        self.namespaces = [
            eks.KubernetesManifest(self, f"Namespace{index}", cluster=props.cluster, manifest=[namespace_manifest(name)])
            for index, name in enumerate(extra)
        ]
        for namespace in self.namespaces:
            namespace.node.add_dependency(*props.depends_on)
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=props.cluster,
            repository=REPOSITORY,
            chart=CHART,
            release=RELEASE,
            version=props.version,
            namespace=layout.NEURON_HELM_NAMESPACE,
            values=values,
            wait=True,
            timeout=Duration.minutes(10),
        )
        self.chart.node.add_dependency(*props.depends_on, *self.namespaces)
