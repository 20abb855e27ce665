"""The CPU manager's view of the machine (upstream topology.CPUTopology and CPUDetails).

Upstream's CPUDetails is a map cpu -> CPUInfo and every query scans it. Here the per-NUMA node,
socket, core and uncore-cache CPU sets are computed once per topology, and a CPUDetails is a view
of a subset of CPUs over that shared index, so queries cost a set intersection, not a scan. All
query results are frozensets (upstream returns sorted cpusets; callers sort where order matters).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from numalign.errors import InvalidInputError
from numalign.machine.topology import Machine

_EMPTY: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class CPUInfo:
    """One logical CPU. `core` is platform-unique (lowest thread id of the core, as upstream)."""

    cpu: int
    numa_node: int
    socket: int
    core: int
    uncore: int


def _group(infos: Iterable[CPUInfo], attr: str) -> dict[int, frozenset[int]]:
    acc: dict[int, set[int]] = {}
    for info in infos:
        acc.setdefault(getattr(info, attr), set()).add(info.cpu)
    return {k: frozenset(v) for k, v in acc.items()}


class _Index:
    """Per-topology precomputed lookups shared by every CPUDetails view."""

    __slots__ = ("all_cpus", "by_core", "by_numa", "by_socket", "by_uncore", "info")

    def __init__(self, infos: Mapping[int, CPUInfo]) -> None:
        self.info = dict(infos)
        self.all_cpus = frozenset(infos)
        values = list(infos.values())
        self.by_numa = _group(values, "numa_node")
        self.by_socket = _group(values, "socket")
        self.by_core = _group(values, "core")
        self.by_uncore = _group(values, "uncore")


class CPUDetails:
    """The CPUs of `cpus` (a subset of the topology) with upstream's CPUDetails queries."""

    __slots__ = ("_cpus", "_full", "_ix")

    def __init__(self, index: _Index, cpus: frozenset[int]) -> None:
        self._ix = index
        self._cpus = cpus & index.all_cpus
        self._full = len(self._cpus) == len(index.all_cpus)

    # --- lookups --------------------------------------------------------------------------
    def info(self, cpu: int) -> CPUInfo | None:
        """The CPUInfo of `cpu` if it is in this view, else None."""
        return self._ix.info.get(cpu) if cpu in self._cpus else None

    def __contains__(self, cpu: object) -> bool:
        return cpu in self._cpus

    def __len__(self) -> int:
        return len(self._cpus)

    def keep_only(self, cpus: Iterable[int]) -> CPUDetails:
        return CPUDetails(self._ix, self._cpus & frozenset(cpus))

    def _pick(self, table: dict[int, frozenset[int]], ids: Iterable[int]) -> frozenset[int]:
        out: frozenset[int] = _EMPTY
        for i in ids:
            out = out | table.get(i, _EMPTY)
        return out if self._full else out & self._cpus

    def _attr(self, cpus: Iterable[int], attr: str) -> frozenset[int]:
        info = self._ix.info
        return frozenset(getattr(info[c], attr) for c in cpus)

    # --- upstream queries -----------------------------------------------------------------
    def cpus(self) -> frozenset[int]:
        return self._cpus

    def numa_nodes(self) -> frozenset[int]:
        if self._full:
            return frozenset(self._ix.by_numa)
        return self._attr(self._cpus, "numa_node")

    def sockets(self) -> frozenset[int]:
        if self._full:
            return frozenset(self._ix.by_socket)
        return self._attr(self._cpus, "socket")

    def cores(self) -> frozenset[int]:
        if self._full:
            return frozenset(self._ix.by_core)
        return self._attr(self._cpus, "core")

    def uncore_caches(self) -> frozenset[int]:
        if self._full:
            return frozenset(self._ix.by_uncore)
        return self._attr(self._cpus, "uncore")

    def cpus_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._pick(self._ix.by_numa, ids)

    def cpus_in_sockets(self, *ids: int) -> frozenset[int]:
        return self._pick(self._ix.by_socket, ids)

    def cpus_in_cores(self, *ids: int) -> frozenset[int]:
        return self._pick(self._ix.by_core, ids)

    def cpus_in_uncore_caches(self, *ids: int) -> frozenset[int]:
        return self._pick(self._ix.by_uncore, ids)

    def sockets_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._attr(self.cpus_in_numa_nodes(*ids), "socket")

    def numa_nodes_in_sockets(self, *ids: int) -> frozenset[int]:
        return self._attr(self.cpus_in_sockets(*ids), "numa_node")

    def cores_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._attr(self.cpus_in_numa_nodes(*ids), "core")

    def cores_in_sockets(self, *ids: int) -> frozenset[int]:
        return self._attr(self.cpus_in_sockets(*ids), "core")

    def uncore_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._attr(self.cpus_in_numa_nodes(*ids), "uncore")

    def cores_in_uncore_caches(self, *ids: int) -> frozenset[int]:
        return self._attr(self.cpus_in_uncore_caches(*ids), "core")

    def cores_needed_in_uncore_cache(self, num_cores_needed: int, *ids: int) -> frozenset[int]:
        """All core ids in those uncore caches if there are <= n of them, else the n lowest."""
        cores = self.cores_in_uncore_caches(*ids)
        if len(cores) <= num_cores_needed:
            return cores
        return frozenset(sorted(cores)[: max(num_cores_needed, 0)])

    def are_numa_nodes_in_same_socket(self, numa_nodes: Iterable[int]) -> bool:
        ids = list(numa_nodes)
        known = self.numa_nodes()
        if any(i not in known for i in ids):
            return False
        return len(self.sockets_in_numa_nodes(*ids)) <= 1


class CPUTopology:
    """Upstream CPUTopology: counts plus the CPUDetails of every logical CPU."""

    __slots__ = (
        "_ix",
        "details",
        "num_cores",
        "num_cpus",
        "num_numa_nodes",
        "num_sockets",
        "num_uncore_cache",
    )

    def __init__(
        self,
        infos: Mapping[int, CPUInfo],
        *,
        num_cpus: int | None = None,
        num_sockets: int | None = None,
        num_cores: int | None = None,
    ) -> None:
        self._ix = _Index(infos)
        self.details = CPUDetails(self._ix, self._ix.all_cpus)
        # cAdvisor reports NumCores (logical CPUs) and NumSockets itself; by default both are derived.
        self.num_cpus = len(infos) if num_cpus is None else num_cpus
        self.num_cores = len(self._ix.by_core) if num_cores is None else num_cores
        self.num_sockets = len(self._ix.by_socket) if num_sockets is None else num_sockets
        self.num_numa_nodes = len(self._ix.by_numa)
        self.num_uncore_cache = len(self._ix.by_uncore)

    @classmethod
    def from_cpu_infos(
        cls, infos: Iterable[CPUInfo], *, where: str = "machine.cpus"
    ) -> CPUTopology:
        table: dict[int, CPUInfo] = {}
        for info in infos:
            for field in ("cpu", "numa_node", "socket", "core", "uncore"):
                value = getattr(info, field)
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise InvalidInputError(
                        f"{where}: CPU {info.cpu!r} has {field}={value!r}; expected an integer >= 0"
                    )
            if info.cpu in table:
                raise InvalidInputError(
                    f"{where}: CPU {info.cpu} is listed twice; each logical CPU must appear once"
                )
            table[info.cpu] = info
        if not table:
            raise InvalidInputError(f"{where}: no CPUs given; expected at least one logical CPU")
        return cls(table)

    @classmethod
    def from_machine(cls, machine: Machine) -> CPUTopology:
        """The kubelet's view of a machine model (cadvisor MachineInfo + topology.Discover)."""
        return cls.from_cpu_infos(
            (CPUInfo(i.id, i.numa_node, i.socket, i.core, i.uncore) for i in machine.cpu_infos()),
            where=f"machine {machine.name!r}",
        )

    def cpu_infos(self) -> list[CPUInfo]:
        return [self._ix.info[c] for c in sorted(self._ix.info)]

    def info(self, cpu: int) -> CPUInfo | None:
        return self._ix.info.get(cpu)

    def cpus_per_core(self) -> int:
        return 0 if self.num_cores == 0 else self.num_cpus // self.num_cores

    def cpus_per_socket(self) -> int:
        return 0 if self.num_sockets == 0 else self.num_cpus // self.num_sockets

    def cpus_per_uncore(self) -> int:
        return 0 if self.num_uncore_cache == 0 else self.num_cpus // self.num_uncore_cache

    def cpu_core_id(self, cpu: int) -> int:
        info = self._ix.info.get(cpu)
        if info is None:
            raise InvalidInputError(f"unknown CPU ID: {cpu}")
        return info.core

    def keep_only(self, cpus: Iterable[int]) -> CPUDetails:
        """CPUDetails restricted to `cpus` (CPUs outside the topology are dropped, as upstream)."""
        return CPUDetails(self._ix, frozenset(cpus))

    def check_alignment_uncore(self, cpus: Iterable[int]) -> bool:
        """Upstream CheckAlignment(...).UncoreCache: <= 1 CPU, or all CPUs share one uncore cache."""
        ids = list(cpus)
        if len(ids) <= 1:
            return True
        info = self._ix.info
        first = info[ids[0]].uncore if ids[0] in info else None
        return all(c in info and info[c].uncore == first for c in ids)

    def __repr__(self) -> str:
        return (
            f"CPUTopology(cpus={self.num_cpus}, cores={self.num_cores}, sockets={self.num_sockets}, "
            f"numa={self.num_numa_nodes}, uncore={self.num_uncore_cache})"
        )
