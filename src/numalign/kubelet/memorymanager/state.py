"""Memory manager state: per-NUMA memory tables, container blocks, default state and validation.

Mirrors upstream pkg/kubelet/cm/memorymanager/state (NUMANodeMap, NUMANodeState, MemoryTable,
Block) and the Static policy's getDefaultMachineState / validateState. All sizes are bytes (uint64
upstream; plain ints here). MemoryManagerState is what the manager persists (memory_manager_state
holds it; memorymanager.checkpoint turns it into the file's bytes and back). The vector encoding
(oracle MEMORY-README.md) uses snake_case keys and puts the resource tables next to `cells` and
`number_of_assignments` in one object per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from numalign.errors import CheckpointError, InvalidInputError

RESOURCE_MEMORY = "memory"
HUGEPAGES_PREFIX = "hugepages-"

TABLE_FIELDS = ("total", "system_reserved", "allocatable", "reserved", "free")
_NODE_META_KEYS = ("cells", "number_of_assignments")


def is_memory_resource(name: str) -> bool:
    """`memory` or a hugepage resource: the names the memory manager handles."""
    return name == RESOURCE_MEMORY or name.startswith(HUGEPAGES_PREFIX)


@dataclass
class MemoryTable:
    """Upstream MemoryTable: total = TotalMemSize; free + reserved = allocatable."""

    total: int = 0
    system_reserved: int = 0
    allocatable: int = 0
    reserved: int = 0
    free: int = 0

    # Written out (here and in NUMANodeState and Block): the dataclass decorator's generated __init__ runs
    # as interpreted Python in the compiled core, and tables and blocks are made at every allocation.
    def __init__(self, total: int = 0, system_reserved: int = 0, allocatable: int = 0, reserved: int = 0,
                 free: int = 0) -> None:
        self.total = total
        self.system_reserved = system_reserved
        self.allocatable = allocatable
        self.reserved = reserved
        self.free = free

    def copy(self) -> MemoryTable:
        return MemoryTable(self.total, self.system_reserved, self.allocatable, self.reserved, self.free)

    def to_json(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in TABLE_FIELDS}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> MemoryTable:
        if not isinstance(obj, Mapping):
            raise InvalidInputError(f"{where}: expected an object with {list(TABLE_FIELDS)}, got {obj!r}")
        values = [_uint(obj.get(f, 0), f"{where}.{f}") for f in TABLE_FIELDS]
        return cls(*values)


@dataclass
class NUMANodeState:
    """Upstream NUMANodeState.

    cells = [self]: unused or used by single-NUMA allocations only; [a, b, ...]: member of that
    multi-NUMA group. number_of_assignments counts blocks (one per resource type) touching the node.
    """

    number_of_assignments: int = 0
    memory_map: dict[str, MemoryTable] = field(default_factory=dict)
    cells: list[int] = field(default_factory=list)

    def __init__(self, number_of_assignments: int = 0, memory_map: dict[str, MemoryTable] | None = None,
                 cells: list[int] | None = None) -> None:
        self.number_of_assignments = number_of_assignments
        self.memory_map = {} if memory_map is None else memory_map
        self.cells = [] if cells is None else cells

    def copy(self) -> NUMANodeState:
        return NUMANodeState(
            self.number_of_assignments,
            {r: t.copy() for r, t in self.memory_map.items()},
            list(self.cells),
        )

    def table(self, resource: str) -> MemoryTable:
        """The table for `resource`; a missing one reads as all zeros (upstream would dereference nil,
        which only happens for requests the node-allocatable admission check already rejects)."""
        t = self.memory_map.get(resource)
        return t if t is not None else MemoryTable()


NUMANodeMap = dict[int, NUMANodeState]


@dataclass
class Block:
    """Upstream state.Block: memory of one type pinned to a NUMA affinity. Mutable: the policy shrinks
    init-container blocks when app containers reuse their memory."""

    numa_affinity: list[int]
    type: str
    size: int

    def __init__(self, numa_affinity: list[int], type: str, size: int) -> None:
        self.numa_affinity = numa_affinity
        self.type = type
        self.size = size

    def copy(self) -> Block:
        return Block(list(self.numa_affinity), self.type, self.size)

    def to_json(self) -> dict[str, Any]:
        return {"numa_affinity": list(self.numa_affinity), "type": self.type, "size": self.size}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> Block:
        if not isinstance(obj, Mapping) or not {"numa_affinity", "type", "size"} <= set(obj):
            raise InvalidInputError(
                f"{where}: expected an object {{'numa_affinity': [ids], 'type': str, 'size': bytes}}, "
                f"got {obj!r}"
            )
        affinity = _int_list(obj["numa_affinity"], f"{where}.numa_affinity")
        return cls(affinity, str(obj["type"]), _uint(obj["size"], f"{where}.size"))


# podUID -> container name -> blocks (upstream ContainerMemoryAssignments).
ContainerMemoryAssignments = dict[str, dict[str, list[Block]]]


@dataclass(frozen=True)
class MemoryManagerState:
    """What the memory manager persists: its policy name, the machine state and the containers' blocks
    (upstream's checkpoint content). A value: the manager hands out and takes in copies."""

    policy_name: str
    machine_state: NUMANodeMap = field(default_factory=dict)
    entries: ContainerMemoryAssignments = field(default_factory=dict)


def _uint(v: Any, where: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise InvalidInputError(f"{where}: expected a non-negative integer (bytes), got {v!r}")
    return v


def _int_list(v: Any, where: str) -> list[int]:
    if not isinstance(v, list):
        raise InvalidInputError(f"{where}: expected a list of NUMA ids, got {v!r}")
    return [_uint(x, f"{where}[{i}]") for i, x in enumerate(v)]


def clone_machine_state(ms: Mapping[int, NUMANodeState]) -> NUMANodeMap:
    return {n: s.copy() for n, s in ms.items()}


def clone_blocks(blocks: Iterable[Block]) -> list[Block]:
    return [b.copy() for b in blocks]


def clone_assignments(a: Mapping[str, Mapping[str, list[Block]]]) -> ContainerMemoryAssignments:
    return {pod: {ctn: clone_blocks(bs) for ctn, bs in ctns.items()} for pod, ctns in a.items()}


def machine_state_from_json(obj: Any, where: str = "machine_state") -> NUMANodeMap:
    """Vector encoding -> NUMANodeMap. Keys are NUMA ids as decimal strings."""
    if not isinstance(obj, Mapping):
        raise InvalidInputError(f"{where}: expected an object keyed by NUMA id, got {obj!r}")
    out: NUMANodeMap = {}
    for key, node in obj.items():
        w = f"{where}[{key!r}]"
        try:
            nid = int(key)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{w}: NUMA id must be a decimal integer string") from None
        if nid < 0:
            raise InvalidInputError(f"{w}: NUMA id must be >= 0")
        if not isinstance(node, Mapping):
            raise InvalidInputError(f"{w}: expected an object, got {node!r}")
        cells = _int_list(node.get("cells", [nid]), f"{w}.cells")
        noa = node.get("number_of_assignments", 0)
        if not isinstance(noa, int) or isinstance(noa, bool):
            raise InvalidInputError(f"{w}.number_of_assignments: expected an integer, got {noa!r}")
        tables = {
            str(r): MemoryTable.from_json(t, f"{w}.{r}") for r, t in node.items() if r not in _NODE_META_KEYS
        }
        out[nid] = NUMANodeState(noa, tables, cells)
    return out


def machine_state_to_json(ms: Mapping[int, NUMANodeState]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for nid in sorted(ms):
        node = ms[nid]
        enc: dict[str, Any] = {r: node.memory_map[r].to_json() for r in sorted(node.memory_map)}
        enc["cells"] = list(node.cells)
        enc["number_of_assignments"] = node.number_of_assignments
        out[str(nid)] = enc
    return out


def blocks_from_json(obj: Any, where: str = "blocks") -> list[Block]:
    if not isinstance(obj, list):
        raise InvalidInputError(f"{where}: expected a list of blocks, got {obj!r}")
    return [Block.from_json(b, f"{where}[{i}]") for i, b in enumerate(obj)]


def blocks_to_json(blocks: Iterable[Block]) -> list[dict[str, Any]]:
    return [b.to_json() for b in blocks]


# ---- default state (upstream getDefaultMachineState) -------------------------------------------


@dataclass(frozen=True)
class HugePagesInfo:
    """cadvisor HugePagesInfo: page size in KiB and the number of pages on the node."""

    page_size_kib: int
    num_pages: int


@dataclass(frozen=True)
class NUMANodeMemory:
    """The memory facts of one cadvisor topology node."""

    id: int
    memory: int
    hugepages: tuple[HugePagesInfo, ...] = ()


_BINARY_SUFFIXES = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def hugepage_resource_name(page_size_bytes: int) -> str:
    """corehelper.HugePageResourceName of a binary-SI quantity: `hugepages-2Mi`, `hugepages-1Gi`.

    The canonical binary form picks the largest suffix with an integer mantissa; page sizes are
    KiB multiples, so the decimal fallback of Quantity.String() only matters for sizes < 1Ki.
    """
    for suffix, shift in _BINARY_SUFFIXES:
        if page_size_bytes >= 1 << shift and page_size_bytes % (1 << shift) == 0:
            return f"{HUGEPAGES_PREFIX}{page_size_bytes >> shift}{suffix}"
    return f"{HUGEPAGES_PREFIX}{page_size_bytes}"


SystemReservedMemory = Mapping[int, Mapping[str, int]]


def default_machine_state(
    nodes: Iterable[NUMANodeMemory], reserved: SystemReservedMemory | None = None
) -> NUMANodeMap:
    """The state of an empty machine: per node, each hugepage size gets total − reserved, and regular
    memory gets node memory − reserved − all hugepage totals of that node."""
    reserved = reserved or {}
    out: NUMANodeMap = {}
    for node in nodes:
        res = reserved.get(node.id, {})
        state = NUMANodeState(0, {}, [node.id])
        hugepages_total = 0
        for hp in node.hugepages:
            name = hugepage_resource_name(hp.page_size_kib * 1024)
            total = hp.num_pages * hp.page_size_kib * 1024
            sys_res = res.get(name, 0)
            alloc = _sub_or_fail(total, sys_res, node.id, name)
            state.memory_map[name] = MemoryTable(total, sys_res, alloc, 0, alloc)
            hugepages_total += total
        sys_res = res.get(RESOURCE_MEMORY, 0)
        alloc = _sub_or_fail(node.memory, sys_res + hugepages_total, node.id, RESOURCE_MEMORY)
        state.memory_map[RESOURCE_MEMORY] = MemoryTable(node.memory, sys_res, alloc, 0, alloc)
        out[node.id] = state
    return out


def _sub_or_fail(total: int, taken: int, node: int, resource: str) -> int:
    # Upstream subtracts uint64s and would wrap around; a negative allocatable is a configuration error.
    if taken > total:
        raise InvalidInputError(
            f"NUMA node {node}: reserved {resource} ({taken} bytes, hugepages included for memory) exceeds "
            f"the node's {resource} ({total} bytes); lower reservedMemory for that node"
        )
    return total - taken


# ---- validation on start (upstream validateState / areMachineStatesEqual) ----------------------

_FIX = " (the kubelet refuses to start: drain the node and delete the memory_manager_state file)"


def validate_state(
    machine_state: Mapping[int, NUMANodeState],
    assignments: Mapping[str, Mapping[str, list[Block]]],
    default_state: Mapping[int, NUMANodeState],
) -> NUMANodeMap:
    """Check a restored state against the default state plus a replay of every block.

    Returns the state to use: the default one when the stored state is empty, else the stored one.
    Raises CheckpointError with upstream's message (then the fix) on a mismatch.
    """
    if not machine_state:
        if assignments:
            raise CheckpointError(
                "[memorymanager] machine state can not be empty when it has memory assignments" + _FIX
            )
        return clone_machine_state(default_state)

    expected = clone_machine_state(default_state)
    for pod_uid, containers in assignments.items():
        for ctn, blocks in containers.items():
            for b in blocks:
                _replay_block(expected, b, pod_uid, ctn)

    if not _machine_states_equal(machine_state, expected):
        raise CheckpointError(
            "[memorymanager] the expected machine state is different from the real one" + _FIX
        )
    return clone_machine_state(machine_state)


def host_changes(stored: Mapping[int, NUMANodeState], default: Mapping[int, NUMANodeState]) -> list[str]:
    """What differs between a stored machine state and the one this machine gives now, in the fixed
    columns only (NUMA nodes, each resource's total, systemReserved and allocatable): a host whose memory
    grew or shrank (balloon, hotplug) or whose hugepage pools changed. [] when only free/reserved differ,
    which is a corrupt or foreign file, not a changed host."""
    out: list[str] = []
    for nid in sorted(set(stored) | set(default)):
        before, now = stored.get(nid), default.get(nid)
        if before is None or now is None:
            out.append(f"NUMA node {nid} {'appeared' if before is None else 'is gone'}")
            continue
        for r in sorted(set(before.memory_map) | set(now.memory_map)):
            t1, t2 = before.memory_map.get(r), now.memory_map.get(r)
            if t1 is None or t2 is None:
                out.append(f"NUMA node {nid}: {r} {'appeared' if t1 is None else 'is gone'}")
            elif (t1.total, t1.system_reserved, t1.allocatable) != (t2.total, t2.system_reserved, t2.allocatable):
                out.append(f"NUMA node {nid}: {r} allocatable {t1.allocatable} -> {t2.allocatable} bytes")
    return out


def rebuild_state(
    default_state: Mapping[int, NUMANodeState],
    assignments: Mapping[str, Mapping[str, list[Block]]],
) -> NUMANodeMap:
    """The machine state this host gives now with every held block replayed onto it, for a host whose
    memory changed under a state file (`numalign run`; the kubelet refuses instead). Raises
    CheckpointError naming the first block that no longer fits."""
    state = clone_machine_state(default_state)
    for pod_uid, containers in sorted(assignments.items()):
        for ctn, blocks in sorted(containers.items()):
            for b in blocks:
                left = _replay_block(state, b, pod_uid, ctn)
                if left:
                    raise CheckpointError(
                        f"[memorymanager] (pod: {pod_uid}, container: {ctn}) holds {b.size} bytes of {b.type} on "
                        f"NUMA {sorted(b.numa_affinity)}, more than this host now has there ({left} bytes short); "
                        "end that run, or release it with numalign remove, then run again"
                    )
    return state


def _replay_block(ms: NUMANodeMap, b: Block, pod_uid: str, ctn: str) -> int:
    """Account block `b` on `ms` as upstream's validateState does; returns the bytes that found no room."""
    remaining = b.size
    for nid in b.numa_affinity:
        node = ms.get(nid)
        if node is None:
            raise CheckpointError(
                f"[memorymanager] (pod: {pod_uid}, container: {ctn}) the memory assignment uses the NUMA "
                f"that does not exist{_FIX}"
            )
        node.number_of_assignments += 1
        node.cells = list(b.numa_affinity)
        table = node.memory_map.get(b.type)
        if table is None:
            raise CheckpointError(
                f"[memorymanager] (pod: {pod_uid}, container: {ctn}) the memory assignment uses memory "
                f"resource that does not exist{_FIX}"
            )
        if remaining == 0 or table.free == 0:
            continue
        taken = min(table.free, remaining)
        table.reserved += taken
        table.free -= taken
        remaining -= taken
    return remaining


def _machine_states_equal(ms1: Mapping[int, NUMANodeState], ms2: Mapping[int, NUMANodeState]) -> bool:
    if len(ms1) != len(ms2):
        return False
    for nid, n1 in ms1.items():
        n2 = ms2.get(nid)
        if n2 is None:
            return False
        if n1.number_of_assignments != n2.number_of_assignments or sorted(n1.cells) != sorted(n2.cells):
            return False
        if len(n1.memory_map) != len(n2.memory_map):
            return False
        for r, t1 in n1.memory_map.items():
            t2 = n2.memory_map.get(r)
            if t2 is None:
                return False
            fixed1 = (t1.total, t1.system_reserved, t1.allocatable)
            if fixed1 != (t2.total, t2.system_reserved, t2.allocatable):
                return False
            # Free and reserved are compared summed over the stored node's group: the order in which a
            # block spilled across the group's nodes is not recorded, so only the group total is known.
            free1 = res1 = free2 = res2 = 0
            for cid in n1.cells:
                c1, c2 = ms1.get(cid), ms2.get(cid)
                if c1 is None or c2 is None:
                    return False
                free1 += c1.table(r).free
                res1 += c1.table(r).reserved
                free2 += c2.table(r).free
                res2 += c2.table(r).reserved
            if free1 != free2 or res1 != res2:
                return False
    return True
