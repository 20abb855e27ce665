"""CPU assignment: upstream cpu_assignment.go (spec §1.6) and allocateCPUs (spec §1.5).

takeByTopologyNUMAPacked is a best-fit walk over whole NUMA nodes / sockets, uncore caches, whole
cores, then single threads; every list is sorted by the number of *free* CPUs ascending (fullest
first), ties by id. takeByTopologyNUMADistributed spreads a request evenly over the fewest NUMA
nodes (KEP-2902). Both keep upstream's quirks: lists are recomputed from the free CPUs exactly
where upstream recomputes them, and a list may name an element twice when it spans two parents.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations

from numalign.core.bitmask import bits_of
from numalign.errors import AllocationError
from numalign.providers.cpu.topology import CPUTopology

PACKED = "packed"
SPREAD = "spread"


def not_enough_cpus(requested: int, available: int) -> AllocationError:
    return AllocationError(
        f"not enough cpus available to satisfy request: requested={requested}, available={available}"
    )


class _Accumulator:
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
    acc = _Accumulator(topo, avail, n, strategy)
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


def _go_round(x: float) -> float:
    """Go math.Round: half away from zero, exact (no x + 0.5 precision loss)."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += int(math.copysign(1, x))
    return float(t)


def standard_deviation(xs: Sequence[int]) -> float:
    """Upstream standardDeviation: population stddev, mean and result rounded to 3 decimals."""
    m = _go_round(sum(float(x) for x in xs) / len(xs) * 1000) / 1000
    acc = 0.0
    for x in xs:
        acc += (float(x) - m) * (float(x) - m)
    return _go_round(math.sqrt(acc / len(xs)) * 1000) / 1000


class _SliceRef:
    """A Go slice header: the first `length` entries of a possibly shared backing array."""

    __slots__ = ("buf", "length")

    def __init__(self, buf: list[int], length: int) -> None:
        self.buf = buf
        self.length = length

    def values(self) -> list[int]:
        return self.buf[: self.length]


def _go_combinations(items: Sequence[int], k: int, alias: bool) -> Iterator[_SliceRef]:
    """Upstream iterateCombinations, optionally with Go's slice aliasing.

    Upstream builds each combination with append() on a shared prefix. Once a prefix slice has
    spare capacity (Go grows 0->1->2->4->8->...), sibling combinations are written into the same
    backing array, so a combination kept by reference (bestCombo, bestRemainder) changes when later
    siblings are generated. alias=True reproduces that; alias=False yields independent copies.
    """
    if k < 1:
        return
    if not alias:
        for combo in combinations(items, k):
            yield _SliceRef(list(combo), k)
        return

    def helper(start: int, k_left: int, buf: list[int], length: int) -> Iterator[_SliceRef]:
        if k_left == 0:
            yield _SliceRef(buf, length)
            return
        for i in range(start, len(items) - k_left + 1):
            if length < len(buf):
                nbuf = buf  # append in place: capacity left in the shared array
            else:
                cap = len(buf)
                new_cap = max(1, 2 * cap) if cap < 256 else cap + cap // 4
                nbuf = buf[:length] + [0] * (new_cap - length)
            nbuf[length] = items[i]
            yield from helper(i + 1, k_left - 1, nbuf, length + 1)

    yield from helper(0, k, [], 0)


# Emulate Go's slice aliasing in the distributed algorithm's combination walk (see above).
GO_SLICE_ALIASING = True


def take_by_topology_numa_distributed(
    topo: CPUTopology,
    available: Iterable[int],
    n: int,
    group_size: int,
    strategy: str = PACKED,
) -> frozenset[int]:
    """Upstream takeByTopologyNUMADistributed (spec §1.6.3, KEP-2902)."""
    avail = frozenset(available)
    g = group_size
    if n % g != 0:
        return take_by_topology_numa_packed(topo, avail, n, strategy, False)
    acc = _Accumulator(topo, avail, n, strategy)
    if acc.is_satisfied():
        return frozenset()
    if acc.is_failed():
        raise not_enough_cpus(n, len(avail))

    numas = acc.sort_numa_nodes()
    free_count = {numa: len(acc.free.cpus_in_numa_nodes(numa)) for numa in numas}
    min_numas, max_numas = _range_numa_nodes_needed(acc, g)
    alias = GO_SLICE_ALIASING
    for k in range(min_numas, max_numas + 1):
        best_balance = math.inf
        best_remainder: _SliceRef | None = None
        best_combo: _SliceRef | None = None
        for combo in _go_combinations(numas, k, alias):
            if best_balance == 0:
                break
            combo_vals = combo.values()
            # A set union, as upstream's CPUsInNUMANodes(combo...): a repeated node counts once.
            if len(acc.free.cpus_in_numa_nodes(*combo_vals)) < n:
                continue
            if sum(free_count[x] // g for x in combo_vals) * g < n:
                continue
            distribution = n // k // g * g
            if any(free_count[x] < distribution for x in combo_vals):
                continue
            after = dict(free_count)
            for x in combo_vals:
                after[x] -= distribution
            remainder = n - distribution * k
            remainder_combo = [x for x in combo_vals if after[x] >= g]
            local_best = math.inf
            local_rem: _SliceRef | None = None
            if remainder == 0:
                local_best = standard_deviation(list(after.values()))
            s = len(remainder_combo)
            while remainder > 0 and s >= 1:
                for subset in _go_combinations(remainder_combo, s, alias):
                    balance = _remainder_balance(after, subset.values(), remainder, g)
                    if balance is not None and balance < local_best:
                        local_best = balance
                        local_rem = subset
                s -= 1
            if local_best < best_balance:
                best_balance = local_best
                best_remainder = local_rem
                best_combo = combo
        if best_combo is None:
            continue

        chosen = best_combo.values()
        remainder_nodes = [] if best_remainder is None else best_remainder.values()
        distribution = n // len(chosen) // g * g
        for numa in chosen:
            acc.take(_packed_or_empty(topo, acc.free.cpus_in_numa_nodes(numa), distribution, strategy))
        remainder = n - distribution * len(chosen)
        while remainder > 0:
            progressed = False
            for numa in remainder_nodes:
                if remainder == 0:
                    break
                if len(acc.free.cpus_in_numa_nodes(numa)) < g:
                    continue
                acc.take(_packed_or_empty(topo, acc.free.cpus_in_numa_nodes(numa), g, strategy))
                remainder -= g
                progressed = True
            if not progressed:
                # Upstream would spin forever here; report it as the accounting error it is.
                break
        if acc.needed > 0:
            raise AllocationError(
                f"accounting error, not enough CPUs allocated, remaining: {acc.needed}"
            )
        if acc.needed < 0:
            raise AllocationError(f"accounting error, too many CPUs allocated, remaining: {acc.needed}")
        return frozenset(acc.result)

    return take_by_topology_numa_packed(topo, avail, n, strategy, False)


def _packed_or_empty(topo: CPUTopology, cpus: frozenset[int], n: int, strategy: str) -> frozenset[int]:
    # Upstream ignores the error of these inner calls and takes the empty set it returns.
    try:
        return take_by_topology_numa_packed(topo, cpus, n, strategy, False)
    except AllocationError:
        return frozenset()


def _remainder_balance(after: dict[int, int], subset: list[int], remainder: int, g: int) -> float | None:
    """Balance score of handing `remainder` CPUs out round-robin over `subset`, g at a time."""
    if sum(after[x] for x in subset) < remainder:
        return None
    left = dict(after)
    rem = remainder
    while rem > 0:
        progressed = False
        for x in subset:
            if rem == 0:
                break
            if left[x] < g:
                continue
            left[x] -= g
            rem -= g
            progressed = True
        if not progressed:
            # Upstream loops forever when the subset's total suffices but no node holds a whole
            # group; we treat such a subset as unable to take the remainder.
            return None
    return standard_deviation(list(left.values()))


def _range_numa_nodes_needed(acc: _Accumulator, g: int) -> tuple[int, int]:
    """Upstream rangeNUMANodesNeededToSatisfy: (min, max) NUMA nodes for groups of size g."""
    num_numa = len(acc.topo.details.numa_nodes())
    num_numa_avail = len(acc.free.numa_nodes())
    num_cpus = len(acc.topo.details.cpus())
    groups = (num_cpus - 1) // g + 1
    groups_per_numa = (groups - 1) // num_numa + 1
    groups_needed = (acc.needed - 1) // g + 1
    return (groups_needed - 1) // groups_per_numa + 1, min(groups_needed, num_numa_avail)


@dataclass(frozen=True, slots=True)
class TakeOptions:
    """The policy options that steer takeByTopology and allocateCPUs."""

    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    distribute_cpus_across_cores: bool = False
    prefer_align_cpus_by_uncorecache: bool = False
    align_by_socket: bool = False


def take_by_topology(
    topo: CPUTopology, available: Iterable[int], n: int, options: TakeOptions
) -> frozenset[int]:
    """Upstream staticPolicy.takeByTopology: the dispatcher of spec §1.6."""
    strategy = SPREAD if options.distribute_cpus_across_cores else PACKED
    if options.distribute_cpus_across_numa:
        group = topo.cpus_per_core() if options.full_pcpus_only else 1
        return take_by_topology_numa_distributed(topo, available, n, group, strategy)
    return take_by_topology_numa_packed(
        topo, available, n, strategy, options.prefer_align_cpus_by_uncorecache
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
        result = take_by_topology(topo, aligned, min(num_cpus, len(aligned)), options)
    rest = take_by_topology(topo, allocatable - result, num_cpus - len(result), options)
    return result | rest
