"""A node's allocatable resources as its status reports them (the kubelet's node status setters), which
the predicate admit handler (and kube-scheduler's NodeResourcesFit) compare requests against.

Units are the scheduler's: cpu in millicores, every other resource in whole units (bytes, devices).

* capacity: cpu is the online CPU count (cadvisor NumCores), memory the NUMA nodes' memory
  (MemoryCapacity), each hugepage size its pool; extended resources are the device plugins' devices.
* allocatable = capacity - (kubeReserved + systemReserved + the hard eviction threshold); with
  reservedSystemCPUs the cpu reserved is exactly that many CPUs (the kubelet lets --reserved-cpus
  override the cpu of kubeReserved and systemReserved); memory also loses every hugepage pool
  (hugepages are resources of their own); extended resources are the healthy devices.
* pods: maxPods, or podsPerCore x the CPU count when podsPerCore > 0 and that is smaller.
"""

from __future__ import annotations

from typing import Final

from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY, hugepage_resource_name
from numalign.machine.topology import Machine

RESOURCE_PODS: Final = "pods"


def amount(name: str, q: Quantity) -> int:
    """A quantity in the scheduler's unit for that resource (cpu in millicores)."""
    return q.milli_value() if name == RESOURCE_CPU else q.value()


def node_capacity(machine: Machine) -> dict[str, Quantity]:
    """cpu, memory and hugepages capacity as cadvisor reports them (no pods, no extended resources)."""
    hugepages: dict[str, int] = {}
    for n in machine.numa_nodes:
        for size, pages in n.hugepages.items():
            name = hugepage_resource_name(size)
            hugepages[name] = hugepages.get(name, 0) + size * pages
    return {
        RESOURCE_CPU: Quantity.from_int(machine.capacity_cpus()),
        RESOURCE_MEMORY: Quantity.from_int(machine.capacity_memory(), QuantityFormat.BINARY_SI),
        **{k: Quantity.from_int(v, QuantityFormat.BINARY_SI) for k, v in hugepages.items()},
    }


def node_allocatable(machine: Machine, config: KubeletConfig) -> dict[str, int]:
    """cpu, memory, hugepages and the machine's own devices (healthy ones) allocatable; no pods.

    Kept per (machine, config) object, both frozen: every node of a simulated pool is built from the
    same two, and this was a quarter of building one (1,000 to 10,000 a run)."""
    key = (id(machine), id(config))
    known = _ALLOCATABLE.get(key)
    if known is not None and known[0] is machine and known[1] is config:
        return dict(known[2])
    out = _node_allocatable(machine, config)
    if len(_ALLOCATABLE) >= _ALLOCATABLE_KEPT:
        _ALLOCATABLE.clear()
    _ALLOCATABLE[key] = (machine, config, dict(out))  # the objects held, so their ids stay theirs
    return out


_ALLOCATABLE: dict[tuple[int, int], tuple[Machine, KubeletConfig, dict[str, int]]] = {}
_ALLOCATABLE_KEPT: Final = 64


def _node_allocatable(machine: Machine, config: KubeletConfig) -> dict[str, int]:
    capacity = node_capacity(machine)
    reserved = config.node_allocatable_reservation(capacity)
    system_cpus = config.reserved_cpus()
    if system_cpus:
        # cmd/kubelet/app/server.go: --reserved-cpus overrides the cpu of kubeReserved and systemReserved.
        # (Hard eviction thresholds never reserve cpu.)
        reserved[RESOURCE_CPU] = Quantity.from_int(len(system_cpus))
    out: dict[str, int] = {}
    for name, cap in capacity.items():
        value = amount(name, cap) - (amount(name, reserved[name]) if name in reserved else 0)
        out[name] = max(value, 0)
    pools = sum(amount(name, q) for name, q in capacity.items() if name not in (RESOURCE_CPU, RESOURCE_MEMORY))
    out[RESOURCE_MEMORY] = max(out[RESOURCE_MEMORY] - pools, 0)
    for resource, devs in machine.devices_by_resource().items():
        out[resource] = sum(1 for d in devs if d.health == "Healthy")
    return out


def allowed_pod_number(machine: Machine, config: KubeletConfig) -> int:
    """The node's "pods" capacity (and allocatable): maxPods, capped by podsPerCore x CPUs when set."""
    if config.pods_per_core > 0:
        return min(config.pods_per_core * machine.capacity_cpus(), config.max_pods)
    return config.max_pods
