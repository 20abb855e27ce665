"""Hypothesis strategies shared by the tests (the one module; the profile is in tests/conftest.py):
hint lists and NUMA information for the merge, random machines and provider states for the
implicit-hint generators."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from numalign.core.bitmask import mask_of, mask_string
from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.numa import NUMAInfo
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.devicemanager.endpoint import ContainerAllocateResponse, Device, DeviceSpec, Mount
from numalign.kubelet.memorymanager.state import MemoryTable, NUMANodeState


@st.composite
def numa_infos(draw: st.DrawFn, max_nodes: int = 10, with_distances: bool = True) -> NUMAInfo:
    n = draw(st.integers(0, max_nodes))
    ids = sorted(draw(st.sets(st.integers(0, max_nodes + 2), min_size=n, max_size=n)))
    if not with_distances or not ids:
        return NUMAInfo.create(ids)
    width = max(ids) + 1
    # Small distances make equal averages (the numeric tie-break) frequent.
    rows = {i: [10 if i == j else draw(st.sampled_from([11, 12, 20, 21])) for j in range(width)] for i in ids}
    return NUMAInfo.create(ids, rows)


def hints_for(numa: NUMAInfo, max_hints: int = 4) -> st.SearchStrategy[TopologyHint]:
    universe = max(numa.nodes, default=0) + 2  # includes ids outside the machine
    masks = st.one_of(
        st.none(),
        st.just(0),
        st.integers(1, (1 << universe) - 1),
        st.sampled_from([1 << n for n in numa.nodes] or [1]),
    )
    return st.builds(TopologyHint, masks, st.booleans())


@st.composite
def provider_hint_sets(draw: st.DrawFn, numa: NUMAInfo, max_providers: int = 4) -> list[ProviderHints]:
    providers: list[ProviderHints] = []
    for p in range(draw(st.integers(0, max_providers))):
        shape = draw(st.sampled_from(["none", "empty", "map"]))
        if shape == "none":
            providers.append(None)
        elif shape == "empty":
            providers.append({})
        else:
            pmap: dict[str, Any] = {}
            for r in range(draw(st.integers(1, 3))):
                kind = draw(st.sampled_from(["nil", "empty", "list", "list", "list"]))
                if kind == "nil":
                    pmap[f"r{p}{r}"] = None
                elif kind == "empty":
                    pmap[f"r{p}{r}"] = []
                else:
                    pmap[f"r{p}{r}"] = draw(st.lists(hints_for(numa), min_size=1, max_size=4))
            providers.append(pmap)
    return providers


POLICIES = ["best-effort", "restricted", "single-numa-node"]


# --- provider states for the implicit-hint generators ---------------------------------------------
@dataclass
class CPUCase:
    topo: CPUTopology
    available: list[int]
    reusable: list[int]
    request: int
    align_by_socket: bool


@st.composite
def cpu_cases(draw: st.DrawFn, max_nodes: int = 8) -> CPUCase:
    n = draw(st.integers(1, max_nodes))
    ids = sorted(draw(st.sets(st.integers(0, max_nodes + 1), min_size=n, max_size=n)))
    sockets = draw(st.integers(1, n))
    infos: list[CPUInfo] = []
    cpu = 0
    for i, node in enumerate(ids):
        for _ in range(draw(st.integers(1, 4))):
            infos.append(CPUInfo(cpu, node, i * sockets // n, cpu, i))
            cpu += 1
    topo = CPUTopology.from_cpu_infos(infos)
    all_cpus = list(range(cpu))
    available = draw(st.lists(st.sampled_from([*all_cpus, cpu + 5]), max_size=cpu + 1))
    reusable = draw(st.lists(st.sampled_from(all_cpus), max_size=3))
    request = draw(st.integers(0, cpu + 2))
    return CPUCase(topo, available, reusable, request, draw(st.booleans()))


@dataclass
class DeviceCase:
    nodes: list[int]
    devices: dict[str, Device]
    available: list[str]
    reusable: list[str]
    request: int


@st.composite
def device_cases(draw: st.DrawFn, nodes: list[int] | None = None, max_nodes: int = 8) -> DeviceCase:
    if nodes is None:
        n = draw(st.integers(1, max_nodes))
        nodes = sorted(draw(st.sets(st.integers(0, max_nodes + 1), min_size=n, max_size=n)))
    node_choice = st.sampled_from([*nodes, max(nodes) + 1])
    topo = st.one_of(
        st.none(),
        st.just(()),
        st.lists(node_choice, min_size=1, max_size=2).map(tuple),
        node_choice.map(lambda x: (x,)),
        node_choice.map(lambda x: (x,)),
    )
    count = draw(st.integers(1, 8))
    devices = {f"d{i}": Device(f"d{i}", topology=draw(topo)) for i in range(count)}
    names = [*list(devices), "unknown"]
    available = draw(st.lists(st.sampled_from(names), max_size=count))
    reusable = draw(st.lists(st.sampled_from(names), max_size=2))
    return DeviceCase(nodes, devices, available, reusable, draw(st.integers(0, count + 1)))


@dataclass
class MemoryCase:
    state: dict[int, NUMANodeState]
    requested: dict[str, int]
    reusable: dict[str, dict[str, int]]


RESOURCES = ["memory", "hugepages-2Mi"]


@st.composite
def memory_cases(draw: st.DrawFn, nodes: list[int] | None = None, max_nodes: int = 7) -> MemoryCase:
    if nodes is None:
        n = draw(st.integers(1, max_nodes))
        nodes = sorted(draw(st.sets(st.integers(0, max_nodes + 1), min_size=n, max_size=n)))
    # a partition into groups; a node of a multi-node group is used, others used or not
    rest = list(nodes)
    state: dict[int, NUMANodeState] = {}
    while rest:
        size = draw(st.integers(1, min(3, len(rest))))
        group, rest = rest[:size], rest[size:]
        for node in group:
            tables = {}
            for r in RESOURCES:
                alloc = draw(st.integers(0, 8))
                free = draw(st.integers(0, alloc))
                tables[r] = MemoryTable(alloc + 1, 1, alloc, alloc - free, free)
            used = draw(st.integers(0, 2)) if size == 1 else draw(st.integers(1, 2))
            state[node] = NUMANodeState(used, tables, list(group) if size > 1 else [node])
    if draw(st.integers(0, 9)) == 0:  # an inconsistent state: an unused node inside a group
        node = draw(st.sampled_from(nodes))
        state[node].number_of_assignments = 0
    requested = {r: draw(st.integers(1, 12)) for r in draw(st.sets(st.sampled_from(RESOURCES), min_size=1))}
    reusable: dict[str, dict[str, int]] = {}
    for _ in range(draw(st.integers(0, 2))):
        bits = draw(st.sets(st.sampled_from(nodes), min_size=1))
        reusable[mask_string(mask_of(bits))] = {r: draw(st.integers(0, 6)) for r in requested}
    return MemoryCase(state, requested, reusable)


def allocate_responses() -> st.SearchStrategy[ContainerAllocateResponse]:
    """Device plugins' Allocate answers for one container (any text, empty fields included)."""
    text = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
    pairs = st.dictionaries(text, text, max_size=3)
    return st.builds(
        ContainerAllocateResponse,
        pairs,
        st.lists(st.builds(Mount, text, text, st.booleans()), max_size=2).map(tuple),
        st.lists(st.builds(DeviceSpec, text, text, text), max_size=2).map(tuple),
        pairs,
        st.lists(text, max_size=2).map(tuple),
    )


@dataclass(frozen=True)
class DRAInstance:
    """A small DRA allocation problem: devices with a numa attribute (some without), claims of one
    request each (ExactCount), some with a matchAttribute on numa, some devices already in use."""

    numa: tuple[int | None, ...]
    counts: tuple[int, ...]
    together: tuple[bool, ...]
    in_use: frozenset[int]


@st.composite
def dra_instances(draw: st.DrawFn) -> DRAInstance:
    devices = draw(st.integers(1, 6))
    claims = draw(st.integers(1, 3))
    return DRAInstance(
        numa=tuple(draw(st.one_of(st.none(), st.integers(0, 2))) for _ in range(devices)),
        counts=tuple(draw(st.integers(1, 3)) for _ in range(claims)),
        together=tuple(draw(st.booleans()) for _ in range(claims)),
        in_use=frozenset(draw(st.sets(st.integers(0, devices - 1), max_size=2))),
    )
