"""Kubernetes NetworkPolicy semantics over plain dicts: label selectors, isolation, and whether one
connection is allowed (https://kubernetes.io/docs/concepts/services-networking/network-policies/):
a pod selected by no policy of a direction is not isolated in it; an isolated pod accepts what at
least one selecting policy's rule allows; a peer with only ``podSelector`` means the policy's own
namespace; an empty selector selects everything."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: dict[str, str]
    ip: str = "10.0.1.10"
    namespace_labels: dict[str, str] = field(default_factory=dict)


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def selects(policy: dict, pod: Pod) -> bool:
    return policy["metadata"]["namespace"] == pod.namespace and matches(policy["spec"]["podSelector"], pod.labels)


def _types(policy: dict) -> list[str]:
    return policy["spec"].get("policyTypes") or (["Ingress"] + (["Egress"] if "egress" in policy["spec"] else []))


def _in_block(block: dict, ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    network = ipaddress.ip_network(block["cidr"])
    if address.version != network.version or address not in network:
        return False
    return not any(
        address in ipaddress.ip_network(e) for e in block.get("except", []) if ipaddress.ip_network(e).version == address.version
    )


def _peer_admits(peer: dict, policy_namespace: str, other: Pod | None, ip: str) -> bool:
    if "ipBlock" in peer:
        return _in_block(peer["ipBlock"], ip)
    if other is None:  # not a pod (an address outside the cluster's pods)
        return False
    if "namespaceSelector" in peer:
        if not matches(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace, **other.namespace_labels}):
            return False
    elif other.namespace != policy_namespace:
        return False
    return matches(peer.get("podSelector", {}), other.labels)


def _port_ok(ports: list[dict] | None, port: int, protocol: str) -> bool:
    return not ports or any(p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports)


def allowed(
    policies: list[dict], pod: Pod, direction: str, peer_ip: str, port: int, peer: Pod | None = None, protocol: str = "TCP"
) -> bool:
    """Whether ``pod`` may receive (Ingress) from or send (Egress) to ``peer_ip``/``peer`` on ``port``."""
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    selecting = [p for p in policies if selects(p, pod) and direction in _types(p)]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get(key, []):
            peers = rule.get(peers_key)
            if (not peers or any(_peer_admits(x, policy["metadata"]["namespace"], peer, peer_ip) for x in peers)) and _port_ok(
                rule.get("ports"), port, protocol
            ):
                return True
    return False


def connects(policies: list[dict], source: Pod, target: Pod, port: int) -> bool:
    """A pod-to-pod connection needs the source's egress and the target's ingress."""
    return allowed(policies, source, "Egress", target.ip, port, target) and allowed(policies, target, "Ingress", source.ip, port, source)
