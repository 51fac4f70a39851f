"""How the VPC's CIDR is split into subnets: the layout stacks/network.py asks aws-cdk-lib for, and
the allocation ec2.Vpc then makes, so a CIDR too small for the AZs is caught before CDK throws."""

from __future__ import annotations

import ipaddress


def subnet_masks(cidr: str) -> tuple[int, int]:
    """(private, public) subnet prefix lengths: a quarter of the VPC per private subnet (pods take
    VPC IPs), a sixty-fourth per public subnet (only NAT gateways live there)."""
    prefix = ipaddress.IPv4Network(cidr).prefixlen
    return prefix + 2, prefix + 6


def allocate(cidr: str, az_count: int) -> list[str] | None:
    """The subnets ec2.Vpc allocates (public ones for every AZ, then private ones), or None when
    they do not fit.

    Mirrors aws-cdk-lib aws-ec2/lib/network-util.ts: NetworkBuilder.addSubnet checks that the
    block fits from the next free address, then CidrBlock rounds that address up to the block's
    own alignment. Vpc requests subnets per subnet configuration, then per AZ (vpc.ts).
    """
    network = ipaddress.IPv4Network(cidr)
    private, public = subnet_masks(cidr)
    next_free, last = int(network.network_address), int(network.broadcast_address)
    subnets = []
    for mask in [public] * az_count + [private] * az_count:
        size = 2 ** (32 - mask)
        if next_free + size - 1 > last:
            return None
        start = -(-next_free // size) * size
        subnets.append(f"{ipaddress.IPv4Address(start)}/{mask}")
        next_free = start + size
    return subnets


def max_azs(cidr: str) -> int:
    """The most AZs the layout fits into ``cidr``."""
    count = 1
    while allocate(cidr, count + 1) is not None:
        count += 1
    return count
