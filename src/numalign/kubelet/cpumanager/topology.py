"""The CPU manager's view of the machine (upstream topology.CPUTopology and CPUDetails).

Upstream's CPUDetails is a map cpu -> CPUInfo and every query scans it. Here the per-NUMA node,
socket, core and uncore-cache CPU sets are computed once per topology, and a CPUDetails is a view
of a subset of CPUs over that shared index, so queries cost a set intersection, not a scan. All
query results are frozensets (upstream returns sorted cpusets; callers sort where order matters).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

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


_ATTRS = ("numa_node", "socket", "core", "uncore")


# CPU sets as int bit masks (bit c set: CPU c), and back, kept per topology (CPUTopology.mask_of / cpus_of):
# the static policy's pools change by a few CPUs an admission, and a frozenset of every free CPU made again,
# hashed and compared at each change cost more than the rest of its allocation; as masks they are a few
# integer operations, and a node going through the same free sets again finds each set object it made
# before. Bounded: each table is cleared when full.
CPU_SETS_KEPT = 4096


def cpu_mask(cpus: Iterable[int]) -> int:
    """The int with bit c set for each CPU id c (ids are >= 0: the topology and the cpuset parser check)."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    return mask


# The bit positions set in each byte value: cpus_in_mask reads a mask byte by byte, so that its loops run on
# small ints (a mask of 63 CPUs or more is a Python long in the compiled core, where a bit-by-bit walk makes a
# new long at every step).
_BYTE_BITS: Final = tuple(tuple(i for i in range(8) if b >> i & 1) for b in range(256))


def cpus_in_mask(mask: int) -> list[int]:
    """The CPU ids of `mask`, ascending."""
    out: list[int] = []
    base = 0
    for byte in mask.to_bytes((mask.bit_length() + 7) // 8, "little"):
        if byte:
            for i in _BYTE_BITS[byte]:
                out.append(base + i)
        base += 8
    return out


# id(machine) -> (machine, its topology); see CPUTopology.from_machine. Bounded: a long-lived agent
# or test session sees few machines, and clearing only costs a rebuild.
_BY_MACHINE: dict[int, tuple[Machine, CPUTopology]] = {}
_BY_MACHINE_LIMIT = 64


class _Index:
    """Per-topology precomputed lookups shared by every CPUDetails view."""

    __slots__ = ("all_cpus", "by", "info", "of")

    def __init__(self, infos: Mapping[int, CPUInfo]) -> None:
        self.info = dict(infos)
        self.all_cpus = frozenset(infos)
        # attr -> cpu -> id, and attr -> id -> cpus
        self.of: dict[str, dict[int, int]] = {a: {} for a in _ATTRS}
        by: dict[str, dict[int, set[int]]] = {a: {} for a in _ATTRS}
        for cpu, info in infos.items():
            for a in _ATTRS:
                value = getattr(info, a)
                self.of[a][cpu] = value
                by[a].setdefault(value, set()).add(cpu)
        self.by: dict[str, dict[int, frozenset[int]]] = {
            a: {k: frozenset(v) for k, v in table.items()} for a, table in by.items()
        }


class CPUDetails:
    """The CPUs of `cpus` (a subset of the topology) with upstream's CPUDetails queries.

    A view never changes, so query results are memoized per view: the accumulator asks the same
    questions many times between two takes.
    """

    __slots__ = ("_counts", "_cpus", "_full", "_ix", "_memo")

    def __init__(self, index: _Index, cpus: frozenset[int]) -> None:
        self._ix = index
        self._cpus = cpus & index.all_cpus
        self._full = len(self._cpus) == len(index.all_cpus)
        self._memo: dict[tuple[str, str, tuple[int, ...]], frozenset[int]] = {}
        self._counts: dict[str, dict[int, int]] = {}

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

    def without(self, cpus: Iterable[int]) -> CPUDetails:
        """This view minus `cpus`; per-id counts already computed here are carried over and
        decremented instead of being recounted (the accumulator removes a few CPUs at a time)."""
        gone = self._cpus & frozenset(cpus)
        view = CPUDetails(self._ix, self._cpus - gone)
        for attr, counts in self._counts.items():
            left = dict(counts)
            of = self._ix.of[attr]
            for c in gone:
                k = of[c]
                if left[k] == 1:
                    del left[k]
                else:
                    left[k] -= 1
            view._counts[attr] = left
        return view

    def _members(self, attr: str, ids: tuple[int, ...]) -> frozenset[int]:
        """CPUs of this view whose `attr` is one of `ids`."""
        key = ("cpus", attr, ids)
        got = self._memo.get(key)
        if got is None:
            table = self._ix.by[attr]
            if len(ids) == 1:
                got = table.get(ids[0], _EMPTY)
            else:
                got = frozenset().union(*(table.get(i, _EMPTY) for i in ids))
            if not self._full:
                got = got & self._cpus
            self._memo[key] = got
        return got

    def _ids(self, want: str, attr: str | None = None, ids: tuple[int, ...] = ()) -> frozenset[int]:
        """Distinct `want` ids of this view's CPUs (restricted to `attr` in `ids` when given)."""
        key = (want, attr or "", ids)
        got = self._memo.get(key)
        if got is None:
            if attr is None and self._full:
                got = frozenset(self._ix.by[want])
            else:
                cpus = self._cpus if attr is None else self._members(attr, ids)
                got = frozenset(map(self._ix.of[want].__getitem__, cpus))
            self._memo[key] = got
        return got

    def counts(self, attr: str) -> dict[int, int]:
        """Number of this view's CPUs per NUMA node / socket / core / uncore id (`attr` names which:
        "numa_node", "socket", "core" or "uncore"); ids without CPUs in the view are absent."""
        got = self._counts.get(attr)
        if got is None:
            # a plain loop: collections.Counter is an interpreted class, even called from the compiled core
            got = {}
            of = self._ix.of[attr]
            for cpu in self._cpus:
                k = of[cpu]
                got[k] = got.get(k, 0) + 1
            self._counts[attr] = got
        return got

    # --- upstream queries -----------------------------------------------------------------
    def cpus(self) -> frozenset[int]:
        return self._cpus

    def numa_nodes(self) -> frozenset[int]:
        return self._ids("numa_node")

    def sockets(self) -> frozenset[int]:
        return self._ids("socket")

    def cores(self) -> frozenset[int]:
        return self._ids("core")

    def uncore_caches(self) -> frozenset[int]:
        return self._ids("uncore")

    def cpus_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._members("numa_node", ids)

    def cpus_in_sockets(self, *ids: int) -> frozenset[int]:
        return self._members("socket", ids)

    def cpus_in_cores(self, *ids: int) -> frozenset[int]:
        return self._members("core", ids)

    def cpus_in_uncore_caches(self, *ids: int) -> frozenset[int]:
        return self._members("uncore", ids)

    def sockets_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._ids("socket", "numa_node", ids)

    def numa_nodes_in_sockets(self, *ids: int) -> frozenset[int]:
        return self._ids("numa_node", "socket", ids)

    def cores_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._ids("core", "numa_node", ids)

    def cores_in_sockets(self, *ids: int) -> frozenset[int]:
        return self._ids("core", "socket", ids)

    def uncore_in_numa_nodes(self, *ids: int) -> frozenset[int]:
        return self._ids("uncore", "numa_node", ids)

    def cores_in_uncore_caches(self, *ids: int) -> frozenset[int]:
        return self._ids("core", "uncore", ids)

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
        "_mask_of_set",
        "_set_of_mask",
        "all_mask",
        "derived",
        "details",
        "num_cores",
        "num_cpus",
        "num_numa_nodes",
        "num_sockets",
        "num_uncore_cache",
        "numa_masks",
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
        # Data other modules derive once per topology (e.g. the hint generator's mask table).
        self.derived: dict[str, Any] = {}
        # cAdvisor reports NumCores (logical CPUs) and NumSockets itself; by default both are derived.
        self.num_cpus = len(infos) if num_cpus is None else num_cpus
        self.num_cores = len(self._ix.by["core"]) if num_cores is None else num_cores
        self.num_sockets = len(self._ix.by["socket"]) if num_sockets is None else num_sockets
        self.num_numa_nodes = len(self._ix.by["numa_node"])
        self.num_uncore_cache = len(self._ix.by["uncore"])
        # every CPU as a mask, and each NUMA node's CPUs as (node id, mask), ascending ids
        self.all_mask = cpu_mask(self._ix.all_cpus)
        self.numa_masks: tuple[tuple[int, int], ...] = tuple(
            (n, cpu_mask(cpus)) for n, cpus in sorted(self._ix.by["numa_node"].items()))
        self._mask_of_set: dict[frozenset[int], int] = {}
        self._set_of_mask: dict[int, frozenset[int]] = {}

    @classmethod
    def from_cpu_infos(
        cls, infos: Iterable[CPUInfo], *, where: str = "machine.cpus", allow_empty: bool = False
    ) -> CPUTopology:
        """Socket, core and uncore ids may be negative: the kubelet keeps a package id of -1 (the
        kernel's "unknown") as socket -1, and the uncore id falls back on the socket id; without a node
        directory that package is also NUMA node -1."""
        table: dict[int, CPUInfo] = {}
        for info in infos:
            for field in ("cpu", "numa_node", "socket", "core", "uncore"):
                value = getattr(info, field)
                # NUMA node -1 is cadvisor's node for an unknown package id (no node directory).
                low = {"cpu": 0, "numa_node": -1}.get(field)
                if not isinstance(value, int) or isinstance(value, bool) or (low is not None and value < low):
                    expected = "an integer" if low is None else f"an integer >= {low}"
                    raise InvalidInputError(
                        f"{where}: CPU {info.cpu!r} has {field}={value!r}; expected {expected}"
                    )
            if info.cpu in table:
                raise InvalidInputError(
                    f"{where}: CPU {info.cpu} is listed twice; each logical CPU must appear once"
                )
            table[info.cpu] = info
        if not table and not allow_empty:
            raise InvalidInputError(f"{where}: no CPUs given; expected at least one logical CPU")
        return cls(table)

    @classmethod
    def from_machine(cls, machine: Machine) -> CPUTopology:
        """The kubelet's view of a machine model (cadvisor MachineInfo + topology.Discover).

        Shared per Machine object: a topology and what is derived from it never change, so the nodes
        of a simulated cluster built from one machine share one (and its hint tables) instead of a
        thousand copies."""
        hit = _BY_MACHINE.get(id(machine))
        if hit is not None and hit[0] is machine:
            return hit[1]
        topo = cls.from_cpu_infos(
            (CPUInfo(i.id, i.numa_node, i.socket, i.core, i.uncore) for i in machine.cpu_infos()),
            where=f"machine {machine.name!r}",
            allow_empty=True,  # a machine whose CPUs cadvisor cannot read: only the static policy refuses it
        )
        if machine.cadvisor is not None:
            # Discover takes NumCPUs and NumSockets from MachineInfo and counts NumCores node by node.
            topo.num_cpus = machine.cadvisor.num_cpus
            topo.num_cores = machine.cadvisor.num_cores
            topo.num_sockets = machine.cadvisor.num_sockets
        if len(_BY_MACHINE) >= _BY_MACHINE_LIMIT:
            _BY_MACHINE.clear()
        _BY_MACHINE[id(machine)] = (machine, topo)  # the machine is kept, so its id is not reused
        return topo

    def mask_of(self, cpus: frozenset[int]) -> int:
        """`cpus` as a mask; a set this topology handed out (cpus_of) or was asked about before is found by
        its identity, without reading its CPUs."""
        got = self._mask_of_set.get(cpus)
        if got is None:
            got = cpu_mask(cpus)
            self._keep(cpus, got)
        return got

    def cpus_of(self, mask: int) -> frozenset[int]:
        """The CPU set of `mask`: one set object per mask while it is kept (see CPU_SETS_KEPT)."""
        got = self._set_of_mask.get(mask)
        if got is None:
            got = frozenset(cpus_in_mask(mask))
            self._keep(got, mask)
        return got

    def _keep(self, cpus: frozenset[int], mask: int) -> None:
        sets, masks = self._set_of_mask, self._mask_of_set
        if len(sets) >= CPU_SETS_KEPT or len(masks) >= CPU_SETS_KEPT:
            sets.clear()
            masks.clear()
        sets.setdefault(mask, cpus)
        masks[cpus] = mask

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
