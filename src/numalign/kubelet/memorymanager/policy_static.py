"""The memory manager with the `Static` policy, as a Topology Manager hint provider named "memory".

Upstream staticPolicy plus the parts of the manager around it (AddContainer's release of finished
init containers, GetMemoryNUMANodes, GetAllocatableMemory, removeStaleState) over an in-memory state.
Persistence is the caller's: snapshot()/restore() give and take a MemoryManagerState, what the
kubelet's `memory_manager_state` file holds (memorymanager.checkpoint reads and writes the file).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, TypeVar

from numalign.core.bitmask import mask_of, mask_string
from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, CheckpointError, ConfigError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.kubelet.memorymanager.allocate import allocate_blocks, release_blocks
from numalign.kubelet.memorymanager.hints import (
    MemoryHints,
    Requested,
    ReusableMemory,
    calculate_hints,
    regenerate_hints,
)
from numalign.kubelet.memorymanager.implicit_hints import memory_topology_hints
from numalign.kubelet.memorymanager.requests import (
    container_requested,
    get_pod_requested_resources,
    is_restartable,
)
from numalign.kubelet.memorymanager.state import (
    RESOURCE_MEMORY,
    Block,
    ContainerMemoryAssignments,
    HugePagesInfo,
    MemoryManagerState,
    NUMANodeMap,
    NUMANodeMemory,
    NUMANodeState,
    SystemReservedMemory,
    clone_assignments,
    clone_blocks,
    clone_machine_state,
    default_machine_state,
    host_changes,
    rebuild_state,
    validate_state,
)
from numalign.kubelet.topologymanager.provider import (
    DEFAULT_IMPLICIT_FROM_NODES,
    AffinityStore,
    HintProvider,
    ImplicitHintProvider,
    ListOrImplicit,
)
from numalign.machine.topology import Machine

POLICY_NAME = "Static"
_NO_AFFINITY = TopologyHint(None, False)
_M = TypeVar("_M", MemoryHints, Mapping[str, ListOrImplicit])
_Gen = Callable[[Mapping[int, NUMANodeState], Requested, ReusableMemory | None], _M]


def numa_memory_of(machine: Machine) -> list[NUMANodeMemory]:
    """The memory facts the policy needs from the machine model, in cadvisor's node order.

    Kept per machine object (frozen, as the facts are): a simulated pool builds its 1,000 (10,000)
    memory managers from one machine."""
    known = _NUMA_MEMORY.get(id(machine))
    if known is not None and known[0] is machine:
        return list(known[1])
    out: list[NUMANodeMemory] = []
    for node_id in machine.cadvisor_numa_order():
        node = machine.node(node_id)
        pages = tuple(HugePagesInfo(size // 1024, count) for size, count in sorted(node.hugepages.items()))
        out.append(NUMANodeMemory(node.id, node.memory_bytes, pages))
    if len(_NUMA_MEMORY) >= _KEPT:
        _NUMA_MEMORY.clear()
    _NUMA_MEMORY[id(machine)] = (machine, tuple(out))  # the machine held, so its id stays its own
    return out


def _default_state(nodes: tuple[NUMANodeMemory, ...], reserved: dict[int, dict[str, int]]) -> NUMANodeMap:
    """getDefaultMachineState of these nodes and reservations, kept per their values: the same map for
    every manager of a pool, which only reads it (a manager's own state is a clone of it)."""
    key = (nodes, tuple(sorted((n, tuple(sorted(r.items()))) for n, r in reserved.items())))
    known = _DEFAULT_STATES.get(key)
    if known is None:
        known = default_machine_state(nodes, reserved)
        if len(_DEFAULT_STATES) >= _KEPT:
            _DEFAULT_STATES.clear()
        _DEFAULT_STATES[key] = known
    return known


_NUMA_MEMORY: dict[int, tuple[Machine, tuple[NUMANodeMemory, ...]]] = {}
_DEFAULT_STATES: dict[tuple[object, ...], NUMANodeMap] = {}
_KEPT: Final = 64


class MemoryManagerStatic:
    """Memory manager, Static policy. `nodes` are the machine's NUMA nodes (memory and hugepages),
    `reserved` the per-NUMA reservedMemory in bytes (see reserved.get_system_reserved_memory)."""

    name = "memory"
    policy_name = POLICY_NAME
    pins = True

    def __init__(
        self,
        nodes: Sequence[NUMANodeMemory],
        reserved: SystemReservedMemory,
        affinity: AffinityStore | None = None,
        *,
        implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
        adapt_to_host: bool = False,
    ) -> None:
        # adapt_to_host: a stored state made on this host before its memory changed is rebuilt around the
        # blocks it holds (`numalign run`, a host tool) instead of refused as the kubelet refuses it.
        self.adapt_to_host = adapt_to_host
        # What start() found changed on the host and adapted to (empty: nothing changed).
        self.host_changes: list[str] = []
        # hints are implicit on machines with at least this many NUMA nodes (providers/implicit)
        self.implicit_from_nodes = implicit_from_nodes
        if sum(r.get(RESOURCE_MEMORY, 0) for r in reserved.values()) <= 0:
            raise ConfigError(
                "[memorymanager] you should specify the system reserved memory "
                "(the Static policy needs reservedMemory with a `memory` amount on at least one NUMA node, "
                "matching kube-reserved + system-reserved + the memory.available hard eviction threshold)"
            )
        self._nodes = tuple(nodes)
        self._reserved = {n: dict(r) for n, r in reserved.items()}
        self.affinity = affinity
        # The empty machine's state, shared and never changed (see _default_state): handed out as clones.
        self._default = _default_state(self._nodes, self._reserved)
        self.machine_state: NUMANodeMap = clone_machine_state(self._default)
        self.assignments: ContainerMemoryAssignments = {}
        # podUID -> mask_string -> resource -> bytes left by regular init containers; only the pod
        # being admitted is kept (upstream initContainersReusableMemory).
        self._reusable: dict[str, dict[str, dict[str, int]]] = {}
        self._allocatable = self._compute_allocatable()
        self.pinning_requests_total = 0
        self.pinning_errors_total = 0
        # Containers given exclusive memory and the blocks (one per resource) they got: 1.36's
        # resource_manager_* counters of node-level allocations and exclusive assignments.
        self.exclusive_allocations_total = 0
        self.exclusive_blocks_total = 0

    @classmethod
    def for_machine(
        cls,
        machine: Machine,
        reserved: SystemReservedMemory,
        affinity: AffinityStore | None = None,
        *,
        implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
        adapt_to_host: bool = False,
    ) -> MemoryManagerStatic:
        return cls(numa_memory_of(machine), reserved, affinity, implicit_from_nodes=implicit_from_nodes,
                   adapt_to_host=adapt_to_host)

    # ---- state lifecycle ------------------------------------------------------------------------

    def default_machine_state(self) -> NUMANodeMap:
        return clone_machine_state(self._default)

    def start(self, machine_state: NUMANodeMap | None = None,
              assignments: ContainerMemoryAssignments | None = None) -> None:
        """Policy Start: adopt a restored state after validateState (CheckpointError on mismatch)."""
        assignments = clone_assignments(assignments or {})
        default = self._default  # read only: validate_state and rebuild_state answer with clones
        self.host_changes = []
        try:
            self.machine_state = validate_state(machine_state or {}, assignments, default)
        except CheckpointError:
            changes = host_changes(machine_state or {}, default) if self.adapt_to_host and machine_state else []
            if not changes:
                raise
            self.machine_state = rebuild_state(default, assignments)
            held = sum(len(blocks) for containers in assignments.values() for blocks in containers.values())
            self.host_changes = [*changes, f"kept the {held} memory block(s) held" if held else "nothing was held"]
        self.assignments = assignments
        self._reusable = {}
        self._allocatable = self._compute_allocatable()

    def snapshot(self) -> MemoryManagerState:
        """A copy of the state memory_manager_state holds."""
        return MemoryManagerState(POLICY_NAME, clone_machine_state(self.machine_state),
                                  clone_assignments(self.assignments))

    def restore(self, state: MemoryManagerState) -> None:
        """Adopt a state (as snapshot() gives, or read from the file) and validate it like Start."""
        if state.policy_name != POLICY_NAME:
            raise CheckpointError(
                f'[memorymanager] configured policy "{POLICY_NAME}" differs from state checkpoint policy '
                f'"{state.policy_name}" (drain the node and delete memory_manager_state to switch policies)'
            )
        self.start(clone_machine_state(state.machine_state), state.entries)

    # ---- hints ----------------------------------------------------------------------------------

    def get_topology_hints(self, pod: Pod, container: Container) -> MemoryHints | None:
        return self._container_hints(pod, container, calculate_hints)

    def implicit_topology_hints(self, pod: Pod, container: Container) -> Mapping[str, ListOrImplicit] | None:
        return self._container_hints(pod, container, self._implicit_hints)

    def get_pod_topology_hints(self, pod: Pod) -> MemoryHints | None:
        return self._pod_hints(pod, calculate_hints)

    def implicit_pod_topology_hints(self, pod: Pod) -> Mapping[str, ListOrImplicit] | None:
        return self._pod_hints(pod, self._implicit_hints)

    def _implicit_hints(
        self, machine_state: Mapping[int, NUMANodeState], requested: Requested, reusable: ReusableMemory | None
    ) -> Mapping[str, ListOrImplicit]:
        """calculateHints, implicit on machines with many NUMA nodes (see topologymanager/provider.py)."""
        if len(machine_state) < self.implicit_from_nodes:
            return calculate_hints(machine_state, requested, reusable)
        return memory_topology_hints(machine_state, requested, reusable)

    def _container_hints(self, pod: Pod, container: Container, gen: _Gen[_M]) -> _M | None:
        if get_pod_qos(pod) != QOSClass.GUARANTEED or pod.has_pod_level_resources:
            return None  # pod-level resources: the Static policy leaves the pod alone (1.34+)
        try:
            requested = container_requested(pod, container)
        except AllocationError:
            return None  # upstream logs the error and gives no hints
        blocks = self.assignments.get(pod.uid, {}).get(container.name)
        if blocks is not None:
            return regenerate_hints(blocks, requested)
        return gen(self.machine_state, requested, self._reusable.get(pod.uid))

    def _pod_hints(self, pod: Pod, gen: _Gen[_M]) -> _M | None:
        if get_pod_qos(pod) != QOSClass.GUARANTEED or pod.has_pod_level_resources:
            return None  # pod-level resources: the Static policy leaves the pod alone (1.34+)
        try:
            requested = get_pod_requested_resources(pod)
        except AllocationError:
            return None
        # After a restart the first container found with blocks stands for the pod: its blocks are
        # checked against the *pod* totals, so a multi-container pod regenerates nil (don't care).
        containers = self.assignments.get(pod.uid, {})
        for ctn in pod.all_containers():
            blocks = containers.get(ctn.name)
            if blocks is not None:
                return regenerate_hints(blocks, requested)
        return gen(self.machine_state, requested, self._reusable.get(pod.uid))

    # ---- allocation -----------------------------------------------------------------------------

    def allocate(self, pod: Pod, container: Container) -> None:
        if get_pod_qos(pod) != QOSClass.GUARANTEED or pod.has_pod_level_resources:
            return  # upstream returns before counting a pinning request in both cases
        self.pinning_requests_total += 1
        try:
            self._allocate(pod, container)
        except AllocationError:
            self.pinning_errors_total += 1
            raise

    def _allocate(self, pod: Pod, container: Container) -> None:
        existing = self.assignments.get(pod.uid, {}).get(container.name)
        if existing is not None:
            self._update_pod_reusable_memory(pod, container, existing)
            return
        hint = self.affinity.get_affinity(pod.uid, container.name) if self.affinity else _NO_AFFINITY
        requested = container_requested(pod, container)
        # In place, where upstream works on a copy: allocate_blocks makes every check before its first
        # change, so a refusal leaves the state as it was (and the copy cost 5% of every admission).
        blocks = allocate_blocks(self.machine_state, requested, hint, self._reusable.get(pod.uid),
                                 implicit_from_nodes=self.implicit_from_nodes)
        self._update_pod_reusable_memory(pod, container, blocks)
        self.assignments.setdefault(pod.uid, {})[container.name] = clone_blocks(blocks)
        self._update_init_containers_memory_blocks(pod, container, blocks)
        self.exclusive_allocations_total += 1
        self.exclusive_blocks_total += len(blocks)

    def _update_pod_reusable_memory(self, pod: Pod, container: Container, blocks: Iterable[Block]) -> None:
        for uid in [u for u in self._reusable if u != pod.uid]:
            del self._reusable[uid]
        if _is_regular_init_container(pod, container):
            by_mask = self._reusable.setdefault(pod.uid, {})
            for b in blocks:
                per_res = by_mask.setdefault(mask_string(mask_of(b.numa_affinity)), {})
                per_res[b.type] = max(per_res.get(b.type, 0), b.size)
            return
        # App containers and sidecars consume what they reused.
        pod_reusable = self._reusable.get(pod.uid)
        if pod_reusable is None:
            return
        for b in blocks:
            left = pod_reusable.get(mask_string(mask_of(b.numa_affinity)))
            if left is None or left.get(b.type, 0) == 0:
                continue
            left[b.type] = 0 if b.size >= left[b.type] else left[b.type] - b.size

    def _update_init_containers_memory_blocks(
        self, pod: Pod, container: Container, blocks: Iterable[Block]
    ) -> None:
        """Shrink earlier regular init containers' blocks by what this container reused, so that the
        blocks of a pod sum to what it holds in the machine state (sizes may reach 0)."""
        containers = self.assignments.get(pod.uid, {})
        for block in blocks:
            size = block.size
            for init in pod.init_containers:
                if init.name == container.name or size == 0:
                    break
                if is_restartable(init):
                    continue
                for ib in containers.get(init.name) or []:
                    if ib.size == 0 or ib.type != block.type:
                        continue
                    if mask_of(ib.numa_affinity) != mask_of(block.numa_affinity):
                        continue
                    if ib.size > size:
                        ib.size -= size
                        size = 0
                    else:
                        size -= ib.size
                        ib.size = 0

    # ---- release --------------------------------------------------------------------------------

    def add_container(self, pod: Pod, container: Container) -> None:
        """Manager AddContainer: once `container` starts, every earlier regular init container has run
        to completion, so its memory goes back to the node (sidecars keep theirs)."""
        for init in pod.init_containers:
            if init.name == container.name:
                break
            if is_restartable(init):
                continue
            self.remove_container(pod.uid, init.name)

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        containers = self.assignments.get(pod_uid)
        if containers is None or container_name not in containers:
            return
        blocks = containers.pop(container_name)
        if not containers:
            del self.assignments[pod_uid]
        release_blocks(self.machine_state, blocks)

    def remove_stale_state(self, active_pods: Iterable[Pod]) -> list[tuple[str, str]]:
        """Drop the state of containers that no active pod has; returns what was removed."""
        active = {p.uid: {c.name for c in p.all_containers()} for p in active_pods}
        stale = [
            (uid, name)
            for uid, containers in self.assignments.items()
            for name in containers
            if name not in active.get(uid, set())
        ]
        for uid, name in stale:
            self.remove_container(uid, name)
        return stale

    # ---- queries --------------------------------------------------------------------------------

    def get_memory(self, pod_uid: str, container_name: str) -> list[Block] | None:
        blocks = self.assignments.get(pod_uid, {}).get(container_name)
        return None if blocks is None else clone_blocks(blocks)

    def get_memory_numa_nodes(self, pod: Pod, container: Container) -> set[int] | None:
        """The NUMA nodes for cpuset.mems: the union of the container's block affinities, or None."""
        nodes = {n for b in self.assignments.get(pod.uid, {}).get(container.name) or [] for n in b.numa_affinity}
        return nodes or None

    def get_allocatable_memory(self) -> list[Block]:
        """One block per (node, resource) with allocatable > 0, as computed at start (upstream caches it)."""
        return clone_blocks(self._allocatable)

    def _compute_allocatable(self) -> list[Block]:
        return [
            Block([nid], r, node.memory_map[r].allocatable)
            for nid, node in sorted(self.machine_state.items())
            for r in sorted(node.memory_map)
            if node.memory_map[r].allocatable > 0
        ]


def _is_regular_init_container(pod: Pod, container: Container) -> bool:
    for init in pod.init_containers:
        if init.name == container.name:
            return not is_restartable(init)
    return False


# upstream: var _ Policy = &staticPolicy{} (checked by mypy, free at run time)
_conforms: type[HintProvider] = MemoryManagerStatic
_conforms_implicit: type[ImplicitHintProvider] = MemoryManagerStatic
