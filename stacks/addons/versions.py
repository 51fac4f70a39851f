"""Where the default EKS add-on versions (config/model.py AddonSettings) come from.

AWS's own version tables in the EKS user guide stop at Kubernetes 1.32 in the copies we could read,
so each default is a version seen ACTIVE on an EKS 1.35 cluster in a public deployment. They are
starting points: list what your account offers for your cluster version with
``aws eks describe-addon-versions --addon-name NAME --kubernetes-version 1.35`` (README) and pin that.
"""

SOURCES = {
    # A public EKS 1.35 conntrack benchmark's add-on table ("Add-on 구성 (EKS 1.35)"): ACTIVE with
    # vpc-cni v1.21.1-eksbuild.5 and kube-proxy v1.35.2-eksbuild.4. v5 is past v3.1, the first version
    # that takes Pod Identity (CloudWatch user guide, Container-Insights-setup-EKS-addon.html).
    "amazon-cloudwatch-observability": "v5.2.3-eksbuild.1",
    # aws-samples/comfyui-on-eks docs/mirador-security-findings-status.md (2026-08-11): "EKS 1.35 ...
    # aws-mountpoint-s3-csi-driver v2.7.0-eksbuild.1 ... Latest available (1.35)". v2 is the line
    # that accepts Pod Identity associations (awslabs/mountpoint-s3-csi-driver issue 215, PR 578).
    "aws-mountpoint-s3-csi-driver": "v2.7.0-eksbuild.1",
    # A public Terraform EKS module's example on 1.35 (kube-proxy v1.35.3-eksbuild.2) runs exactly
    # this version with configuration {"enableNetworkPolicy": "true"}; the egress policy's ipBlock.except needs v1.15.1+
    # (aws/aws-network-policy-agent issue 78, fixed by PR 58 in agent v1.0.4, shipped with VPC CNI v1.15.1; the
    # EKS user guide's cni-network-policy-configure page gives 1.14 as the minimum for network policies at all).
    "vpc-cni": "v1.21.1-eksbuild.7",
}
