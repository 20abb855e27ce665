"""The CPU manager policy contract (upstream cpumanager's Policy interface, policy.go).

`static` (policy_static.StaticPolicy) and `none` (manager.NonePolicy) both satisfy it, so callers
read a node's CPU manager through this one type. `none` is a null object: no hints, no exclusive
CPUs, empty state, zero counters; `pins` says whether the policy gives containers exclusive CPUs,
for the views (free capacity, occupancy, gauges) that only mean something when it does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from numalign.core.hint import ProviderHints
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.cpumanager.options import StaticPolicyOptions
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.cpumanager.topology import CPUTopology


class CPUPolicy(Protocol):
    """What a Node and the views above kubelet/ use of the CPU manager's policy."""

    name: str  # the hint provider's name ("cpu")

    @property
    def policy_name(self) -> str: ...  # cpuManagerPolicy: "none" or "static"

    @property
    def pins(self) -> bool: ...  # True when containers can get exclusive CPUs (static)

    @property
    def topology(self) -> CPUTopology: ...

    @property
    def options(self) -> StaticPolicyOptions: ...  # none: the defaults (every option off)

    @property
    def reserved_cpus(self) -> frozenset[int]: ...

    @property
    def pinning_requests_total(self) -> int: ...

    @property
    def pinning_errors_total(self) -> int: ...

    def start(self, state: CPUManagerState | None = None) -> None: ...

    def restore(self, state: CPUManagerState) -> None: ...

    def snapshot(self) -> CPUManagerState: ...

    def get_cpu_set(self, pod_uid: str, container_name: str) -> frozenset[int] | None: ...

    def cpus_for_container(self, pod_uid: str, container_name: str) -> frozenset[int]: ...

    def get_allocatable_cpus(self) -> frozenset[int]: ...

    def get_available_cpus(self) -> frozenset[int]: ...

    def get_default_cpu_set(self) -> frozenset[int]: ...

    def get_exclusive_cpus(self, pod_uid: str, container_name: str) -> frozenset[int]: ...

    def allocated_per_numa(self) -> dict[int, int]: ...

    def remove_stale_state(
        self, active_pods: Iterable[Pod], pending_pod: Pod | None = None
    ) -> list[tuple[str, str]]: ...

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints: ...

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints: ...

    def allocate(self, pod: Pod, container: Container) -> None: ...

    def remove_container(self, pod_uid: str, container_name: str) -> None: ...
