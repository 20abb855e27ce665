"""The device manager's hints without listing 2^N masks (generateDeviceTopologyHints as ImplicitHints).

A mask passes iff every reusable device with topology touches it and |reusable| + available devices
touching it >= request: monotone. minAffinitySize counts ALL devices of the resource touching a mask
(found by a pruned search, devices may span nodes).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from numalign.core.bitmask import mask_of
from numalign.core.implicit.hints import ImplicitHints, NodeSums, min_member_count
from numalign.k8s.deviceplugin import Device
from numalign.kubelet.devicemanager.hints import (
    device_numa_mask,
    generate_device_topology_hints,
    resource_hint_steps,
)
from numalign.kubelet.topologymanager.provider import ListOrImplicit


class _Coverage:
    """How many devices touch a mask: single-node devices add up per node; the (few) devices that
    span several nodes are tested one by one; devices without nodes never count."""

    def __init__(self, masks: Sequence[int]) -> None:
        per_node: dict[int, int] = {}
        self.multi: list[int] = []
        for m in masks:
            if m.bit_count() == 1:
                n = m.bit_length() - 1
                per_node[n] = per_node.get(n, 0) + 1
            elif m:
                self.multi.append(m)
        self.single = NodeSums(per_node)

    def count(self, mask: int) -> int:
        return self.single.sum(mask) + sum(1 for d in self.multi if d & mask)

    def bound(self, inc: int, allowed: int, size: int, target: int) -> bool:
        """Optimistic: may some S, inc <= S <= allowed, |S| == size, touch `target` devices."""
        rest = allowed & ~inc
        spanning = sum(1 for d in self.multi if d & inc or d & rest)
        return self.single.sum(inc) + self.single.topk(rest, size - inc.bit_count()) + spanning >= target




def device_topology_hints(
    numa_nodes: Sequence[int],
    all_devices: Mapping[str, Device],
    available: Collection[str],
    reusable: Collection[str],
    request: int,
) -> ListOrImplicit:
    """generate_device_topology_hints, described: [] when no mask passes, else an ImplicitHints."""
    available, reusable = list(dict.fromkeys(available)), list(dict.fromkeys(reusable))
    nodes = list(dict.fromkeys(numa_nodes))
    top = mask_of(nodes)
    all_masks = [device_numa_mask(d) for d in all_devices.values()]
    reusable_masks = [
        device_numa_mask(dev) for d in reusable if (dev := all_devices.get(d)) is not None and dev.topology is not None
    ]
    available_masks = [device_numa_mask(all_devices.get(d)) for d in available]
    need = request - len(reusable_masks)
    avail_cov = _Coverage(available_masks)

    def up_pass(m: int) -> bool:
        return all(r & m for r in reusable_masks) and avail_cov.count(m) >= need

    if not nodes or not up_pass(top):
        return []

    def up_bound(inc: int, allowed: int, size: int) -> bool:
        return avail_cov.bound(inc, allowed, size, need)

    all_cov = _Coverage(all_masks)

    def all_bound(inc: int, allowed: int, size: int) -> bool:
        return all_cov.bound(inc, allowed, size, request)

    # minAffinitySize: the fewest nodes touched by `request` devices of ANY state (upstream starts at N)
    k = min(min_member_count(nodes, lambda m: all_cov.count(m) >= request, all_bound) or len(numa_nodes),
            len(numa_nodes))
    min_count = min_member_count(nodes, up_pass, up_bound)
    assert min_count is not None
    nodes_list = list(numa_nodes)
    return ImplicitHints(
        top=top,
        up_pass=up_pass,
        is_preferred=lambda m: m.bit_count() == k,
        min_count=min_count,
        pref_sizes=frozenset({k}),
        up_bound=up_bound,
        materialize=lambda: generate_device_topology_hints(nodes_list, all_devices, available, reusable, request),
        label="devices",
        describe=lambda: ("devices", top, tuple(sorted(reusable_masks)), tuple(sorted(available_masks)), need, k),
    )


def resource_topology_hints_implicit(
    numa_nodes: Sequence[int],
    all_devices: Mapping[str, Device],
    *,
    allocated: Collection[str] | None,
    available: Collection[str],
    reusable: Collection[str],
    request: int,
    over_device_nodes: bool = False,
) -> ListOrImplicit | None:
    """devices.hints.resource_topology_hints (steps a-e) with the implicit generator."""
    return resource_hint_steps(
        numa_nodes, all_devices, device_topology_hints,
        allocated=allocated, available=available, reusable=reusable, request=request,
        over_device_nodes=over_device_nodes,
    )


