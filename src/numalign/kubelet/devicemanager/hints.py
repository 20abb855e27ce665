"""Device topology hints (upstream devicemanager topology_hints.go), as pure functions.

The manager keeps the inventory; these functions only look at what they are given, so the replay of
golden vectors and the manager share one code path.

Upstream facts kept on purpose:
- A resource has "topology alignment" only if some device has a TopologyInfo with at least one
  node. Otherwise the hint is None (the Topology Manager ignores the resource).
- minAffinitySize counts ALL devices of the resource (any health, any allocation): a mask is as
  narrow as it can be if the machine has enough devices there, free or not.
- A device's TopologyInfo with no nodes (topology == ()) never matches a mask, like a device with no
  TopologyInfo; but as a *reusable* device only the latter is skipped: the former rejects every
  mask (Go: `Topology == nil` skips, then `!mask.AnySet([])` rejects).
- Available and reusable are counted independently; a device in both counts twice, as upstream.

From kubelet 1.36.0 (k/k #138244, Behaviours.device_hints_over_device_numa_nodes) the masks are
enumerated only over the NUMA nodes that host a registered device of the resource (any state; ids the
machine does not have are dropped), and nothing else is added: the masks kept and their preferred flags
are the 1.35 ones restricted to those nodes (a narrowest mask never needs a device-less node). The real
1.36.2-1.38.0-beta.0 generateDeviceTopologyHints appends no hint spanning every node (issue 33 (a)).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeVar

from numalign.core.bitmask import iterate_bitmasks
from numalign.core.hint import TopologyHint, hint_of
from numalign.k8s.deviceplugin import Device


def device_numa_mask(device: Device | None) -> int:
    """The device's NUMA nodes as an int mask; 0 for no TopologyInfo or no nodes.

    Negative ids cannot be set in a Go bitmask (AnySet tests IsSet on each id), so they never match.
    """
    if device is None or device.topology is None:
        return 0
    mask = 0
    for node in device.topology:
        if node >= 0:
            mask |= 1 << node
    return mask


def device_has_topology_alignment(all_devices: Mapping[str, Device]) -> bool:
    """Upstream deviceHasTopologyAlignment: any device with a non-empty TopologyInfo node list."""
    return any(d.topology for d in all_devices.values())


def generate_device_topology_hints(
    numa_nodes: Sequence[int],
    all_devices: Mapping[str, Device],
    available: Collection[str],
    reusable: Collection[str],
    request: int,
) -> list[TopologyHint]:
    """Upstream generateDeviceTopologyHints: every mask over the machine's NUMA nodes with enough
    reusable+available devices, Preferred where the mask is as narrow as the machine allows."""
    # Devices are counted by their node mask; distinct masks are few (about one per NUMA node). Plain
    # loops over small lists: this runs for every container asking for a device, per admission.
    all_masks = _mask_counts(all_devices.values())
    # A reusable device without TopologyInfo (or unknown to the inventory: Go reads a zero Device)
    # is skipped; every other reusable device must touch the mask. Upstream passes sets: a repeated id
    # counts once.
    reusable_masks: list[int] = []
    num_reusable = 0
    for d in _distinct(reusable):
        dev = all_devices.get(d)
        if dev is not None and dev.topology is not None:
            m = device_numa_mask(dev)
            if m not in reusable_masks:
                reusable_masks.append(m)
            num_reusable += 1
    available_masks = _mask_counts([all_devices.get(d) for d in _distinct(available)])

    # The hints depend only on these counts: kept per them, as a node's free devices come back to the
    # same few counts admission after admission.
    key = (tuple(numa_nodes), tuple(all_masks), tuple(reusable_masks), num_reusable, tuple(available_masks), request)
    kept = _HINTED.get(key)
    if kept is None:
        kept = _hints(numa_nodes, all_masks, reusable_masks, num_reusable, available_masks, request)
        if len(_HINTED) >= _HINTED_KEPT:
            _HINTED.clear()
        _HINTED[key] = kept
    return list(kept)


def _hints(numa_nodes: Sequence[int], all_masks: list[tuple[int, int]], reusable_masks: list[int],
           num_reusable: int, available_masks: list[tuple[int, int]], request: int) -> tuple[TopologyHint, ...]:
    min_affinity_size = len(numa_nodes)
    candidates: list[tuple[int, int]] = []
    for mask, count in _all_masks(numa_nodes):
        if count < min_affinity_size:
            total = 0
            for m, n in all_masks:
                if m & mask:
                    total += n
            if total >= request:
                min_affinity_size = count
        touches_every_reusable = True
        for m in reusable_masks:
            if not m & mask:
                touches_every_reusable = False
                break
        if not touches_every_reusable:
            continue
        num_matching = num_reusable
        for m, n in available_masks:
            if m & mask:
                num_matching += n
        if num_matching >= request:
            candidates.append((mask, count))

    return tuple([hint_of(m, count == min_affinity_size) for m, count in candidates])


# generate_device_topology_hints' answers per (NUMA nodes, device masks and counts, request)
_HINTED: dict[tuple[object, ...], tuple[TopologyHint, ...]] = {}
_HINTED_KEPT = 4096


def _distinct(ids: Collection[str]) -> Collection[str]:
    return ids if isinstance(ids, (set, frozenset)) else set(ids)


def _mask_counts(devices: Iterable[Device | None]) -> list[tuple[int, int]]:
    """(node mask, devices with it) for each distinct mask, in first-seen order."""
    counts: dict[int, int] = {}
    for d in devices:
        m = device_numa_mask(d)
        counts[m] = counts.get(m, 0) + 1
    return list(counts.items())


def _all_masks(numa_nodes: Sequence[int]) -> list[tuple[int, int]]:
    """iterate_bitmasks over the nodes with each mask's node count, kept per node list (a machine has one
    or two: all its nodes, and those hosting a resource's devices from 1.36)."""
    key = tuple(numa_nodes)
    masks = _MASKS.get(key)
    if masks is None:
        masks = [(m, m.bit_count()) for m in iterate_bitmasks(list(key))]
        if len(_MASKS) >= _MASKS_KEPT:
            _MASKS.clear()
        _MASKS[key] = masks
    return masks


_MASKS: dict[tuple[int, ...], list[tuple[int, int]]] = {}
_MASKS_KEPT = 64


# A hint generator with generate_device_topology_hints' signature: upstream's explicit lists, or
# devicemanager/implicit_hints.device_topology_hints, which describes the same list implicitly on large machines.
_H = TypeVar("_H")
HintGenerator = Callable[[Sequence[int], Mapping[str, Device], Collection[str], Collection[str], int], _H]


def device_numa_nodes(numa_nodes: Sequence[int], all_devices: Mapping[str, Device]) -> list[int]:
    """The machine's NUMA nodes that host a registered device of the resource, ascending (#138244);
    all of them when no device names a node the machine has."""
    known = set(numa_nodes)
    hosting = {n for d in all_devices.values() if d.topology for n in d.topology if n in known}
    return sorted(hosting) if hosting else list(numa_nodes)


def over_device_numa_nodes(generate: HintGenerator[_H]) -> HintGenerator[_H]:
    """`generate` as kubelet 1.36+ runs it: over device_numa_nodes only."""

    def gen(
        numa_nodes: Sequence[int], all_devices: Mapping[str, Device], available: Collection[str],
        reusable: Collection[str], request: int,
    ) -> _H:
        return generate(device_numa_nodes(numa_nodes, all_devices), all_devices, available, reusable, request)

    return gen


def resource_topology_hints(
    numa_nodes: Sequence[int],
    all_devices: Mapping[str, Device],
    *,
    allocated: Collection[str] | None,
    available: Collection[str],
    reusable: Collection[str],
    request: int,
    over_device_nodes: bool = False,
) -> list[TopologyHint] | None:
    """One resource's entry of GetTopologyHints / GetPodTopologyHints (steps a-e).

    `allocated` is what the container (container scope) or the pod (pod scope) already holds for the
    resource; pod scope passes no reusable devices. Returns None for "no topology preference" and []
    for "cannot be satisfied".
    """
    return resource_hint_steps(
        numa_nodes, all_devices, generate_device_topology_hints,
        allocated=allocated, available=available, reusable=reusable, request=request,
        over_device_nodes=over_device_nodes,
    )


def resource_hint_steps(
    numa_nodes: Sequence[int],
    all_devices: Mapping[str, Device],
    generate: HintGenerator[_H],
    *,
    allocated: Collection[str] | None,
    available: Collection[str],
    reusable: Collection[str],
    request: int,
    over_device_nodes: bool = False,
) -> _H | list[TopologyHint] | None:
    """Steps a-e of resource_topology_hints with the hint list built by `generate` (kubelet 1.36+:
    over_device_nodes, see the module docstring)."""
    if over_device_nodes:  # what over_device_numa_nodes(generate) does, without a wrapper per call
        numa_nodes = device_numa_nodes(numa_nodes, all_devices)
    # a. No device reports NUMA nodes: no preference.
    if not device_has_topology_alignment(all_devices):
        return None
    # b. Already allocated (e.g. after a restart): regenerate from what is held.
    if allocated:
        held = set(allocated)
        if len(held) != request:
            return []
        return generate(numa_nodes, all_devices, held, (), request)
    # c-d. Not enough free plus reusable devices at all.
    if len(set(available) | set(reusable)) < request:
        return []
    # e.
    return generate(numa_nodes, all_devices, available, reusable, request)
