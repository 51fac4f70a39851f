"""Instance metadata (IMDS) settings shared by both node groups' launch templates.

IMDSv2 only (session tokens required), hop limit 2 on both node groups. A container in the pod
network is one hop further from IMDS than the node, so hop limit 1 would cut off every agent that
reads IMDS without hostNetwork. What each node agent needs (from its chart or docs):
- Mountpoint for S3 CSI v2: its node plugin (DaemonSet s3-csi-node, on every Linux node, no
  hostNetwork: awslabs/mountpoint-s3-csi-driver charts/aws-mountpoint-s3-csi-driver/templates/node.yaml)
  and the Mountpoint pods it starts detect the region through IMDS, which "must be 2 or greater"
  (same repo, docs/CONFIGURATION.md, STS region troubleshooting; PR 269). This is the one agent
  that needs hop limit 2, on both groups since the node plugin runs everywhere.
- CloudWatch agent and Fluent Bit of Container Insights: `hostNetwork: true`
  (aws-observability/helm-charts charts/amazon-cloudwatch-observability/templates/linux/
  cloudwatch-agent-custom-resource.yaml, fluent-bit-daemonset.yaml): hop limit 1 would do.
- neuron-monitor (same chart, neuron-monitor-daemonset.yaml): pod network, privileged; its
  configured metrics are Neuron runtime and hardware counters, no instance metadata.
- EKS Pod Identity agent and the VPC CNI (aws-node): hostNetwork DaemonSets; hop limit 1 would do.
Workload pods never need IMDS (they use Pod Identity at 169.254.170.23): the app namespace's egress
NetworkPolicy denies 169.254.169.254 (charts/), which keeps the vLLM, model-cache and benchmark
pods from the node role while the agents above keep working.
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2

HOP_LIMIT = 2
ROOT_DEVICE = "/dev/xvda"  # AL2023 EKS AMIs boot from /dev/xvda


def metadata_options() -> ec2.CfnLaunchTemplate.MetadataOptionsProperty:
    return ec2.CfnLaunchTemplate.MetadataOptionsProperty(http_tokens="required", http_put_response_hop_limit=HOP_LIMIT)


def encrypted_root_volume(size_gib: int, iops: int | None = None, throughput_mibps: int | None = None):
    """The root EBS volume: gp3, encrypted (with the account's default EBS key), deleted with the node."""
    return ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
        device_name=ROOT_DEVICE,
        ebs=ec2.CfnLaunchTemplate.EbsProperty(
            volume_size=size_gib,
            volume_type="gp3",
            iops=iops,
            throughput=throughput_mibps,
            encrypted=True,
            delete_on_termination=True,
        ),
    )
