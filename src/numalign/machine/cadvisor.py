"""cadvisor MachineInfo JSON (what the kubelet reads, e.g. from /api/v2.0/machine or a debug dump)
to and from a `Machine`. Pure.

MachineInfo keeps one entry per NUMA node with its cores (`core_id` per socket, `thread_ids`,
`socket_id`, `uncore_caches`), node-level `caches`, `memory`, `hugepages` (page_size in KiB) and a
`distances` row. cadvisor lists an L3 under a core's `uncore_caches` only when it is not shared by
exactly the node's threads; otherwise it sits in the node's `caches`. Both map to `CPU.l3`, so
`Machine.cpu_infos()` derives the same uncore ids as the kubelet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from numalign.errors import InvalidInputError
from numalign.limits import MAX_CPU_ID, MAX_NUMA_NODE_ID, MIN_NUMA_NODE_ID
from numalign.machine.topology import CPU, CadvisorCounts, Machine, NUMANode
from numalign.validation import expect_int, expect_list

_CADVISOR_KEYS = ("num_cores", "topology")


def is_cadvisor_machine_info(obj: Any) -> bool:
    return (isinstance(obj, Mapping) and all(k in obj for k in _CADVISOR_KEYS)
            and "numa_nodes" not in obj and "numaNodes" not in obj)  # a machine file keeps cadvisor's counts


def _map(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise InvalidInputError(f"{where}: expected an object, got {type(obj).__name__}")
    return obj


def _l3s(caches: list[Any], where: str) -> list[int]:
    """The ids of the L3-or-higher data/unified caches, in listed order."""
    out: list[int] = []
    for i, raw in enumerate(caches):
        c = _map(raw, f"{where}[{i}]")
        if expect_int(c.get("level", 0), f"{where}[{i}].level") >= 3 and c.get("type", "Unified") != "Instruction":
            out.append(expect_int(c.get("id", 0), f"{where}[{i}].id"))
    return out


def _l3(caches: list[Any], where: str) -> int | None:
    ids = _l3s(caches, where)
    return ids[0] if ids else None


def machine_from_cadvisor(obj: Any, source: str) -> Machine:
    """The machine as the kubelet reads this MachineInfo.

    - A CPU listed under two nodes belongs to the last one (topology.Discover overwrites its CPU
      details node by node).
    - Distance rows are kept twice: as cadvisor gives them, by node id (Machine.cadvisor, what the
      kubelet's NUMAInfo holds), and by position for numalign's own views when every row reaches
      every node id (sparse ids make sysfs's rows shorter than the highest id).
    - num_cores and num_sockets are kept as cadvisor counted them (Machine.cadvisor), with the number
      of cores the nodes list, which Discover sums node by node.
    - An empty topology (no node directory, no package id: a machine with no NUMA node, whose CPUs
      the kubelet only counts) and node -1 (an unknown package id) are kept as they are.
    """
    info = _map(obj, source)
    topology = expect_list(info.get("topology"), f"{source}: topology")
    raw_nodes: list[tuple[int, Mapping[str, Any], str]] = []
    owner: dict[int, int] = {}  # CPU id -> the last node listing it (the kubelet's CPU details)
    listed_cores = 0
    for i, raw_node in enumerate(topology):
        where = f"{source}: topology[{i}]"
        n = _map(raw_node, where)
        # -1: the node cadvisor makes of an unknown package id when there is no node directory.
        node_id = expect_int(n.get("node_id", 0), f"{where}.node_id", minimum=MIN_NUMA_NODE_ID,
                             maximum=MAX_NUMA_NODE_ID)
        raw_nodes.append((node_id, n, where))
        listed_cores += len(expect_list(n.get("cores"), f"{where}.cores"))
        for j, raw_core in enumerate(expect_list(n.get("cores"), f"{where}.cores")):
            core = _map(raw_core, f"{where}.cores[{j}]")
            for t in expect_list(core.get("thread_ids"), f"{where}.cores[{j}].thread_ids"):
                owner[expect_int(t, f"{where}.cores[{j}].thread_ids", maximum=MAX_CPU_ID)] = node_id
    ids = sorted(node_id for node_id, _, _ in raw_nodes)
    nodes: list[tuple[int, NUMANode]] = []
    cpus: list[CPU] = []
    declared: dict[int, int | None] = {}  # CPU id -> the core's uncore cache id as cadvisor listed it
    node_caches: dict[int | None, list[int]] = {}  # node id -> its node-level L3 ids
    rows: dict[int, list[int] | None] = {}
    for node_id, n, where in raw_nodes:
        node_l3s = _l3s(expect_list(n.get("caches"), f"{where}.caches"), f"{where}.caches")
        node_caches[node_id] = node_l3s
        node_l3 = node_l3s[0] if node_l3s else None
        node_cpus: set[int] = set()
        for j, raw_core in enumerate(expect_list(n.get("cores"), f"{where}.cores")):
            cw = f"{where}.cores[{j}]"
            core = _map(raw_core, cw)
            raw_threads = expect_list(core.get("thread_ids"), f"{cw}.thread_ids")
            threads = [expect_int(t, f"{cw}.thread_ids") for t in raw_threads]
            if not threads or len(set(threads)) != len(threads):
                raise InvalidInputError(f"{cw}: thread_ids {threads}; expected unique CPU ids (kubelet: no cpus)")
            uncore = _l3(expect_list(core.get("uncore_caches"), f"{cw}.uncore_caches"), f"{cw}.uncore_caches")
            for t in threads:
                if owner[t] != node_id:
                    continue  # listed again under a later node, which the kubelet keeps
                declared[t] = uncore
                cpus.append(
                    CPU(
                        t,
                        expect_int(core.get("socket_id", 0), f"{cw}.socket_id"),
                        expect_int(core.get("core_id", 0), f"{cw}.core_id"),
                        node_id,
                        0,
                        uncore if uncore is not None else node_l3,
                        True,
                    )
                )
                node_cpus.add(t)
        hugepages: dict[int, int] = {}
        for j, raw_hp in enumerate(expect_list(n.get("hugepages"), f"{where}.hugepages")):
            hp = _map(raw_hp, f"{where}.hugepages[{j}]")
            hugepages[expect_int(hp.get("page_size"), f"{where}.hugepages[{j}].page_size") * 1024] = expect_int(
                hp.get("num_pages", 0), f"{where}.hugepages[{j}].num_pages"
            )
        dist_raw = n.get("distances")
        rows[node_id] = (
            None if not dist_raw else [expect_int(x, f"{where}.distances") for x in expect_list(dist_raw, where)]
        )
        memory = expect_int(n.get("memory", 0), f"{where}.memory")
        nodes.append((node_id, NUMANode(node_id, frozenset(node_cpus), memory, hugepages, None)))
    by_position = _rows_by_position(rows, ids)
    nodes.sort(key=lambda p: p[0])
    if by_position is not None:
        nodes = [(i, dataclasses.replace(n, distances=by_position[i])) for i, n in nodes]
    name = info.get("machine_id") or source
    num_cpus = expect_int(info.get("num_cores", 0), f"{source}: num_cores", minimum=0)
    sockets = info.get("num_sockets")
    counts = CadvisorCounts(
        num_cpus,
        listed_cores,
        len({c.socket for c in cpus}) if sockets is None else expect_int(sockets, f"{source}: num_sockets", minimum=0),
        {node_id: tuple(row) for node_id, row in rows.items() if row is not None},
        None if info.get("memory_capacity") is None
        else expect_int(info.get("memory_capacity"), f"{source}: memory_capacity", minimum=0),
        None if info.get("num_physical_cores") is None
        else expect_int(info.get("num_physical_cores"), f"{source}: num_physical_cores", minimum=0),
        _machine_hugepages(info.get("hugepages"), f"{source}: hugepages", [n for _, n in nodes]),
    )
    try:
        return _keep_declared_uncore(
            Machine(str(name), tuple(n for _, n in nodes), tuple(sorted(cpus, key=lambda c: c.id)), cadvisor=counts),
            declared,
            node_caches,
        )
    except InvalidInputError as e:
        raise InvalidInputError(f"{source}: {e}") from None


def _rows_by_position(rows: Mapping[int, list[int] | None], ids: list[int]) -> dict[int, tuple[int, ...]] | None:
    """cadvisor's rows (indexed by node id) as numalign keeps them (one entry per node, ascending id),
    or None when some node has no row, or a row the kubelet would index past or find a
    non-positive distance in."""
    out: dict[int, tuple[int, ...]] = {}
    if ids and ids[0] < 0:
        return None  # a row is indexed by node id: none has a place for node -1
    for node_id in ids:
        row = rows.get(node_id)
        if row is None or len(row) <= max(ids):
            return None
        picked = tuple(row[i] for i in ids)
        if any(x <= 0 for x in picked):
            return None
        out[node_id] = picked
    return out


def _keep_declared_uncore(
    m: Machine, declared: Mapping[int, int | None], node_caches: Mapping[int | None, list[int]]
) -> Machine:
    """Make the kubelet view read back what cadvisor listed (uncore id, or the socket when none).

    A core without uncore caches borrows its node's first L3 so the machine keeps the cache. The
    kubelet view is derived with cadvisor's per-core rule (an L3 is node-level when shared by exactly
    the node's cores x this core's threads), and with offline CPUs a node can list several node-level
    L3s or cores with fewer threads; the borrowed id may then read as an uncore cache, or inflate the
    count of another core's uncore cache. Then each borrowing core gets, greedily, whichever of its
    node's L3s (or none) leaves the fewest CPUs whose derived uncore differs from the listed one.
    """
    if not _uncore_mismatches(m, declared):
        return m  # the usual case: one node-level L3 per node, uniform threads
    cpus = {c.id: c for c in m.cpus}
    borrowers: dict[tuple[int | None, int, int], list[int]] = {}
    for c in m.cpus:
        if c.online and declared.get(c.id) is None:
            borrowers.setdefault((c.numa_node, c.socket, c.core), []).append(c.id)
    best = _uncore_mismatches(m, declared)
    for _ in range(3):  # a few passes: a later choice can make an earlier one improvable
        improved = False
        for key, threads in borrowers.items():
            for candidate in [*node_caches.get(key[0], []), None]:
                if cpus[threads[0]].l3 == candidate:
                    continue
                trial = dict(cpus)
                for t in threads:
                    trial[t] = dataclasses.replace(cpus[t], l3=candidate)
                tm = dataclasses.replace(m, cpus=tuple(trial[c.id] for c in m.cpus))
                score = _uncore_mismatches(tm, declared)
                if score < best:
                    best, cpus, m, improved = score, trial, tm, True
                if best == 0:
                    return m
        if not improved:
            break
    return m


def _uncore_mismatches(m: Machine, declared: Mapping[int, int | None]) -> int:
    by_id = {c.id: c for c in m.cpus}
    return sum(
        1
        for i in m.cpu_infos()
        if i.uncore != (declared[i.id] if declared.get(i.id) is not None else by_id[i.id].socket)
    )


def _machine_hugepages(raw: Any, where: str, nodes: list[NUMANode]) -> tuple[tuple[int, int], ...] | None:
    """MachineInfo.HugePages; None when absent or when it says no more than the nodes' pools summed (so a
    machine reads back equal after its MachineInfo JSON is written and read)."""
    if raw is None:
        return None
    out = []
    for j, hp in enumerate(expect_list(raw, where)):
        entry = _map(hp, f"{where}[{j}]")
        out.append((expect_int(entry.get("page_size"), f"{where}[{j}].page_size", minimum=0),
                    expect_int(entry.get("num_pages", 0), f"{where}[{j}].num_pages", minimum=0)))
    if [{"page_size": k, "num_pages": n} for k, n in out] == _nodes_hugepages(nodes):
        return None
    return tuple(out)


def _hugepages_list(pages_by_kib: Mapping[int, int]) -> list[dict[str, int]]:
    """cadvisor's order: its hugepages-<size>kB directories as the kernel lists them, by name."""
    return [{"page_size": kib, "num_pages": pages_by_kib[kib]} for kib in sorted(pages_by_kib, key=lambda k: f"{k}kB")]


def machine_to_cadvisor(m: Machine) -> dict[str, Any]:
    """The MachineInfo fields the kubelet's managers read, as cadvisor would report this machine."""
    by_id = {c.id: c for c in m.cpus}
    sharers: dict[int, int] = {}
    for c in m.cpus:
        if c.online and c.l3 is not None:
            sharers[c.l3] = sharers.get(c.l3, 0) + 1
    topology = []
    for node in m.cadvisor_nodes():
        cores: dict[tuple[int, int], list[int]] = {}
        for cpu_id in sorted(node.cpus, key=lambda t: f"cpu{t}"):
            c = by_id[cpu_id]
            cores.setdefault((c.core, c.socket), []).append(cpu_id)
        node_caches: list[dict[str, Any]] = []
        core_list = []
        for (core_id, socket), threads in cores.items():
            l3 = by_id[threads[0]].l3
            uncore: list[dict[str, Any]] = []
            if l3 is not None:
                cache = {"id": l3, "size": 0, "type": "Unified", "level": 3}
                if sharers[l3] == len(cores) * len(threads):
                    if cache not in node_caches:
                        node_caches.append(cache)
                else:
                    uncore.append(cache)
            core_list.append(
                {"core_id": core_id, "thread_ids": threads, "socket_id": socket, "caches": [], "uncore_caches": uncore}
            )
        topology.append(
            {
                "node_id": node.id,
                "memory": node.memory_bytes,
                "hugepages": _hugepages_list({size // 1024: n for size, n in node.hugepages.items()}),
                "cores": core_list,
                "caches": node_caches,
                "distances": _row(m, node),
            }
        )
    threads_total = sum(len(n.cpus) for n in m.numa_nodes) if m.cadvisor is None else m.cadvisor.num_cpus
    physical = len({(c.socket, c.core) for c in m.cpus if c.online and c.numa_node is not None})
    if m.cadvisor is not None and m.cadvisor.num_physical_cores is not None:
        physical = m.cadvisor.num_physical_cores
    return {
        "num_cores": threads_total,
        "num_physical_cores": physical,
        "num_sockets": len(m.sockets()) if m.cadvisor is None else m.cadvisor.num_sockets,
        "memory_capacity": m.capacity_memory(),
        "hugepages": machine_hugepages(m),
        "machine_id": m.name,
        "topology": topology,
    }


def machine_hugepages(m: Machine) -> list[dict[str, int]]:
    """MachineInfo.HugePages: cadvisor reads /sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages, the
    machine's pools, which the kubelet's capacity (hugepages-<size>) comes from. A machine read from sysfs
    or MachineInfo keeps cadvisor's list (it differs from the nodes' on real machines: no such directory
    while the nodes list pools, or pools without NUMA nodes; scripts/conformance --areas discover); a
    machine file derives it from the nodes' pools, whose sum the kernel's global count is. Listed in
    cadvisor's order, the directory names' (`hugepages-1048576kB` before `hugepages-2048kB`)."""
    if m.cadvisor is not None and m.cadvisor.hugepages is not None:
        return [{"page_size": size, "num_pages": n} for size, n in m.cadvisor.hugepages]
    return _nodes_hugepages(m.numa_nodes)


def _nodes_hugepages(nodes: Iterable[NUMANode]) -> list[dict[str, int]]:
    pages: dict[int, int] = {}
    for node in nodes:
        for size, n in node.hugepages.items():
            pages[size // 1024] = pages.get(size // 1024, 0) + n
    return _hugepages_list(pages)


def _row(m: Machine, node: NUMANode) -> list[int] | None:
    """The node's row as cadvisor writes it: its raw row when the machine came from cadvisor."""
    if m.cadvisor is not None:
        raw = m.cadvisor.distances.get(node.id)
        return None if raw is None else list(raw)
    return None if node.distances is None else _row_by_id(m, node.distances)


def _row_by_id(m: Machine, row: tuple[int, ...]) -> list[int]:
    """A by-position row as cadvisor writes it: indexed by node id (ids without a node read 0)."""
    ids = m.numa_ids()
    out = [0] * (max(ids) + 1)
    for pos, node_id in enumerate(ids):
        out[node_id] = row[pos]
    return out
