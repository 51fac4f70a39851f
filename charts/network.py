"""NetworkPolicies of the serving namespace: only the benchmark (and any pod that opts in with the
client label) reaches the vLLM pods, and no pod reaches the node's instance metadata (IMDS); the
staged sweep's controller, the one pod that calls the Kubernetes API, reaches only DNS, HTTPS and
the Pod Identity agent (``sweep_control_egress``).

Enforced by the VPC CNI's network policy agent once the ``vpc-cni`` add-on runs with
``enableNetworkPolicy`` (stacks/addons). What that agent does beyond the Kubernetes API, and this
file relies on:

- kubelet probes: the agent allows all traffic to and from the node's own IP, so the startup,
  readiness and liveness probes need no rule (aws/aws-network-policy-agent PR 65, "Ignore policy
  restrictions against Node IP", fixing issue 56 "Liveness Probes (from host kubelet) are
  incorrectly blocked"; the Kubernetes docs say the same of every implementation: "Pods cannot ...
  block access from their resident node").
- ``ipBlock.except``: honoured since agent v1.0.4 (VPC CNI v1.15.1; aws/aws-network-policy-agent
  issue 78, fixed by PR 58). The EKS user guide's page gives 1.14 as the minimum VPC CNI for network
  policies at all, which is too old for this one.
- Only pods with ``metadata.ownerReferences`` get policies ("Standalone Pods ... can't have network
  policies applied to them": EKS user guide, cni-network-policy.html "Considerations";
  aws/aws-network-policy-agent issue 327). Every pod here comes from a Deployment or a Job; a bare
  ``kubectl run`` pod in the namespace is not covered.
- ``kubectl port-forward`` is not network traffic of the pod: the container runtime enters the
  pod's network namespace and dials ``localhost:<port>`` there (containerd
  pkg/cri/server/sandbox_portforward_linux.go), so it never crosses the pod's host-side veth where
  the agent's eBPF programs sit (aws-network-policy-agent README). Port-forwarding is governed by
  RBAC (``pods/portforward``), not by these policies (charts/README.md, "Network policies").

The Mountpoint pods that serve the bucket volumes run in the ``mount-s3`` namespace
(awslabs/mountpoint-s3-csi-driver docs/UPGRADING_TO_V2.md), the Pod Identity agent on the host
network: neither is selected here.
"""

from __future__ import annotations

from typing import Any

from .objects import metadata

# Pods carrying this label may call the vLLM services: the benchmark Job's pods set it; a sweep or
# any other client opts in the same way.
CLIENT_LABEL = "specdecode/endpoint-client"
CLIENT_LABELS = {CLIENT_LABEL: "true"}
# The label every vLLM pod carries (charts.spec.instance_labels).
SERVING_POD_LABELS = {"app.kubernetes.io/name": "vllm"}
# The staged sweep's controller (charts/sweep_control.py): the one pod of the namespace that talks to
# the Kubernetes API, so its egress is its own policy's (``sweep_control_egress``), not the
# namespace-wide one's.
SWEEP_CONTROL = "specbench-sweep-control"
SWEEP_CONTROL_LABELS = {"app.kubernetes.io/name": SWEEP_CONTROL}
# The cluster DNS: CoreDNS's pods in kube-system carry k8s-app=kube-dns, as does the kube-dns Service's
# selector (an EKS policy allowing DNS this way: aws/aws-network-policy-agent issue 108). The control
# plane labels every namespace kubernetes.io/metadata.name=<name> (kubernetes.io/docs/concepts/
# services-networking/network-policies/, "Targeting a Namespace by its name").
CLUSTER_DNS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}

# EC2 instance metadata (IMDS), IPv4 and IPv6 (the IPv6 endpoint exists on Nitro instances when
# enabled): https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html
IMDS_CIDRS = ("169.254.169.254/32", "fd00:ec2::254/128")
# The EKS Pod Identity agent, which must stay reachable (it is how every pod here gets AWS
# credentials): 169.254.170.23 and [fd00:ec2::23], port 80 --
# https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html ("Considerations").
POD_IDENTITY_AGENT = ("169.254.170.23", "fd00:ec2::23")


def default_deny_ingress(namespace: str) -> dict[str, Any]:
    """Every pod of the namespace is isolated for ingress; the policies below open what is needed."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata("default-deny-ingress", namespace),
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def serving_from_clients(namespace: str, port: int) -> dict[str, Any]:
    """The vLLM pods accept their serving port from client pods of this namespace, nothing else.

    A peer with only ``podSelector`` selects pods of the policy's own namespace. The port is a
    number, not the container port's name, so it means the same to every implementation."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata("vllm-from-endpoint-clients", namespace),
        "spec": {
            "podSelector": {"matchLabels": dict(SERVING_POD_LABELS)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(CLIENT_LABELS)}}], "ports": [{"protocol": "TCP", "port": port}]}],
        },
    }


def egress_without_imds(namespace: str) -> dict[str, Any]:
    """Every pod may reach anything (DNS, the services, S3, Secrets Manager, the Hugging Face Hub,
    PyPI, the Pod Identity agent) except the node's instance metadata, where the node role's
    credentials are. The Neuron nodes keep IMDS hop limit 2 for the Mountpoint pods (in their own
    namespace); this closes it for the workloads, which get credentials from Pod Identity only.

    Every pod but the sweep controller's: policies add up (a connection one of them allows is
    allowed), so a narrower policy for that pod means leaving it out of this one."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata("egress-except-instance-metadata", namespace),
        "spec": {
            "podSelector": {"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "NotIn", "values": [SWEEP_CONTROL]}]},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [
                        # Pods of every namespace by label too, for implementations where pod
                        # addresses do not match an ipBlock (the Kubernetes API leaves that open).
                        {"namespaceSelector": {}},
                        {"ipBlock": {"cidr": "0.0.0.0/0", "except": [IMDS_CIDRS[0]]}},
                        {"ipBlock": {"cidr": "::/0", "except": [IMDS_CIDRS[1]]}},
                    ]
                }
            ],
        },
    }


def sweep_control_egress(namespace: str) -> dict[str, Any]:
    """The staged sweep controller's pods reach the cluster DNS, HTTPS and the Pod Identity agent,
    nothing else (no vLLM port, no instance metadata, no plain HTTP but the agent's).

    One of the namespace's policies whether or not a staged sweep is configured: the policy above
    leaves pods with the controller's label out, so one must select them whenever such a pod can
    exist (a pod that no egress policy selects may reach anything, instance metadata included).

    - DNS: to CoreDNS by label. The VPC CNI's agent filters on the pod's veth, before kube-proxy's
      DNAT, so it sees the kube-dns Service's ClusterIP; its controller adds the ClusterIPs of the
      Services whose selector matches a rule's pod selector for that reason
      (aws/amazon-network-policy-controller-k8s pkg/resolvers/endpoints.go,
      ``getMatchingServiceClusterIPs``).
    - HTTPS (TCP 443, any address but instance metadata): S3 (the results and the code object; its
      addresses are no CIDR a policy could name, and a NetworkPolicy has no host names), PyPI for
      the pinned install, and the Kubernetes API server. The API server has no pod to select: the
      ``kubernetes`` Service has no selector (its endpoints are the control plane's ENIs), so the
      workaround above does not reach it and no pod selector can name it (aws/aws-network-policy-agent
      issue 281); its ClusterIP is the first address of the service CIDR, which EKS picks from
      10.100.0.0/16 or 172.20.0.0/16 when none is configured (EKS API KubernetesNetworkConfigRequest
      ``serviceIpv4Cidr``; this project configures none). Either address is in the 443 rule.
    - The Pod Identity agent (TCP 80 on its link-local addresses): the pod's AWS credentials.
    """
    https = [
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": [IMDS_CIDRS[0]]}},
        {"ipBlock": {"cidr": "::/0", "except": [IMDS_CIDRS[1]]}},
    ]
    agent = [{"ipBlock": {"cidr": f"{POD_IDENTITY_AGENT[0]}/32"}}, {"ipBlock": {"cidr": f"{POD_IDENTITY_AGENT[1]}/128"}}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(f"{SWEEP_CONTROL}-egress", namespace),
        "spec": {
            "podSelector": {"matchLabels": dict(SWEEP_CONTROL_LABELS)},
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [dict(CLUSTER_DNS)], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                {"to": https, "ports": [{"protocol": "TCP", "port": 443}]},
                {"to": agent, "ports": [{"protocol": "TCP", "port": 80}]},
            ],
        },
    }


def network_policies(namespace: str, port: int) -> tuple[dict[str, Any], ...]:
    return (
        default_deny_ingress(namespace),
        serving_from_clients(namespace, port),
        egress_without_imds(namespace),
        sweep_control_egress(namespace),
    )
