#!/usr/bin/env python3
"""The yardstick for scripts/bench_synth.py: a minimal one-cluster aws_eks_v2 app (Trn2 node group,
one Helm chart, one add-on, one cdk8s chart, one Lambda), no cdk-nag. Not part of the product."""

from __future__ import annotations

import sys

import cdk8s
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_lambda as lambda_
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer


def main(outdir: str) -> None:
    app = App(outdir=outdir)
    stack = Stack(app, "Minimal", env=Environment(account="123456789012", region="us-east-2"))
    cluster = eks.Cluster(
        stack,
        "Cluster",
        version=eks.KubernetesVersion.V1_35,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")),
    )
    template = ec2.CfnLaunchTemplate(stack, "Lt", launch_template_data={"instanceType": "trn2.48xlarge"})
    group = cluster.add_nodegroup_capacity("Trn2", launch_template_spec=eks.LaunchTemplateSpec(id=template.ref))
    group.node.default_child.add_property_override("AmiType", "AL2023_x86_64_NEURON")
    cluster.add_helm_chart(
        "Neuron", chart="neuron-helm-chart", repository="oci://public.ecr.aws/neuron/neuron-helm-chart", version="1.10.0"
    )
    eks.Addon(stack, "Agent", cluster=cluster, addon_name="eks-pod-identity-agent")
    chart = cdk8s.Chart(cdk8s.App(), "Hello")
    cdk8s.ApiObject(chart, "Cm", api_version="v1", kind="ConfigMap", metadata={"name": "hello"})
    cluster.add_cdk8s_chart("Hello", chart)
    lambda_.Function(
        stack,
        "Fn",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(e, c): return e"),
    )
    app.synth()


if __name__ == "__main__":
    main(sys.argv[1])
