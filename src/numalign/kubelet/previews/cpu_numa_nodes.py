"""Preview restrict-to-cpu-numa-nodes (k/k PR #138172, draft KEP-5726 in kubernetes/enhancements PR
#5992): on machines that expose many CPU-less NUMA nodes (GB200-class: HBM, CXL), the Topology Manager
and its providers consider only the NUMA nodes with CPUs attached.

What the proposal says, and so what this module does:

* The effective NUMA-node set is the nodes with CPUs; when there is none, the original topology stays.
* The Topology Manager (its NUMAInfo and the max-allowable-numa-nodes check), the CPU manager and the
  memory manager see only that set: a CPU-less node's memory is not offered to the Static memory
  manager, its distance rows and columns are dropped.
* The device manager projects each device's NUMA nodes onto that set by NUMA distance: a device on a
  CPU-less node is reported on the CPU-attached node nearest to it.

Where the proposal's text is silent, numalign decides, and says so in docs/kubelet-versions.md: ties
in distance go to the lowest node id; a device on a CPU-less node of a machine without a distance
matrix reports no NUMA node (the kubelet then treats it as topology-less, "fall back conservatively").
The projection is a view the node is built on (the machine as the kubelet would then see it), so
everything downstream (hints, allocation, state files) sees one consistent, smaller machine.
"""

from __future__ import annotations

import dataclasses

from numalign.machine.topology import Device, Machine, NUMANode


def cpu_attached(machine: Machine) -> list[int]:
    """The NUMA nodes with at least one online CPU, by id."""
    online = machine.online_cpus()
    return sorted(n.id for n in machine.numa_nodes if n.cpus & online)


def nearest(machine: Machine, node: int, targets: list[int]) -> int | None:
    """The target nearest to `node` by its distance row (ties: lowest id); None without distances."""
    if node in targets:
        return node
    rows = machine.distance_matrix()
    if rows is None or node not in rows:
        return None
    ids = machine.numa_ids()
    row = rows[node]
    return min(targets, key=lambda t: (row[ids.index(t)], t))


def project_device(machine: Machine, device: Device, targets: list[int]) -> Device:
    if device.numa_nodes is None:
        return device
    projected = sorted({n for n in (nearest(machine, raw, targets) for raw in device.numa_nodes) if n is not None})
    if not projected and device.numa_nodes:
        return dataclasses.replace(device, numa_nodes=None)
    return dataclasses.replace(device, numa_nodes=tuple(projected))


# id(machine) -> (machine, its effective machine). The nodes of a simulated pool share one Machine;
# handing them one effective Machine too lets them share its CPU topology and that topology's hint
# tables (CPUTopology.from_machine is per Machine object) instead of building one per node. The
# machine is kept, so its id is not reused; bounded like the topology cache.
_EFFECTIVE: dict[int, tuple[Machine, Machine]] = {}
_EFFECTIVE_LIMIT = 64


def effective_machine(machine: Machine) -> Machine:
    """The machine as the kubelet sees it with the preview on: CPU-attached NUMA nodes only, devices
    projected. The same machine when every node has CPUs, or none has (the proposal's fallback)."""
    hit = _EFFECTIVE.get(id(machine))
    if hit is not None and hit[0] is machine:
        return hit[1]
    effective = _effective(machine)
    if len(_EFFECTIVE) >= _EFFECTIVE_LIMIT:
        _EFFECTIVE.clear()
    _EFFECTIVE[id(machine)] = (machine, effective)
    return effective


def _effective(machine: Machine) -> Machine:
    keep = cpu_attached(machine)
    if not keep or len(keep) == len(machine.numa_nodes):
        return machine
    ids = machine.numa_ids()
    positions = [ids.index(k) for k in keep]
    nodes: list[NUMANode] = []
    for n in machine.numa_nodes:
        if n.id not in keep:
            continue
        distances = None if n.distances is None else tuple(n.distances[p] for p in positions)
        nodes.append(dataclasses.replace(n, distances=distances))
    devices = tuple(project_device(machine, d, keep) for d in machine.devices)
    return dataclasses.replace(machine, numa_nodes=tuple(nodes), devices=devices)


def dropped_nodes(machine: Machine) -> list[int]:
    """The NUMA nodes the preview leaves out (for notes)."""
    keep = cpu_attached(machine)
    if not keep:
        return []
    return [n for n in machine.numa_ids() if n not in keep]
