"""NUMAInfo: the machine's NUMA node ids, their distances, and the two mask comparisons.

Upstream (numa_info.go) keeps node ids in the order cadvisor lists them and a distance row per node
(row indexed by target node id). Averages are float64 sums over ordered pairs, self-distance
included, compared with exact ==; small integer distances make the float arithmetic exact, and we
sum in the same order anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from numalign.core.bitmask import bits_of, is_narrower, mask_of
from numalign.errors import InvalidInputError

NUMADistances = Mapping[int, Sequence[int]]


@dataclass(frozen=True)
class NUMAInfo:
    nodes: tuple[int, ...]
    distances: Mapping[int, tuple[int, ...]] | None = None
    _avg_cache: dict[int, float] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def create(cls, nodes: Sequence[int], distances: NUMADistances | None = None) -> NUMAInfo:
        for n in nodes:
            # -1 is kept as cadvisor gives it (an unknown package id, no node directory); only the
            # policy none ever holds it, as no bitmask (mask_of) can.
            if n < -1:
                raise InvalidInputError(f"NUMA node id {n} is negative; expected ids >= 0 (or -1)")
        if len(set(nodes)) != len(nodes):
            raise InvalidInputError(f"NUMA node ids {list(nodes)} contain duplicates; expected unique ids")
        dist = None
        if distances is not None:
            dist = {int(k): tuple(int(x) for x in row) for k, row in distances.items()}
        return cls(tuple(nodes), dist)

    @property
    def default_affinity_mask(self) -> int:
        return mask_of(self.nodes)

    def has_all_distances(self) -> bool:
        return self.distances is not None and all(n in self.distances for n in self.nodes)

    def require_distances(self) -> None:
        """prefer-closest-numa-nodes needs every node's distance row (kubelet's NewNUMAInfo check)."""
        if not self.has_all_distances():
            raise InvalidInputError(
                "cannot discover NUMA topology: error getting NUMA distances from cadvisor; "
                "prefer-closest-numa-nodes needs a distance row for every NUMA node "
                "(give the machine's distance matrix or drop the option)"
            )

    def short_rows(self) -> list[tuple[int, int]]:
        """(node, row length) of each row the kubelet would index past: rows are indexed by node id, and
        sysfs writes one entry per online node, so sparse ids (0,1,4,5) reach past the row."""
        if self.distances is None or not self.nodes:
            return []
        top = max(self.nodes)
        return [(n, len(row)) for n, row in self.distances.items() if n in self.nodes and len(row) <= top]

    def average_distance(self, mask: int) -> float:
        """Upstream CalculateAverageFor: mean of d[i][j] over ordered pairs of set ids, i == j included."""
        cached = self._avg_cache.get(mask)
        if cached is not None:
            return cached
        ids = bits_of(mask)
        if not ids:
            return 0.0
        dist = self.distances
        if dist is None:
            raise InvalidInputError("average NUMA distance requested but the machine has no distance matrix")
        total = 0.0
        for i in ids:
            row = dist[i]
            for j in ids:
                total += float(row[j])
        avg = total / float(len(ids) * len(ids))
        self._avg_cache[mask] = avg
        return avg

    def fitter(self, use_closest: bool) -> Callable[[int, int], int]:
        """Upstream CompareNUMAAffinityMasks reduced to masks: returns the fitter of two masks."""
        return self.closest if use_closest else self.narrowest

    def narrowest(self, m1: int, m2: int) -> int:
        return m1 if is_narrower(m1, m2) else m2

    def closest(self, m1: int, m2: int) -> int:
        if m1.bit_count() != m2.bit_count():
            return self.narrowest(m1, m2)
        a1 = self.average_distance(m1)
        a2 = self.average_distance(m2)
        if a1 == a2:
            return m1 if m1 < m2 else m2
        return m1 if a1 < a2 else m2
