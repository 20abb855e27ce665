"""reservedMemory: validation against Node Allocatable and conversion to per-NUMA bytes.

Upstream memory_manager.go (getTotalMemoryTypeReserved, validateReservedMemory, convertReserved,
getSystemReservedMemory) and the node-allocatable reservation the container manager computes
(GetNodeAllocatableReservation). Messages are upstream's, verbatim; they already name the values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from numalign.errors import ConfigError
from numalign.k8s.quantity import Quantity
from numalign.kubelet.memorymanager.state import is_memory_resource


class ReservedMemoryMismatchError(ConfigError):
    """validateReservedMemory's total mismatch; str() is the kubelet's text, verbatim."""

    def __init__(self, message: str, *, resource: str, allocatable: Quantity, node: int = 0) -> None:
        super().__init__(message)
        self.resource = resource
        self.allocatable = allocatable
        self.node = node  # a NUMA node of the machine, for the example

    def fix(self) -> str:
        """How to make the kubelet accept the configuration."""
        r, total = self.resource, self.allocatable
        if total.is_zero():
            return (
                f"the Node Allocatable reservation of {r} (kube-reserved + system-reserved + eviction-hard) "
                f"is 0, so remove the reservedMemory (--reserved-memory) limits of type {r}"
            )
        return (
            f"reservedMemory (--reserved-memory) limits of type {r}, summed over all NUMA nodes, must equal "
            f"kube-reserved + system-reserved + eviction-hard for {r} = {total} "
            f"(e.g. --reserved-memory={self.node}:{r}={total})"
        )


@dataclass(frozen=True)
class MemoryReservation:
    """KubeletConfiguration `reservedMemory[i]`: {numaNode, limits}."""

    numa_node: int
    limits: Mapping[str, Quantity] = field(default_factory=dict)


def node_allocatable_reservation(
    resources: Iterable[str],
    system_reserved: Mapping[str, Quantity] | None = None,
    kube_reserved: Mapping[str, Quantity] | None = None,
    eviction_reservation: Mapping[str, Quantity] | None = None,
) -> dict[str, Quantity]:
    """GetNodeAllocatableReservation over the machine's capacity `resources`: per resource
    systemReserved + kubeReserved + the hard-eviction reservation (for memory: the resolved
    `memory.available` threshold), zero entries left out."""
    out: dict[str, Quantity] = {}
    zero = Quantity.from_int(0)
    for r in resources:
        value = zero
        for source in (system_reserved, kube_reserved, eviction_reservation):
            if source is not None and r in source:
                value = value + source[r]
        if not value.is_zero():
            out[r] = value
    return out


def _total_reserved_by_type(
    numa_nodes: Iterable[int], reserved_memory: Iterable[MemoryReservation]
) -> dict[str, Quantity]:
    known = set(numa_nodes)
    totals: dict[str, Quantity] = {}
    for reservation in reserved_memory:
        if reservation.numa_node not in known:
            raise ConfigError(
                f"the reserved memory configuration references a NUMA node {reservation.numa_node} "
                "that does not exist on this machine"
            )
        for r, q in reservation.limits.items():
            # Go's q.Add(total): the format of this reservation wins unless it is zero.
            totals[r] = q + totals[r] if r in totals else q
    return totals


def validate_reserved_memory(
    numa_nodes: Iterable[int],
    node_allocatable_reservation: Mapping[str, Quantity],
    reserved_memory: Iterable[MemoryReservation],
) -> None:
    """Upstream validateReservedMemory: for `memory` and every hugepage size named on either side,
    Σ reservedMemory over NUMA nodes must equal the Node Allocatable reservation. Resource types are
    checked in sorted order (upstream's order is Go map order)."""
    numa_nodes = list(numa_nodes)
    reserved_memory = list(reserved_memory)
    totals = _total_reserved_by_type(numa_nodes, reserved_memory)
    types = set(totals) | {r for r in node_allocatable_reservation if is_memory_resource(r)}
    zero = Quantity.from_int(0)
    for r in sorted(types):
        allocatable = zero + node_allocatable_reservation[r] if r in node_allocatable_reservation else zero
        reserved = zero + totals[r] if r in totals else zero
        if allocatable != reserved:
            raise ReservedMemoryMismatchError(
                f'the total amount "{reserved}" of type "{r}" is not equal to the value "{allocatable}" '
                "determined by Node Allocatable feature",
                resource=r,
                allocatable=allocatable,
                node=min(numa_nodes, default=0),
            )


def convert_reserved(
    numa_nodes: Iterable[int], reserved_memory: Iterable[MemoryReservation]
) -> dict[int, dict[str, int]]:
    """Upstream convertReserved: NUMA id -> resource -> bytes, an empty map for every machine node."""
    out: dict[int, dict[str, int]] = {n: {} for n in numa_nodes}
    for reservation in reserved_memory:
        for r, q in reservation.limits.items():
            value = q.as_int64()
            if value is None:
                raise ConfigError(
                    f"could not covert a variable of type Quantity to int64 (reservedMemory NUMA node "
                    f"{reservation.numa_node}, {r}: {q}); give a whole number of bytes"
                )
            out.setdefault(reservation.numa_node, {})[r] = value
    return out


def get_system_reserved_memory(
    numa_nodes: Iterable[int],
    node_allocatable_reservation: Mapping[str, Quantity],
    reserved_memory: Iterable[MemoryReservation],
) -> dict[int, dict[str, int]]:
    """Upstream getSystemReservedMemory: validate, then convert."""
    numa_nodes = list(numa_nodes)
    reserved_memory = list(reserved_memory)
    try:
        validate_reserved_memory(numa_nodes, node_allocatable_reservation, reserved_memory)
    except ReservedMemoryMismatchError as exc:
        # The kubelet's text first (logs and tests match on it), then the fix it does not give.
        raise ConfigError(f"{exc}; fix: {exc.fix()}") from None
    return convert_reserved(numa_nodes, reserved_memory)
