"""The cpuAccumulator and takeByTopologyNUMAPacked of upstream cpu_assignment.go (spec §1.6.1-§1.6.2).

takeByTopologyNUMAPacked is a best-fit walk over whole NUMA nodes / sockets, uncore caches, whole
cores, then single threads; every list is sorted by the number of *free* CPUs ascending (fullest
first), ties by id. Upstream's quirks are kept: lists are recomputed from the free CPUs exactly
where upstream recomputes them, and a list may name an element twice when it spans two parents.
"""

from __future__ import annotations

from collections.abc import Iterable

from numalign.errors import AllocationError
from numalign.kubelet.cpumanager.topology import CPUTopology

PACKED = "packed"
SPREAD = "spread"
# takeByTopologyNUMAPacked's answers kept per topology (topo.derived[_TAKEN]); cleared when full.
_TAKEN = "take_by_topology_numa_packed"
TAKEN_KEPT = 8192


def not_enough_cpus(requested: int, available: int) -> AllocationError:
    return AllocationError(
        f"not enough cpus available to satisfy request: requested={requested}, available={available}"
    )


class CPUAccumulator:
    """Upstream cpuAccumulator: the free CPUs, what is still needed, and what was taken."""

    def __init__(
        self, topo: CPUTopology, available: Iterable[int], n: int, strategy: str, uncore_rounds_up: bool = True
    ) -> None:
        self.topo = topo
        # k/k #131850 (kubelet 1.34+): takePartialUncore rounds the cores needed up and drops the last
        # thread for an odd remainder on SMT; 1.33 rounds down (an odd request never fits an uncore cache).
        self.uncore_rounds_up = uncore_rounds_up
        self.free = topo.keep_only(available)
        self.needed = n
        self.result: set[int] = set()
        self.numa_first = topo.num_sockets >= topo.num_numa_nodes
        self.spread = strategy == SPREAD

    # --- state --------------------------------------------------------------------------
    def take(self, cpus: Iterable[int]) -> None:
        got = frozenset(cpus)
        self.result |= got
        self.free = self.free.without(got)
        # Upstream subtracts the size of what it was handed, even if some were taken already.
        self.needed -= len(got)

    def needs_at_least(self, k: int) -> bool:
        return self.needed >= k

    def is_satisfied(self) -> bool:
        return self.needed < 1

    def is_failed(self) -> bool:
        return self.needed > len(self.free)

    # --- orderings ----------------------------------------------------------------------
    def _sort(self, ids: Iterable[int], attr: str) -> list[int]:
        """Upstream sort(): ascending by free CPUs in the element, ties by ascending id."""
        counts = self.free.counts(attr)
        # sorted as (count, id) pairs: a key function would be a closure, a cycle in the compiled core
        pairs = sorted([(counts.get(i, 0), i) for i in ids])
        return [i for _, i in pairs]

    def sort_numa_nodes(self) -> list[int]:
        f = self.free
        if self.numa_first:
            return self._sort(f.numa_nodes(), "numa_node")
        out: list[int] = []
        for socket in self.sort_sockets():
            out += self._sort(f.numa_nodes_in_sockets(socket), "numa_node")
        return out

    def sort_sockets(self) -> list[int]:
        f = self.free
        if not self.numa_first:
            return self._sort(f.sockets(), "socket")
        out: list[int] = []
        for numa in self.sort_numa_nodes():
            out += self._sort(f.sockets_in_numa_nodes(numa), "socket")
        return out

    def sort_cores(self) -> list[int]:
        f = self.free
        out: list[int] = []
        if self.numa_first:
            for socket in self.sort_sockets():
                out += self._sort(f.cores_in_sockets(socket), "core")
        else:
            for numa in self.sort_numa_nodes():
                out += self._sort(f.cores_in_numa_nodes(numa), "core")
        return out

    def sort_uncore_caches(self) -> list[int]:
        f = self.free
        out: list[int] = []
        for numa in self.sort_numa_nodes():
            out += self._sort(f.uncore_in_numa_nodes(numa), "uncore")
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
        free, total = self.free.counts("numa_node"), self.topo.details.counts("numa_node")
        return [n for n in self.sort_numa_nodes() if free.get(n, 0) == total.get(n, 0)]

    def free_sockets(self) -> list[int]:
        # Upstream compares with CPUsPerSocket (NumCPUs / NumSockets), not the socket's own size.
        per, free = self.topo.cpus_per_socket(), self.free.counts("socket")
        return [s for s in self.sort_sockets() if free.get(s, 0) == per]

    def free_uncore_caches(self) -> list[int]:
        free, total = self.free.counts("uncore"), self.topo.details.counts("uncore")
        return [u for u in self.sort_uncore_caches() if free.get(u, 0) == total.get(u, 0)]

    def free_cores(self) -> list[int]:
        per, free = self.topo.cpus_per_core(), self.free.counts("core")
        return [c for c in self.sort_cores() if free.get(c, 0) == per]

    def _below_smallest(self, attr: str) -> bool:
        """True when fewer CPUs are needed than the smallest element of this kind holds: then no
        take_full_* step can take anything and its (pure) ordering work is skipped."""
        key = "smallest_" + attr
        smallest = self.topo.derived.get(key)
        if smallest is None:
            smallest = self.topo.derived[key] = min(self.topo.details.counts(attr).values())
        return bool(self.needed < smallest)

    def take_full_numa_nodes(self) -> None:
        if self._below_smallest("numa_node"):
            return
        for numa in self.free_numa_nodes():
            cpus = self.topo.details.cpus_in_numa_nodes(numa)
            if self.needs_at_least(len(cpus)):
                self.take(cpus)

    def take_full_sockets(self) -> None:
        if self._below_smallest("socket"):
            return
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
        if self._below_smallest("uncore"):
            return
        for uncore in self.free_uncore_caches():
            cpus = self.topo.details.cpus_in_uncore_caches(uncore)
            if self.needs_at_least(len(cpus)):
                self.take(cpus)

    def take_partial_uncore(self, uncore: int) -> None:
        per_core = self.topo.cpus_per_core()
        rounding = per_core - 1 if self.uncore_rounds_up else 0
        cores_needed = (self.needed + rounding) // per_core
        cores = self.free.cores_needed_in_uncore_cache(cores_needed, uncore)
        cpus = self.free.cpus_in_cores(*cores)
        # An odd remainder on SMT needs one thread of the last core, not both (1.34+).
        if self.uncore_rounds_up and self.needed % 2 != 0 and per_core > 1:
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
        if self._below_smallest("core"):
            return
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
    uncore_rounds_up: bool = True,
) -> frozenset[int]:
    """Upstream takeByTopologyNUMAPacked (spec §1.6.2). `uncore_rounds_up`: see CPUAccumulator (False: 1.33).

    A pure function of the topology and its arguments, so its answers are kept per topology (shared by
    every node of a machine, see CPUTopology.from_machine): packed allocation leaves free sets in few
    shapes, and across a simulated fleet most calls repeat an earlier one."""
    if n < 1:
        return frozenset()
    avail = frozenset(available)
    memo: dict[tuple[frozenset[int], int, str, bool, bool], frozenset[int]] | None = topo.derived.get(_TAKEN)
    if memo is None:
        memo = topo.derived[_TAKEN] = {}
    rounds_up = uncore_rounds_up or not prefer_align_by_uncore_cache  # only the uncore step reads it
    key = (avail, n, strategy, prefer_align_by_uncore_cache, rounds_up)
    got = memo.get(key)
    if got is None:
        got = _take_by_topology_numa_packed(topo, avail, n, strategy, prefer_align_by_uncore_cache, rounds_up)
        if len(memo) >= TAKEN_KEPT:
            memo.clear()
        memo[key] = got
    return got


def _take_by_topology_numa_packed(
    topo: CPUTopology, avail: frozenset[int], n: int, strategy: str, prefer_align_by_uncore_cache: bool,
    uncore_rounds_up: bool,
) -> frozenset[int]:
    acc = CPUAccumulator(topo, avail, n, strategy, uncore_rounds_up)
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
