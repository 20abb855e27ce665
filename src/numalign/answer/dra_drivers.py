"""Where dra-driver-cpu and dra-driver-memory place a pod, beside where the kubelet's CPU and memory
managers would place the same pod (the same CPU count and memory asked as container resources), run
on a copy of the node without the pod. Individual-mode CPU devices name their CPUs; a grouped device
(a NUMA node, a socket) only where the driver will take them at Prepare time.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from numalign.core.decision import ContainerAllocation
from numalign.errors import NumalignError
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.kubelet.node import Node
from numalign.machine.dradrivers import CPU_DRIVER, MEMORY_DRIVER
from numalign.machine.render import binary_quantity
from numalign.scheduler.dra.scheduling import PodClaims


def restarted_without(node: Node, pod_uid: str, policy: str | None = None) -> Node:
    """The node restarted (its state kept, as a kubelet restart keeps it; another Topology Manager
    policy when given), then the pod released: the node as it was just before the pod came."""
    config = None if policy is None else dataclasses.replace(node.config, topology_manager_policy=policy)
    twin = node.restarted(config)
    twin.remove(pod_uid)
    return twin


def _ids(ids: Any) -> str:
    return ",".join(map(str, sorted(ids))) or "-"


def driver_lines(node: Node, pod: Pod, outcome: PodClaims) -> list[str]:
    """One line per container that got CPUs or memory from the drivers."""
    lines = []
    for c in pod.all_containers():
        devs = outcome.container_devices(c.name)
        cpu_devs = [d for d in devs if d.driver == CPU_DRIVER]
        mem_devs = [d for d in devs if d.driver == MEMORY_DRIVER]
        if not cpu_devs and not mem_devs:
            continue
        parts = []
        cpus: set[int] = set()
        count = 0
        for d in cpu_devs:
            cpu = d.attributes.get("dra.cpu/cpuID")
            if cpu is not None:
                cpus.add(int(cpu.values[0]))
                count += 1
            else:
                taken = (d.consumed_capacity or {}).get("dra.cpu/cpu")
                n = taken.value() if taken is not None else 0
                count += n
                parts.append(f"{n} CPUs of {d.device} (NUMA {_ids(d.numa_nodes)}; the driver picks them at Prepare)")
        if cpus:
            numa = node.machine.numa_nodes_of(cpus)
            parts.insert(0, f"CPUs {format_cpuset(cpus)} (NUMA {_ids(numa)})")
        memory = 0
        for d in mem_devs:
            taken = (d.consumed_capacity or {}).get("memory")
            size = taken.value() if taken is not None else 0
            memory += size
            parts.append(f"memory {binary_quantity(size)} on NUMA {_ids(d.numa_nodes)}")
        lines.append(f"  dra drivers: {c.name}: {'; '.join(parts)}; {_kubelet(node, pod, c.name, count, memory)}")
    return lines


def _kubelet(node: Node, pod: Pod, name: str, cpus: int, memory: int) -> str:
    """The kubelet's own answer for the same container asking for those CPUs and memory."""
    if node.config.cpu_manager_policy != "static" and node.config.memory_manager_policy != "Static":
        return "the kubelet's CPU and memory managers are off here (none/None, as the drivers require)"
    extra = {}
    if cpus:
        extra["cpu"] = Quantity.from_int(cpus)
    if memory:
        extra["memory"] = Quantity.from_int(memory, QuantityFormat.BINARY_SI)

    def change(c: Any) -> Any:
        if c.name != name or not extra:
            return c
        return dataclasses.replace(c, requests={**c.requests, **extra}, limits={**c.limits, **extra}, claims=())

    variant = dataclasses.replace(pod, uid=f"{pod.uid}-kubelet", resource_claims=(),
                                  init_containers=tuple(change(c) for c in pod.init_containers),
                                  containers=tuple(change(c) for c in pod.containers))
    try:
        twin = restarted_without(node, pod.uid)
        rec = twin.admit(variant)
    except NumalignError as e:
        return f"the kubelet could not be asked ({e})"
    if not rec.result.admit:
        return f"the kubelet would reject the same request: {rec.result.reason}"
    alloc = rec.allocations.get(name) or ContainerAllocation()
    got = []
    if alloc.exclusive:
        ids = alloc.cpus
        numa = node.machine.numa_nodes_of(ids)
        got.append(f"CPUs {format_cpuset(ids)} (NUMA {_ids(numa)})")
    for b in alloc.memory:
        got.append(f"{b.type} {binary_quantity(b.size)} on NUMA {_ids(b.numa_nodes)}")
    return f"the kubelet's managers for the same request: {'; '.join(got) or 'nothing pinned'}"
