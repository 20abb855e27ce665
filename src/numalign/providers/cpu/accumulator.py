"""The cpuAccumulator and takeByTopologyNUMAPacked of upstream cpu_assignment.go (spec §1.6.1-§1.6.2).

takeByTopologyNUMAPacked is a best-fit walk over whole NUMA nodes / sockets, uncore caches, whole
cores, then single threads; every list is sorted by the number of *free* CPUs ascending (fullest
first), ties by id. Upstream's quirks are kept: lists are recomputed from the free CPUs exactly
where upstream recomputes them, and a list may name an element twice when it spans two parents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from numalign.errors import AllocationError
from numalign.providers.cpu.topology import CPUTopology

PACKED = "packed"
SPREAD = "spread"


def not_enough_cpus(requested: int, available: int) -> AllocationError:
    return AllocationError(
        f"not enough cpus available to satisfy request: requested={requested}, available={available}"
    )


class CPUAccumulator:
    """Upstream cpuAccumulator: the free CPUs, what is still needed, and what was taken."""

    def __init__(self, topo: CPUTopology, available: Iterable[int], n: int, strategy: str) -> None:
        self.topo = topo
        self.free = topo.keep_only(available)
        self.needed = n
        self.result: set[int] = set()
        self.numa_first = topo.num_sockets >= topo.num_numa_nodes
        self.spread = strategy == SPREAD

    # --- state --------------------------------------------------------------------------
    def take(self, cpus: Iterable[int]) -> None:
        got = frozenset(cpus)
        self.result |= got
        self.free = self.free.keep_only(self.free.cpus() - got)
        # Upstream subtracts the size of what it was handed, even if some were taken already.
        self.needed -= len(got)

    def needs_at_least(self, k: int) -> bool:
        return self.needed >= k

    def is_satisfied(self) -> bool:
        return self.needed < 1

    def is_failed(self) -> bool:
        return self.needed > len(self.free)

    # --- orderings ----------------------------------------------------------------------
    def _sort(self, ids: Iterable[int], free_of: Callable[[int], frozenset[int]]) -> list[int]:
        return sorted(ids, key=lambda i: (len(free_of(i)), i))

    def sort_numa_nodes(self) -> list[int]:
        f = self.free
        if self.numa_first:
            return self._sort(f.numa_nodes(), f.cpus_in_numa_nodes)
        out: list[int] = []
        for socket in self.sort_sockets():
            out += self._sort(f.numa_nodes_in_sockets(socket), f.cpus_in_numa_nodes)
        return out

    def sort_sockets(self) -> list[int]:
        f = self.free
        if not self.numa_first:
            return self._sort(f.sockets(), f.cpus_in_sockets)
        out: list[int] = []
        for numa in self.sort_numa_nodes():
            out += self._sort(f.sockets_in_numa_nodes(numa), f.cpus_in_sockets)
        return out

    def sort_cores(self) -> list[int]:
        f = self.free
        out: list[int] = []
        if self.numa_first:
            for socket in self.sort_sockets():
                out += self._sort(f.cores_in_sockets(socket), f.cpus_in_cores)
        else:
            for numa in self.sort_numa_nodes():
                out += self._sort(f.cores_in_numa_nodes(numa), f.cpus_in_cores)
        return out

    def sort_uncore_caches(self) -> list[int]:
        f = self.free
        out: list[int] = []
        for numa in self.sort_numa_nodes():
            out += self._sort(f.uncore_in_numa_nodes(numa), f.cpus_in_uncore_caches)
        return out

    def sort_cpus(self) -> list[int]:
        """availableCPUSorter: packed = core by core; spread = socket by socket, ascending ids."""
        f = self.free
        out: list[int] = []
        if self.spread:
            for socket in self.sort_sockets():
                out += sorted(f.cpus_in_sockets(socket))
        else:
            for core in self.sort_cores():
                out += sorted(f.cpus_in_cores(core))
        return out

    # --- whole elements -----------------------------------------------------------------
    def free_numa_nodes(self) -> list[int]:
        all_ = self.topo.details
        return [
            n for n in self.sort_numa_nodes()
            if len(self.free.cpus_in_numa_nodes(n)) == len(all_.cpus_in_numa_nodes(n))
        ]

    def free_sockets(self) -> list[int]:
        per = self.topo.cpus_per_socket()
        return [s for s in self.sort_sockets() if len(self.free.cpus_in_sockets(s)) == per]

    def free_uncore_caches(self) -> list[int]:
        all_ = self.topo.details
        return [
            u for u in self.sort_uncore_caches()
            if len(self.free.cpus_in_uncore_caches(u)) == len(all_.cpus_in_uncore_caches(u))
        ]

    def free_cores(self) -> list[int]:
        per = self.topo.cpus_per_core()
        return [c for c in self.sort_cores() if len(self.free.cpus_in_cores(c)) == per]

    def take_full_numa_nodes(self) -> None:
        for numa in self.free_numa_nodes():
            cpus = self.topo.details.cpus_in_numa_nodes(numa)
            if self.needs_at_least(len(cpus)):
                self.take(cpus)

    def take_full_sockets(self) -> None:
        for socket in self.free_sockets():
            cpus = self.topo.details.cpus_in_sockets(socket)
            if self.needs_at_least(len(cpus)):
                self.take(cpus)

    def take_full_first_level(self) -> None:
        if self.numa_first:
            self.take_full_numa_nodes()
        else:
            self.take_full_sockets()

    def take_full_second_level(self) -> None:
        if self.numa_first:
            self.take_full_sockets()
        else:
            self.take_full_numa_nodes()

    def take_full_uncore(self) -> None:
        for uncore in self.free_uncore_caches():
            cpus = self.topo.details.cpus_in_uncore_caches(uncore)
            if self.needs_at_least(len(cpus)):
                self.take(cpus)

    def take_partial_uncore(self, uncore: int) -> None:
        per_core = self.topo.cpus_per_core()
        cores_needed = (self.needed + per_core - 1) // per_core  # ceil (v1.32 had floor)
        cores = self.free.cores_needed_in_uncore_cache(cores_needed, uncore)
        cpus = self.free.cpus_in_cores(*cores)
        # Newer rule: an odd remainder on SMT needs one thread of the last core, not both.
        if self.needed % 2 != 0 and per_core > 1:
            ordered = sorted(cpus)
            if len(ordered) > self.needed:
                ordered = ordered[:-1]
            cpus = frozenset(ordered)
        if self.needed == len(cpus):
            self.take(cpus)

    def take_uncore_cache(self) -> None:
        per_uncore = self.topo.cpus_per_uncore()
        for uncore in self.sort_uncore_caches():
            if self.needs_at_least(per_uncore):
                self.take_full_uncore()
            if self.is_satisfied():
                return
            self.take_partial_uncore(uncore)
            if self.is_satisfied():
                return

    def take_full_cores(self) -> None:
        for core in self.free_cores():
            cpus = self.topo.details.cpus_in_cores(core)
            if self.needs_at_least(len(cpus)):
                self.take(cpus)

    def take_remaining_cpus(self) -> None:
        for cpu in self.sort_cpus():
            self.take((cpu,))
            if self.is_satisfied():
                return


def take_by_topology_numa_packed(
    topo: CPUTopology,
    available: Iterable[int],
    n: int,
    strategy: str = PACKED,
    prefer_align_by_uncore_cache: bool = False,
) -> frozenset[int]:
    """Upstream takeByTopologyNUMAPacked (spec §1.6.2)."""
    avail = frozenset(available)
    acc = CPUAccumulator(topo, avail, n, strategy)
    if acc.is_satisfied():
        return frozenset()
    if acc.is_failed():
        raise not_enough_cpus(n, len(avail))
    acc.take_full_first_level()
    if acc.is_satisfied():
        return frozenset(acc.result)
    acc.take_full_second_level()
    if acc.is_satisfied():
        return frozenset(acc.result)
    if prefer_align_by_uncore_cache:
        acc.take_uncore_cache()
        if acc.is_satisfied():
            return frozenset(acc.result)
    if strategy != SPREAD:
        acc.take_full_cores()
        if acc.is_satisfied():
            return frozenset(acc.result)
    acc.take_remaining_cpus()
    if acc.is_satisfied():
        return frozenset(acc.result)
    raise AllocationError("failed to allocate cpus")
