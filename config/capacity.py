"""What one Neuron node can hold: its allocatable resources, what the node's daemons and the
model-cache Job take, and what each vLLM service requests.

Pure arithmetic, shared by the configuration rules (a config that cannot fit is rejected at synth)
and by the node-fit test, which sums the rendered pod specs instead of trusting these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import TrainiumInstance

MIB_PER_GIB = 1024


@dataclass(frozen=True)
class Resources:
    """Requests of one or more pods, or what a node offers; CPU in millicores, memory in MiB."""

    cpu_millis: int = 0
    memory_mib: int = 0
    neuron_devices: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu_millis + other.cpu_millis, self.memory_mib + other.memory_mib, self.neuron_devices + other.neuron_devices)

    def __mul__(self, times: int) -> Resources:
        return Resources(self.cpu_millis * times, self.memory_mib * times, self.neuron_devices * times)

    def fits_in(self, capacity: Resources) -> bool:
        return (
            self.cpu_millis <= capacity.cpu_millis
            and self.memory_mib <= capacity.memory_mib
            and self.neuron_devices <= capacity.neuron_devices
        )


# The EKS AL2023 AMI's kubelet reservations: CPU 6% of the first core, 1% of the second, 0.5% of
# the third and fourth, 0.25% of the rest; memory 255 MiB + 11 MiB per pod the node may run, plus
# the 100 MiB hard-eviction threshold. Pods are counted at 737, the largest max-pods value EKS
# uses, so the memory figure is an upper bound.
_MAX_PODS_UPPER_BOUND = 737
_EVICTION_MIB = 100

# Requests of the DaemonSets on a Neuron node (aws-node, kube-proxy, Pod Identity agent, Neuron
# device plugin and problem detector, CloudWatch agent, Fluent Bit, Neuron monitor, Mountpoint CSI
# node and mounter pods): a budget well above their summed defaults, so an add-on upgrade that
# grows them does not evict a serving pod.
DAEMONSET_BUDGET = Resources(cpu_millis=4000, memory_mib=16 * MIB_PER_GIB)

# The model-cache Job runs on a Neuron node (where the serving image is already pulled and the
# root volume has room for one weight shard at a time), alongside the waiting services.
MODEL_CACHE_JOB = Resources(cpu_millis=4000, memory_mib=16 * MIB_PER_GIB)


def kube_reserved(instance: TrainiumInstance) -> Resources:
    tiers = ((1, 60), (1, 10), (2, 5))  # (cores, millicores reserved per core)
    cpu, left = 0.0, instance.vcpus
    for cores, per_core in tiers:
        used = min(cores, left)
        cpu, left = cpu + used * per_core, left - used
    cpu += left * 2.5
    memory = 255 + 11 * _MAX_PODS_UPPER_BOUND + _EVICTION_MIB
    return Resources(cpu_millis=int(-(-cpu // 1)), memory_mib=memory)


def allocatable(instance: TrainiumInstance) -> Resources:
    """What the kubelet offers pods on one node of this type."""
    reserved = kube_reserved(instance)
    return Resources(
        cpu_millis=instance.vcpus * 1000 - reserved.cpu_millis,
        memory_mib=instance.memory_gib * MIB_PER_GIB - reserved.memory_mib,
        neuron_devices=instance.neuron_devices,
    )


def service_request(instance: TrainiumInstance, lnc: int, tensor_parallel_size: int, cpu: int, memory_gib: int) -> Resources:
    """Requests of one vLLM service: whole Neuron devices covering its tensor-parallel ranks."""
    devices = -(-tensor_parallel_size // instance.logical_cores_per_device(lnc))
    return Resources(cpu_millis=cpu * 1000, memory_mib=memory_gib * MIB_PER_GIB, neuron_devices=devices)


def services_per_node(instance: TrainiumInstance, service: Resources) -> int:
    """How many services fit one node next to its daemons and the model-cache Job (0 if none)."""
    room = allocatable(instance)
    fitting = [n for n in range(1, instance.neuron_devices + 1) if (service * n + DAEMONSET_BUDGET + MODEL_CACHE_JOB).fits_in(room)]
    return max(fitting, default=0)


def fit_table(instance: TrainiumInstance, service: Resources, services: int) -> str:
    """Markdown table of one node's budget for ``services`` services (docs/serving.md, "One node")."""

    def row(label: str, r: Resources) -> str:
        return f"| {label} | {r.cpu_millis / 1000:g} | {r.memory_mib / MIB_PER_GIB:.1f} | {r.neuron_devices} |"

    room = allocatable(instance)
    used = service * services + DAEMONSET_BUDGET + MODEL_CACHE_JOB
    headroom = Resources(room.cpu_millis - used.cpu_millis, room.memory_mib - used.memory_mib, room.neuron_devices - used.neuron_devices)
    return "\n".join(
        [
            "| | vCPU | memory GiB | Neuron devices |",
            "| --- | --- | --- | --- |",
            row(f"allocatable on {instance.name} (EKS AL2023 kubelet reservations, max-pods upper bound)", room),
            row(f"{services} services", service * services),
            row(
                "daemon budget (CNI, kube-proxy, Pod Identity, Neuron plugin and NPD, CloudWatch agent, Fluent Bit, Mountpoint)",
                DAEMONSET_BUDGET,
            ),
            row("model-cache Job", MODEL_CACHE_JOB),
            row("headroom", headroom),
        ]
    )
