"""filterByAffinity (upstream devicemanager manager.go), deterministic.

Splits the available devices of a resource into those on the NUMA nodes of the container's merged
hint ("aligned"), those on other nodes ("unaligned") and those without topology ("no affinity").

Upstream sorts the nodes with sort.Slice (not stable) after collecting them from a map, and returns
Go sets. Our order, which decides nothing upstream defines:
- nodes: in the hint first, then other nodes, then the fake node -1 (upstream's groups); inside a
  group ascending by number of available devices (upstream's key), then by node id (ours);
- devices: listed node by node in that order, inside a node in natural id order. The allocator takes
  devices in list order, so it fills the hint node with the fewest free devices first.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from numalign.core.hint import TopologyHint
from numalign.k8s.deviceplugin import Device
from numalign.kubelet.devicemanager.hints import device_has_topology_alignment
from numalign.kubelet.devicemanager.pod_devices import NODE_WITHOUT_TOPOLOGY, sorted_ids


def _in_mask(mask: int, node: int) -> bool:
    # Go's BitMask.IsSet on a negative id shifts by a huge uint64 and reads 0.
    return node >= 0 and bool(mask >> node & 1)


def filter_by_affinity(
    hint: TopologyHint,
    all_devices: Mapping[str, Device],
    available: Collection[str],
) -> tuple[list[str], list[str], list[str]]:
    """(aligned, unaligned, no_affinity) device ids, each a list in allocation order."""
    if not device_has_topology_alignment(all_devices) or hint.mask is None:
        return [], [], sorted_ids(available)
    mask = hint.mask

    per_node: dict[int, set[str]] = {}
    for d in available:
        dev = all_devices.get(d)
        if dev is None or not dev.topology:
            per_node.setdefault(NODE_WITHOUT_TOPOLOGY, set()).add(d)
            continue
        for node in dev.topology:
            per_node.setdefault(node, set()).add(d)

    # (group, free devices, node) per node, sorted: a plain loop, not a key closure (in the compiled core
    # a nested function and its environment hold each other, a cycle only the garbage collector frees).
    order: list[tuple[int, int, int]] = []
    for node, ids in per_node.items():
        group = 0 if _in_mask(mask, node) else 2 if node == NODE_WITHOUT_TOPOLOGY else 1
        order.append((group, len(ids), node))
    order.sort()

    aligned: list[str] = []
    unaligned: list[str] = []
    without: list[str] = []
    seen: set[str] = set()
    # A device on several nodes belongs to the group of the first node, in this order, that has it.
    for group, _, node in order:
        target = aligned if group == 0 else unaligned if group == 1 else without
        for d in sorted_ids(per_node[node]):
            if d not in seen:
                seen.add(d)
                target.append(d)
    return aligned, unaligned, without
