"""Memory manager construction (upstream NewManager) and the `None` policy.

`memoryManagerPolicy` is `None` (the default) or `Static`, case-sensitive. Static needs reservedMemory
that matches the node-allocatable reservation (reserved.validate_reserved_memory).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalign.core.policies.startup import refuse_static_memory_on_node_minus_one
from numalign.errors import CheckpointError, ConfigError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.resources import RESOURCE_MEMORY
from numalign.kubelet.memorymanager.hints import MemoryHints
from numalign.kubelet.memorymanager.policy import MemoryPolicy
from numalign.kubelet.memorymanager.policy_static import MemoryManagerStatic
from numalign.kubelet.memorymanager.reserved import MemoryReservation, get_system_reserved_memory
from numalign.kubelet.memorymanager.state import Block, ContainerMemoryAssignments, MemoryManagerState, NUMANodeMap
from numalign.kubelet.topologymanager.provider import DEFAULT_IMPLICIT_FROM_NODES, AffinityStore
from numalign.machine.topology import Machine

POLICY_NONE = "None"
POLICY_STATIC = "Static"


class MemoryManagerNone:
    """The `None` policy: no hints, no pinning; its state file holds only the policy name. A null
    MemoryPolicy: no machine state, no assignments, nothing counted."""

    name = "memory"
    policy_name = POLICY_NONE
    pins = False
    host_changes: tuple[str, ...] = ()  # the None policy keeps no machine state to adapt
    pinning_requests_total = 0
    pinning_errors_total = 0

    @property
    def machine_state(self) -> NUMANodeMap:
        return {}

    @property
    def assignments(self) -> ContainerMemoryAssignments:
        return {}

    def start(self) -> None:
        return None  # nothing to validate: the None policy keeps no machine state

    def get_topology_hints(self, pod: Pod, container: Container) -> MemoryHints | None:
        return None

    def get_pod_topology_hints(self, pod: Pod) -> MemoryHints | None:
        return None

    def allocate(self, pod: Pod, container: Container) -> None:
        return None

    def add_container(self, pod: Pod, container: Container) -> None:
        return None

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        return None

    def remove_stale_state(self, active_pods: Iterable[Pod]) -> list[tuple[str, str]]:
        return []

    def get_memory(self, pod_uid: str, container_name: str) -> list[Block] | None:
        return None

    def get_memory_numa_nodes(self, pod: Pod, container: Container) -> set[int] | None:
        return None

    def get_allocatable_memory(self) -> list[Block]:
        return []

    def snapshot(self) -> MemoryManagerState:
        return MemoryManagerState(POLICY_NONE)

    def restore(self, state: MemoryManagerState) -> None:
        policy = state.policy_name
        if policy != POLICY_NONE:
            raise CheckpointError(
                f'[memorymanager] configured policy "{POLICY_NONE}" differs from state checkpoint policy '
                f'"{policy}" (drain the node and delete memory_manager_state to switch policies)'
            )


# upstream: var _ Policy = &none{} (and &staticPolicy{})
_conforms: tuple[type[MemoryPolicy], ...] = (MemoryManagerNone, MemoryManagerStatic)


def new_memory_manager(
    policy_name: str,
    machine: Machine,
    node_allocatable_reservation: Mapping[str, Quantity],
    reserved_memory: Iterable[MemoryReservation],
    affinity: AffinityStore | None = None,
    *,
    implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
    adapt_to_host: bool = False,
) -> MemoryPolicy:
    """Upstream NewManager: the named policy over `machine`, with reservedMemory checked against the
    node-allocatable reservation for Static."""
    if policy_name == POLICY_NONE:
        return MemoryManagerNone()
    if policy_name == POLICY_STATIC:
        reserved = get_system_reserved_memory(machine.numa_ids(), node_allocatable_reservation, reserved_memory)
        if any(r.get(RESOURCE_MEMORY, 0) > 0 for r in reserved.values()):  # else NewPolicyStatic's own error
            refuse_static_memory_on_node_minus_one(machine.numa_ids())  # starts, then panics: refused here
        return MemoryManagerStatic.for_machine(machine, reserved, affinity, implicit_from_nodes=implicit_from_nodes,
                                              adapt_to_host=adapt_to_host)
    raise ConfigError(
        f'unknown policy: "{policy_name}" (memoryManagerPolicy must be "None" or "Static", case-sensitive)'
    )
