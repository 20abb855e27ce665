"""The memory manager policy contract (upstream memorymanager's Policy interface, policy.go).

`Static` (policy_static.MemoryManagerStatic) and `None` (manager.MemoryManagerNone) both satisfy it,
so callers read a node's memory manager through this one type. `None` is a null object: no hints, no
blocks, an empty machine state, zero counters; `pins` says whether the policy places containers'
memory on NUMA nodes, for the views that only mean something when it does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from numalign.k8s.pod import Container, Pod
from numalign.kubelet.memorymanager.hints import MemoryHints
from numalign.kubelet.memorymanager.state import Block, ContainerMemoryAssignments, MemoryManagerState, NUMANodeMap


class MemoryPolicy(Protocol):
    """What a Node and the views above kubelet/ use of the memory manager's policy."""

    name: str  # the hint provider's name ("memory")

    @property
    def policy_name(self) -> str: ...  # memoryManagerPolicy: "None" or "Static"

    @property
    def pins(self) -> bool: ...  # True when containers' memory is placed on NUMA nodes (Static)

    @property
    def host_changes(self) -> Sequence[str]: ...  # what a state adapted to a changed host says

    @property
    def machine_state(self) -> NUMANodeMap: ...  # None: empty

    @property
    def assignments(self) -> ContainerMemoryAssignments: ...  # None: empty

    @property
    def pinning_requests_total(self) -> int: ...

    @property
    def pinning_errors_total(self) -> int: ...

    def start(self) -> None: ...

    def restore(self, state: MemoryManagerState) -> None: ...

    def snapshot(self) -> MemoryManagerState: ...

    def get_topology_hints(self, pod: Pod, container: Container) -> MemoryHints | None: ...

    def get_pod_topology_hints(self, pod: Pod) -> MemoryHints | None: ...

    def allocate(self, pod: Pod, container: Container) -> None: ...

    def add_container(self, pod: Pod, container: Container) -> None: ...

    def remove_container(self, pod_uid: str, container_name: str) -> None: ...

    def remove_stale_state(self, active_pods: Iterable[Pod]) -> list[tuple[str, str]]: ...

    def get_memory(self, pod_uid: str, container_name: str) -> list[Block] | None: ...

    def get_memory_numa_nodes(self, pod: Pod, container: Container) -> set[int] | None: ...

    def get_allocatable_memory(self) -> list[Block]: ...
