"""CPU assignment entry points: upstream staticPolicy.takeByTopology (spec §1.6) and allocateCPUs (§1.5).

The algorithms live in accumulator.py (packed) and distributed.py (KEP-2902); this module picks one
from the policy options and implements the aligned-first allocation and the full-pcpus-only checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from numalign.core.bitmask import bits_of
from numalign.errors import AllocationError
from numalign.kubelet.cpumanager.accumulator import (
    PACKED,
    SPREAD,
    CPUAccumulator,
    not_enough_cpus,
    take_by_topology_numa_packed,
)
from numalign.kubelet.cpumanager.distributed import standard_deviation, take_by_topology_numa_distributed
from numalign.kubelet.cpumanager.topology import CPUTopology

__all__ = [
    "PACKED",
    "SPREAD",
    "Allocated",
    "CPUAccumulator",
    "TakeOptions",
    "aligned_cpus",
    "allocate_cpus",
    "allocate_cpus_kept",
    "not_enough_cpus",
    "smt_alignment_error",
    "standard_deviation",
    "take_by_topology",
    "take_by_topology_numa_distributed",
    "take_by_topology_numa_packed",
]


@dataclass(frozen=True, slots=True)
class TakeOptions:
    """The policy options that steer takeByTopology and allocateCPUs, and what the kubelet release
    decided as does differently there (numalign.kubelet.versions.Behaviours; defaults: the default
    release's)."""

    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    distribute_cpus_across_cores: bool = False
    prefer_align_cpus_by_uncorecache: bool = False
    align_by_socket: bool = False
    # k/k #131850 (1.34+): odd requests fit a partial uncore cache on SMT machines
    uncore_rounds_up: bool = True
    # k/k #139778 (kubelet 1.37+): the distributed allocation reads align_by_socket too.
    distributed_by_socket: bool = False
    # k/k #140730 (1.38): remainder subsets need whole groups; without it the kubelet hangs (KUBELET_HANGS)
    distributed_whole_groups: bool = False
    # k/k #139456 (1.38): the aligned take spreads over at least the affinity's NUMA node count
    distributed_min_numas_from_hint: bool = False
    # <= 1.37: kept combinations alias later ones (Go append); 1.38 hands each over as a copy
    go_slice_aliasing: bool = True

    # Written out: the dataclass decorator's generated __eq__ and __hash__ run as interpreted Python in
    # the compiled core, and allocate_cpus_kept hashes the options in its memo's key at every Allocate.
    def fields(self) -> tuple[bool, ...]:
        """Every field, in declaration order (what equality and the hash read)."""
        return (self.full_pcpus_only, self.distribute_cpus_across_numa, self.distribute_cpus_across_cores,
                self.prefer_align_cpus_by_uncorecache, self.align_by_socket, self.uncore_rounds_up,
                self.distributed_by_socket, self.distributed_whole_groups, self.distributed_min_numas_from_hint,
                self.go_slice_aliasing)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TakeOptions):
            return NotImplemented
        return self.fields() == other.fields()

    def __hash__(self) -> int:
        return hash(self.fields())


def take_by_topology(
    topo: CPUTopology, available: Iterable[int], n: int, options: TakeOptions, min_numas_from_hint: int = 0
) -> frozenset[int]:
    """Upstream staticPolicy.takeByTopology: the dispatcher of spec §1.6."""
    strategy = SPREAD if options.distribute_cpus_across_cores else PACKED
    if options.distribute_cpus_across_numa:
        group = topo.cpus_per_core() if options.full_pcpus_only else 1
        return take_by_topology_numa_distributed(
            topo, available, n, group, strategy,
            align_by_socket=options.align_by_socket and options.distributed_by_socket,
            whole_groups_remainder=options.distributed_whole_groups,
            min_numas_from_hint=min_numas_from_hint if options.distributed_min_numas_from_hint else 0,
            go_slice_aliasing=options.go_slice_aliasing,
        )
    return take_by_topology_numa_packed(
        topo, available, n, strategy, options.prefer_align_cpus_by_uncorecache, options.uncore_rounds_up
    )


def smt_alignment_error(
    topo: CPUTopology, num_cpus: int, available_physical_cpus: int
) -> AllocationError | None:
    """The full-pcpus-only checks of Allocate; None when the request passes them."""
    per_core = topo.cpus_per_core()
    if per_core and num_cpus % per_core != 0:
        return AllocationError(
            f"SMT Alignment Error: requested {num_cpus} cpus not multiple cpus per core = {per_core}",
            reason="SMTAlignmentError",
        )
    if num_cpus > available_physical_cpus:
        return AllocationError(
            "SMT Alignment Error: not enough free physical CPUs: "
            f"available physical CPUs = {available_physical_cpus}, requested CPUs = {num_cpus}, "
            f"CPUs per core = {per_core}",
            reason="SMTAlignmentError",
        )
    return None


def aligned_cpus(
    topo: CPUTopology, numa_affinity: int, allocatable: frozenset[int], align_by_socket: bool
) -> frozenset[int]:
    """Upstream getAlignedCPUs: allocatable CPUs on the mask's NUMA nodes (or whole sockets)."""
    nodes = bits_of(numa_affinity)
    if align_by_socket:
        sockets = topo.details.sockets_in_numa_nodes(*nodes)
        return allocatable & topo.details.cpus_in_sockets(*sockets)
    return allocatable & topo.details.cpus_in_numa_nodes(*nodes)


def allocate_cpus(
    topo: CPUTopology,
    num_cpus: int,
    numa_affinity: int | None,
    available: Iterable[int],
    reusable: Iterable[int],
    options: TakeOptions,
) -> frozenset[int]:
    """Upstream allocateCPUs minus the state update: aligned CPUs first, then the rest.

    `available` is defaultCpuSet minus reserved; the caller removes the result from the pool.
    """
    allocatable = frozenset(available) | frozenset(reusable)
    result: frozenset[int] = frozenset()
    if numa_affinity is not None:
        aligned = aligned_cpus(topo, numa_affinity, allocatable, options.align_by_socket)
        result = take_by_topology(topo, aligned, min(num_cpus, len(aligned)), options, numa_affinity.bit_count())
    rest = take_by_topology(topo, allocatable - result, num_cpus - len(result), options)
    return result | rest


# allocate_cpus' answers kept per topology (topo.derived[_ALLOCATED]), as generate_cpu_topology_hints'
# are: the same request on the same free CPUs gets the same CPUs, and a node (or a fleet's nodes of one
# machine) meets the same free sets again and again. Bounded: cleared when full.
_ALLOCATED = "allocate_cpus"
ALLOCATED_KEPT = 1024


class Allocated:
    """What allocate_cpus_kept answers: the CPUs, as a set and as a mask, and whether they share one uncore
    cache (CPUTopology.check_alignment_uncore, which the policy counts at every allocation)."""

    __slots__ = ("cpus", "mask", "uncore_aligned")

    def __init__(self, cpus: frozenset[int], mask: int, uncore_aligned: bool) -> None:
        self.cpus = cpus
        self.mask = mask
        self.uncore_aligned = uncore_aligned


def allocate_cpus_kept(
    topo: CPUTopology,
    num_cpus: int,
    numa_affinity: int | None,
    available: int,
    reusable: int,
    options: TakeOptions,
) -> Allocated:
    """allocate_cpus of the CPU sets given as masks (CPUTopology.mask_of), answered from what it answered
    before for the same arguments (it is a pure function of them; a request it refuses raises every time and
    is not kept)."""
    memo: dict[tuple[int, int | None, int, int, TakeOptions], Allocated] | None = topo.derived.get(_ALLOCATED)
    if memo is None:
        memo = topo.derived[_ALLOCATED] = {}
    key = (num_cpus, numa_affinity, available, reusable, options)
    got = memo.get(key)
    if got is None:
        cpus = allocate_cpus(topo, num_cpus, numa_affinity, topo.cpus_of(available), topo.cpus_of(reusable), options)
        got = Allocated(cpus, topo.mask_of(cpus), topo.check_alignment_uncore(cpus))
        if len(memo) >= ALLOCATED_KEPT:
            memo.clear()
        memo[key] = got
    return got
