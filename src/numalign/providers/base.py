"""The contract between the Topology Manager and its hint providers (upstream HintProvider)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.k8s.pod import Container, Pod


class AffinityStore(Protocol):
    """What providers read back at Allocate time: the merged hint stored for a container."""

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint: ...


@runtime_checkable
class HintProvider(Protocol):
    """A resource manager the Topology Manager coordinates (CPU, memory, devices).

    get_*_hints return None / {} for "no preference"; a resource mapped to None means "don't care",
    mapped to [] means "cannot be satisfied". `allocate` raises numalign.errors.AllocationError
    (with `reason` set for errors that carry a kubelet Type(), e.g. SMTAlignmentError).
    """

    name: str

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints: ...

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints: ...

    def allocate(self, pod: Pod, container: Container) -> None: ...

    def remove_container(self, pod_uid: str, container_name: str) -> None: ...
