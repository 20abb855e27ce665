"""The CPU provider's hints queried mask by mask, for machines where 2^N masks cannot be listed.

generateCPUTopologyHints (hints.py) lists every NUMA mask with enough CPUs. Each entry of that list
is decided by three facts that need no enumeration:
- a mask is a hint iff it holds every reusable CPU's NUMA node and |reusable| + its available CPUs
  >= request;
- minAffinitySize is the smallest k whose k largest NUMA nodes (by the machine's total CPUs) hold
  the request, or the number of NUMA nodes when no mask does;
- a hint is preferred iff its size is minAffinitySize, or (align-by-socket) it spans the minimal
  number of sockets.
CPUHintQueries answers those per mask, and lists hints in upstream order up to a size bound, so a
merge can ask about the masks it needs. Its answers equal the exhaustive list (see the tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import combinations

from numalign.core.bitmask import mask_of
from numalign.core.hint import TopologyHint
from numalign.kubelet.cpumanager.hints import is_hint_socket_aligned
from numalign.kubelet.cpumanager.topology import CPUTopology


class CPUHintQueries:
    """What generate_cpu_topology_hints would return, queried mask by mask."""

    def __init__(
        self,
        topo: CPUTopology,
        available: Iterable[int],
        reusable: Iterable[int],
        request: int,
        align_by_socket: bool = False,
    ) -> None:
        self.topo = topo
        self.request = request
        self.align_by_socket = align_by_socket
        self.numa_ids: tuple[int, ...] = tuple(sorted(topo.details.numa_nodes()))
        avail = frozenset(available)
        view = topo.keep_only(avail)
        self._avail = dict.fromkeys(self.numa_ids, 0)
        self._avail.update(view.counts("numa_node"))
        stray = len(avail) - len(view)  # CPUs outside the topology read as NUMA node 0 upstream
        if stray:
            self._avail[0] = self._avail.get(0, 0) + stray
        reusable_set = frozenset(reusable)
        self._num_reusable = len(reusable_set)
        self.reusable_mask = 0
        for cpu in reusable_set:
            info = topo.info(cpu)
            self.reusable_mask |= 1 << (0 if info is None else info.numa_node)
        totals = sorted((len(topo.details.cpus_in_numa_nodes(n)) for n in self.numa_ids), reverse=True)
        self.min_affinity_size = len(self.numa_ids)
        running = 0
        for k, total in enumerate(totals, start=1):
            running += total
            if running >= request:
                self.min_affinity_size = min(k, self.min_affinity_size)
                break

    def _nodes(self, mask: int) -> list[int]:
        return [n for n in self.numa_ids if mask >> n & 1]

    def is_hint(self, mask: int) -> bool:
        """Is `mask` (bits over the machine's NUMA ids) in the provider's hint list?"""
        if mask <= 0 or self.reusable_mask & ~mask:
            return False
        if mask & ~mask_of(self.numa_ids):
            return False
        free = sum(self._avail.get(n, 0) for n in self._nodes(mask))
        return self._num_reusable + free >= self.request

    def is_preferred(self, mask: int) -> bool:
        """The Preferred flag the hint for `mask` carries (meaningful when is_hint(mask))."""
        if self.align_by_socket and is_hint_socket_aligned(self.topo, mask, self.min_affinity_size):
            return True
        return mask.bit_count() == self.min_affinity_size

    def hint_for(self, mask: int) -> TopologyHint | None:
        return TopologyHint(mask, self.is_preferred(mask)) if self.is_hint(mask) else None

    def iter_hints(self, max_size: int | None = None) -> Iterator[TopologyHint]:
        """Hints in upstream order (by size, then lexicographic), only masks up to `max_size` nodes."""
        top = len(self.numa_ids) if max_size is None else min(max_size, len(self.numa_ids))
        for k in range(1, top + 1):
            for combo in combinations(self.numa_ids, k):
                hint = self.hint_for(mask_of(combo))
                if hint is not None:
                    yield hint
