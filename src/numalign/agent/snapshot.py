"""The PodResources v1 view of a Node, as the kubelet's providers report it.

Called with the agent's lock held; returns immutable dataclasses the PodResources server can read from
any thread.

`numalign run` processes sharing the directory are not pods: no API server knows them, and consumers
look every listed pod up there (NFD's topology-updater fails its whole scan on a pod it cannot find).
So List leaves them out, and what they hold is left out of GetAllocatableResources instead, as CPUs,
memory and devices the host keeps for itself: `allocatable - listed` stays what pods can still get.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from numalign.adapters.grpc.podresources import (
    AllocatableDevice,
    AllocatableResources,
    AssignedDevices,
    ContainerResources,
    MemoryBlock,
    PodResources,
)
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.node import Node


def _reported_containers(pod: Pod) -> Iterable[Container]:
    # Upstream lists restartable init containers (sidecars) first, then app containers; regular init
    # containers have finished by the time anyone asks and are not reported.
    yield from (c for c in pod.init_containers if c.is_sidecar)
    yield from pod.containers


def container_resources(node: Node, pod: Pod, container: Container, dra: Any = None) -> ContainerResources:
    # GetExclusiveCPUs: only CPUs assigned to this container, never the shared pool (none under none).
    cpus = tuple(sorted(node.cpu.get_exclusive_cpus(pod.uid, container.name)))
    blocks = node.memory.get_memory(pod.uid, container.name) or []
    memory = tuple(MemoryBlock(b.type, b.size, tuple(b.numa_affinity)) for b in blocks)
    devices: list[AssignedDevices] = []
    for resource, ids in sorted((node.devices.get_container_devices(pod.uid, container.name) or {}).items()):
        per_node: dict[int | None, list[str]] = {}
        for dev_id, dev in ids.items():
            for numa in (None,) if dev.topology is None else dev.topology:
                per_node.setdefault(numa, []).append(dev_id)
        for numa, dev_ids in sorted(per_node.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
            devices.append(AssignedDevices(resource, tuple(dev_ids), numa))
    dynamic = dra.dynamic_resources(pod, container) if dra is not None else ()
    return ContainerResources(container.name, cpus, memory, tuple(devices), sidecar=container.is_sidecar,
                              dynamic_resources=dynamic)


def pods_view(node: Node, dra: Any = None, *, runs: Collection[str] = ()) -> list[PodResources]:
    """`dra`: the agent's DRA claims (agent/dra.py), for dynamic_resources; `runs`: the uids of the pods
    `numalign run` processes hold (run/records.py)."""
    return [
        PodResources(
            pod.name, pod.namespace,
            tuple(container_resources(node, pod, c, dra) for c in _reported_containers(pod))
        )
        for pod in sorted(node.pods.values(), key=lambda p: (p.namespace, p.name))
        if pod.uid not in runs  # `numalign run` processes: see the module's docstring
    ]


def inactive_view(pods: Iterable[Pod]) -> list[PodResources]:
    """Pods the node knows but runs without resources (rejected, or waiting for a device plugin): the
    kubelet's pod manager still has them, so Get and v1alpha1 List report them, every container empty."""
    return [
        PodResources(pod.name, pod.namespace,
                     tuple(ContainerResources(c.name, sidecar=c.is_sidecar) for c in _reported_containers(pod)))
        for pod in sorted(pods, key=lambda p: (p.namespace, p.name))
    ]


def allocatable_view(node: Node, runs: Iterable[str] = ()) -> AllocatableResources:
    held_cpus: set[int] = set()
    held_devices: set[tuple[str, str]] = set()
    held_memory: list[MemoryBlock] = []
    for uid in runs:
        pod = node.pods.get(uid)
        if pod is None:
            continue
        for c in _reported_containers(pod):
            res = container_resources(node, pod, c)
            held_cpus.update(res.cpu_ids)
            held_devices.update((d.resource_name, i) for d in res.devices for i in d.device_ids)
            held_memory.extend(res.memory)
    # Under the none policy upstream reports no CPUs at all: nonePolicy.GetAllocatableCPUs returns
    # the empty set, as no CPU can be exclusively allocated (clients read "no CPU manager pinning").
    cpus = tuple(sorted(set(node.cpu.get_allocatable_cpus()) - held_cpus))
    allocatable = list(node.memory.get_allocatable_memory())
    left = {(b.type, tuple(b.numa_affinity)): b.size for b in allocatable}
    for held in held_memory:
        # A block over several NUMA nodes fills them in its affinity's order, as the memory manager
        # accounts it (upstream validateState's replay).
        size = held.size
        for n in held.numa_nodes:
            key = (held.memory_type, (n,))
            taken = min(size, left.get(key, 0))
            left[key] = left.get(key, 0) - taken
            size -= taken
    memory = tuple(
        MemoryBlock(b.type, left[(b.type, tuple(b.numa_affinity))], tuple(b.numa_affinity)) for b in allocatable
    )
    devices = tuple(
        AllocatableDevice(resource, dev_id, dev.topology)
        for resource, devs in sorted(node.devices.get_allocatable_devices().items())
        for dev_id, dev in devs.items()
        if (resource, dev_id) not in held_devices
    )
    return AllocatableResources(cpus, memory, devices)
