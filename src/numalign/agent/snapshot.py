"""The PodResources v1 view of a Node, as the kubelet's providers report it.

Called with the agent's lock held; returns immutable dataclasses the PodResources server can read from
any thread.
"""

from __future__ import annotations

from collections.abc import Iterable

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


def container_resources(node: Node, pod: Pod, container: Container) -> ContainerResources:
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
    return ContainerResources(container.name, cpus, memory, tuple(devices), sidecar=container.is_sidecar)


def pods_view(node: Node) -> list[PodResources]:
    return [
        PodResources(
            pod.name, pod.namespace, tuple(container_resources(node, pod, c) for c in _reported_containers(pod))
        )
        for pod in sorted(node.pods.values(), key=lambda p: (p.namespace, p.name))
    ]


def inactive_view(pods: Iterable[Pod]) -> list[PodResources]:
    """Pods the node knows but runs without resources (rejected, or waiting for a device plugin): the
    kubelet's pod manager still has them, so Get and v1alpha1 List report them, every container empty."""
    return [
        PodResources(pod.name, pod.namespace,
                     tuple(ContainerResources(c.name, sidecar=c.is_sidecar) for c in _reported_containers(pod)))
        for pod in sorted(pods, key=lambda p: (p.namespace, p.name))
    ]


def allocatable_view(node: Node) -> AllocatableResources:
    cpus = tuple(sorted(node.cpu.get_allocatable_cpus()))
    # Under the none policy upstream reports no CPUs at all: nonePolicy.GetAllocatableCPUs returns
    # the empty set, as no CPU can be exclusively allocated (clients read "no CPU manager pinning").
    memory = tuple(
        MemoryBlock(b.type, b.size, tuple(b.numa_affinity)) for b in node.memory.get_allocatable_memory()
    )
    devices = tuple(
        AllocatableDevice(resource, dev_id, dev.topology)
        for resource, devs in sorted(node.devices.get_allocatable_devices().items())
        for dev_id, dev in devs.items()
    )
    return AllocatableResources(cpus, memory, devices)
