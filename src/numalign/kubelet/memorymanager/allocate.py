"""Memory manager Static policy: turning the Topology Manager's affinity into memory blocks.

Upstream Allocate (after the QoS and "already allocated" checks), updateMachineState and the
release half of RemoveContainer. These functions work on a machine state in place; every check
runs before the first mutation, so a raised AllocationError leaves the state untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping

from numalign.core.bitmask import bits_of
from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError
from numalign.kubelet.memorymanager.hints import (
    Requested,
    ReusableMemory,
    calculate_hints,
    is_affinity_satisfy_request,
    reusable_for,
    violates_grouping,
)
from numalign.kubelet.memorymanager.implicit_hints import best_member_hint, memory_topology_hints
from numalign.kubelet.memorymanager.state import RESOURCE_MEMORY, Block, NUMANodeState
from numalign.kubelet.topologymanager.provider import DEFAULT_IMPLICIT_FROM_NODES, ListOrImplicit

ERR_NO_DEFAULT_AFFINITY = (
    "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
)
ERR_NO_DEFAULT_PREFERRED = "[memorymanager] failed to find the default preferred hint"
ERR_NO_EXTENSION = "[memorymanager] failed to find NUMA nodes to extend the current topology hint"
ERR_NO_EXTENDED_PREFERRED = "[memorymanager] failed to find the extended preferred hint"
ERR_VIOLATES_GROUPING = "[memorymanager] preferred hint violates NUMA node allocation"


def choose_affinity(
    machine_state: Mapping[int, NUMANodeState],
    requested: Requested,
    hint: TopologyHint,
    reusable: ReusableMemory | None = None,
    *,
    implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
) -> TopologyHint:
    """The hint Allocate will use: the TM affinity, or the default one when the TM had no NUMA
    preference, widened to a superset when the affinity's free memory cannot hold the request.
    calculateHints' list is implicit on machines with at least `implicit_from_nodes` NUMA nodes."""
    best = hint
    source: ListOrImplicit | None = None  # calculateHints' memory list, built once and only when needed
    if hint.mask is None:
        source = _memory_hints(machine_state, requested, reusable, implicit_from_nodes)
        default = None if source is None else best_member_hint(source)
        if default is None:
            # calculateHints found nothing; or (upstream would go on with a nil affinity and crash)
            # only hugepages were requested, which cannot be placed: a Guaranteed pod asks memory.
            raise AllocationError(ERR_NO_DEFAULT_AFFINITY)
        if not default.preferred and best.preferred:
            raise AllocationError(ERR_NO_DEFAULT_PREFERRED)
        best = default
    assert best.mask is not None  # narrowed above
    _require_known_nodes(machine_state, best.mask)

    # The TM merge ANDs the providers' masks, so the memory hint can come back narrowed to a subset
    # of what calculateHints proposed; widen it again to the best mask containing it (found without
    # listing the 2^N masks on large machines: best_member_hint).
    if not is_affinity_satisfy_request(machine_state, best.mask, requested):
        if source is None:
            source = _memory_hints(machine_state, requested, reusable, implicit_from_nodes)
        extended = None if source is None else best_member_hint(source, best.mask)
        if extended is None:
            raise AllocationError(ERR_NO_EXTENSION)
        if not extended.preferred and best.preferred:
            raise AllocationError(ERR_NO_EXTENDED_PREFERRED)
        best = extended
    assert best.mask is not None

    if violates_grouping(machine_state, bits_of(best.mask)):
        raise AllocationError(ERR_VIOLATES_GROUPING)
    return best


def _memory_hints(
    machine_state: Mapping[int, NUMANodeState],
    requested: Requested,
    reusable: ReusableMemory | None,
    implicit_from_nodes: int,
) -> ListOrImplicit | None:
    """calculateHints' list for "memory" (None when it has no entry), implicit on large machines."""
    if len(machine_state) >= implicit_from_nodes:
        return memory_topology_hints(machine_state, requested, reusable).get(RESOURCE_MEMORY)
    return calculate_hints(machine_state, requested, reusable).get(RESOURCE_MEMORY)


def _require_known_nodes(machine_state: Mapping[int, NUMANodeState], mask: int) -> None:
    unknown = [n for n in bits_of(mask) if n not in machine_state]
    if unknown:
        raise AllocationError(
            f"[memorymanager] the topology affinity {bits_of(mask)} names NUMA node(s) {unknown} that the "
            f"memory manager state does not have (known: {sorted(machine_state)}); the Topology Manager "
            "and the memory manager must describe the same machine"
        )


def allocate_blocks(
    machine_state: MutableMapping[int, NUMANodeState],
    requested: Requested,
    hint: TopologyHint,
    reusable: ReusableMemory | None = None,
    *,
    implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
) -> list[Block]:
    """Upstream Allocate from the hint on: choose the affinity, create one block per requested
    resource (sorted by type; upstream's map order is random) and take the memory from the state.
    Each block records the full request; only the part not covered by the pod's reusable
    init-container memory on that exact mask is taken from `free`."""
    best = choose_affinity(machine_state, requested, hint, reusable, implicit_from_nodes=implicit_from_nodes)
    assert best.mask is not None
    mask_bits = bits_of(best.mask)
    blocks: list[Block] = []
    for resource in sorted(requested):
        size = requested[resource]
        blocks.append(Block(list(mask_bits), resource, size))
        to_take = max(0, size - reusable_for(reusable, best.mask, resource))
        update_machine_state(machine_state, mask_bits, resource, to_take)
    return blocks


def update_machine_state(
    machine_state: MutableMapping[int, NUMANodeState], mask_bits: list[int], resource: str, size: int
) -> None:
    """Upstream updateMachineState: every node of the mask joins the group and counts the block, even
    when nothing is taken; bytes come from `free` node by node in ascending id order."""
    remaining = size
    for nid in mask_bits:
        node = machine_state[nid]
        node.number_of_assignments += 1
        node.cells = list(mask_bits)
        if remaining == 0:
            continue
        table = node.memory_map.get(resource)
        if table is None or table.free == 0:
            continue
        taken = min(table.free, remaining)
        table.reserved += taken
        table.free -= taken
        remaining -= taken


def release_blocks(machine_state: MutableMapping[int, NUMANodeState], blocks: Iterable[Block]) -> None:
    """The release half of upstream RemoveContainer: each block gives its size back from `reserved`,
    node by node in its affinity order; a node with no assignments left leaves its group."""
    for b in blocks:
        remaining = b.size
        for nid in b.numa_affinity:
            node = machine_state.get(nid)
            if node is None:
                continue  # validate_state rejects such blocks on start; nothing to give back here
            node.number_of_assignments -= 1
            if node.number_of_assignments == 0:
                node.cells = [nid]
            if remaining == 0:
                continue
            table = node.memory_map.get(b.type)
            if table is None or table.reserved == 0:
                continue
            given = min(table.reserved, remaining)
            table.free += given
            table.reserved -= given
            remaining -= given
