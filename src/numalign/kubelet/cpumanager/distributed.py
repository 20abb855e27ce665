"""takeByTopologyNUMADistributed of upstream cpu_assignment.go (spec §1.6.3, KEP-2902).

A request is spread evenly over the fewest NUMA nodes that can hold it, in groups of `g` CPUs
(a whole core with full-pcpus-only); the remainder goes where it keeps the free CPUs per NUMA node
most balanced (population standard deviation, rounded like upstream).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from itertools import combinations

from numalign.core.decision import KUBELET_HANGS as KUBELET_HANGS
from numalign.errors import AllocationError
from numalign.kubelet.cpumanager.accumulator import (
    PACKED,
    CPUAccumulator,
    not_enough_cpus,
    take_by_topology_numa_packed,
)
from numalign.kubelet.cpumanager.topology import CPUTopology


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


def go_combinations(items: Sequence[int], k: int, alias: bool) -> Iterator[_SliceRef]:
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


# KUBELET_HANGS, the reason of the AllocationError: kubelet <= 1.37 loops forever handing out a remainder
# no NUMA node can take in whole groups (#140730).


def _hangs(what: str) -> AllocationError:
    return AllocationError(f"takeByTopologyNUMADistributed never returns: {what}", reason=KUBELET_HANGS)


def take_by_topology_numa_distributed(
    topo: CPUTopology,
    available: Iterable[int],
    n: int,
    group_size: int,
    strategy: str = PACKED,
    *,
    align_by_socket: bool = False,
    whole_groups_remainder: bool = False,
    min_numas_from_hint: int = 0,
    go_slice_aliasing: bool = GO_SLICE_ALIASING,
) -> frozenset[int]:
    """Upstream takeByTopologyNUMADistributed (spec §1.6.3, KEP-2902).

    `align_by_socket`: the kubelet's align-by-socket option as 1.37+ passes it in (k/k #139778: combos
    within one socket win, and each node's share is capped at what it holds in whole groups); before
    1.37 the caller passes False. `whole_groups_remainder`: 1.38's check that a remainder subset holds
    the remainder in whole groups (k/k #140730); without it (<= 1.37) a subset whose CPUs add up but
    not in whole groups makes the kubelet loop forever, raised as KUBELET_HANGS. 1.38 also
    (`min_numas_from_hint`, k/k #139456) spreads over at least as many NUMA nodes as the Topology
    Manager's affinity has, when that many can hold the request, and hands each combination over as
    a copy (`go_slice_aliasing` False: no kept combination changes under later ones)."""
    avail = frozenset(available)
    g = group_size
    if n % g != 0:
        return take_by_topology_numa_packed(topo, avail, n, strategy, False)
    acc = CPUAccumulator(topo, avail, n, strategy)
    if acc.is_satisfied():
        return frozenset()
    if acc.is_failed():
        raise not_enough_cpus(n, len(avail))

    numas = acc.sort_numa_nodes()
    free_count = {numa: len(acc.free.cpus_in_numa_nodes(numa)) for numa in numas}
    min_numas, max_numas = _range_numa_nodes_needed(acc, g)
    if min_numas < min_numas_from_hint <= max_numas:
        min_numas = min_numas_from_hint  # a hint wider than what can hold the request is ignored
    alias = go_slice_aliasing
    # Looked up per node, not per combination: the CPU views memoize each tuple of ids they are asked about
    # (topo.details for the machine's lifetime), and a walk over many NUMA nodes visits millions of
    # combinations (C(57, 6) = 36 million on 64 one-CPU nodes), each a new entry kept: past 6 GB.
    node_sockets = {numa: topo.details.sockets_in_numa_nodes(numa) for numa in numas} if align_by_socket else {}
    for k in range(min_numas, max_numas + 1):
        best_balance = math.inf
        best_remainder: _SliceRef | None = None
        best_combo: _SliceRef | None = None
        best_in_one_socket = False
        for combo in go_combinations(numas, k, alias):
            # A perfect balance ends the search, unless a one-socket combination may still come.
            if best_balance == 0 and (not align_by_socket or best_in_one_socket):
                break
            combo_vals = combo.values()
            # Upstream's CPUsInNUMANodes(combo...).Size(): the nodes' CPU sets are disjoint and a
            # combination names each node once, so the size of the union is the sum of the counts.
            if sum(free_count[x] for x in combo_vals) < n:
                continue
            if sum(free_count[x] // g for x in combo_vals) * g < n:
                continue
            distribution = n // k // g * g
            if align_by_socket:
                distribution = min([distribution, *(free_count[x] // g * g for x in combo_vals)])
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
                for subset in go_combinations(remainder_combo, s, alias):
                    balance = _remainder_balance(after, subset.values(), remainder, g, whole_groups_remainder)
                    if balance is not None and balance < local_best:
                        local_best = balance
                        local_rem = subset
                s -= 1
            better = local_best < best_balance
            in_one_socket = align_by_socket and _in_one_socket(node_sockets, combo_vals)
            if align_by_socket and in_one_socket != best_in_one_socket:
                # The socket kind decides before the balance, even against an unbalanceable combo.
                better = in_one_socket
            if better:
                best_balance = local_best
                best_remainder = local_rem
                best_combo = combo
                best_in_one_socket = in_one_socket
        if best_combo is None:
            continue

        chosen = best_combo.values()
        remainder_nodes = [] if best_remainder is None else best_remainder.values()
        distribution = n // len(chosen) // g * g
        if align_by_socket:
            # Past the choice of nodes: no node is asked for more whole groups than it has free.
            distribution = min([distribution, *(len(acc.free.cpus_in_numa_nodes(x)) // g * g for x in chosen)])
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
                if not whole_groups_remainder:
                    raise _hangs(f"{remainder} CPUs left to hand out in groups of {g} and no NUMA node of "
                                 f"{sorted(remainder_nodes)} holds a whole group")
                break  # not reached once subsets hold whole groups; kept as upstream's accounting error
        if acc.needed > 0:
            raise AllocationError(
                f"accounting error, not enough CPUs allocated, remaining: {acc.needed}"
            )
        if acc.needed < 0:
            raise AllocationError(f"accounting error, too many CPUs allocated, remaining: {acc.needed}")
        return frozenset(acc.result)

    return take_by_topology_numa_packed(topo, avail, n, strategy, False)


def _in_one_socket(node_sockets: dict[int, frozenset[int]], nodes: list[int]) -> bool:
    """Upstream AreNUMANodesInSameSocket over the machine's CPUs (every node of a combination is one of
    the machine's): the sockets of the nodes' CPUs, together, are one at most."""
    seen: set[int] = set()
    for x in nodes:
        seen |= node_sockets[x]
        if len(seen) > 1:
            return False
    return True


def _packed_or_empty(topo: CPUTopology, cpus: frozenset[int], n: int, strategy: str) -> frozenset[int]:
    # Upstream ignores the error of these inner calls and takes the empty set it returns.
    try:
        return take_by_topology_numa_packed(topo, cpus, n, strategy, False)
    except AllocationError:
        return frozenset()


def _remainder_balance(
    after: dict[int, int], subset: list[int], remainder: int, g: int, whole_groups: bool
) -> float | None:
    """Balance score of handing `remainder` CPUs out round-robin over `subset`, g at a time."""
    held = sum(after[x] // g * g for x in subset) if whole_groups else sum(after[x] for x in subset)
    if held < remainder:
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
            # The subset's CPUs add up but not in whole groups: upstream's `for remainder > 0` loop never
            # ends (kubelet <= 1.37; 1.38's whole-groups check above keeps such subsets out).
            numa_free = {x: after[x] for x in subset}
            raise _hangs(f"the remainder of {remainder} CPUs in groups of {g} does not fit the free CPUs per NUMA "
                         f"node {numa_free} (whole groups {sum(v // g for v in numa_free.values())})")
    return standard_deviation(list(left.values()))


def _range_numa_nodes_needed(acc: CPUAccumulator, g: int) -> tuple[int, int]:
    """Upstream rangeNUMANodesNeededToSatisfy: (min, max) NUMA nodes for groups of size g."""
    num_numa = len(acc.topo.details.numa_nodes())
    num_numa_avail = len(acc.free.numa_nodes())
    num_cpus = len(acc.topo.details.cpus())
    groups = (num_cpus - 1) // g + 1
    groups_per_numa = (groups - 1) // num_numa + 1
    groups_needed = (acc.needed - 1) // g + 1
    return (groups_needed - 1) // groups_per_numa + 1, min(groups_needed, num_numa_avail)
