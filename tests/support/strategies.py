"""Hypothesis strategies for every test (the one module; the profile is in tests/conftest.py).

Sections, in order: hint lists and NUMA information for the merge; provider states for the implicit
hint generators; device plugin answers; DRA problems; the Kubernetes model (requirements, pods,
quantities); CPU topologies; checkpoints; manager scripts; machines; whole-node admissions; merge
scenarios. A test file defines no strategy of its own: it imports from here, so a generator is found,
reused and tuned in one place."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

from hypothesis import strategies as st

from numalign.core.bitmask import iterate_bitmasks, mask_of, mask_string
from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.core.numa import NUMAInfo
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DeviceSpec, Mount
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import NANO, Quantity, QuantityFormat
from numalign.kubelet.cpumanager.checkpoint import CPUManagerCheckpoint
from numalign.kubelet.cpumanager.hints import generate_cpu_topology_hints
from numalign.kubelet.cpumanager.implicit_hints import cpu_topology_hints
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.devicemanager.checkpoint import DeviceCheckpoint
from numalign.kubelet.devicemanager.hints import generate_device_topology_hints
from numalign.kubelet.devicemanager.implicit_hints import device_topology_hints
from numalign.kubelet.devicemanager.state import PodDevicesEntry
from numalign.kubelet.memorymanager.checkpoint import MemoryManagerCheckpoint
from numalign.kubelet.memorymanager.hints import calculate_hints
from numalign.kubelet.memorymanager.implicit_hints import memory_topology_hints
from numalign.kubelet.memorymanager.state import Block, MemoryTable, NUMANodeState
from numalign.kubelet.topologymanager.provider import ListOrImplicit
from numalign.machine.topology import CPU, Machine, NUMANode
from numalign.machine.topology import Device as MachineDevice


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


# --- Kubernetes model: resource requirements and pods for the manifest round trip and QoS -----

_k8s_cpu = st.integers(min_value=0, max_value=4000).map(Quantity.from_milli)
_k8s_memory = st.integers(min_value=0, max_value=8).map(
    lambda n: Quantity.from_int(n * 2**28, QuantityFormat.BINARY_SI)
)
_k8s_gpu = st.integers(min_value=0, max_value=4).map(Quantity.from_int)


@st.composite
def resource_requirements(draw: st.DrawFn) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """Valid requirements: request <= limit for cpu/memory, request == limit for the extended resource."""
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    for name, strategy in (("cpu", _k8s_cpu), ("memory", _k8s_memory)):
        mode = draw(st.sampled_from(["none", "request", "limit", "both", "equal"]))
        a, b = draw(strategy), draw(strategy)
        low, high = min(a, b), max(a, b)
        if mode in ("request", "both"):
            requests[name] = low
        if mode in ("limit", "both"):
            limits[name] = high
        if mode == "equal":
            requests[name] = limits[name] = high
    if draw(st.booleans()):
        requests["example.com/gpu"] = limits["example.com/gpu"] = draw(_k8s_gpu)
    return requests, limits


@st.composite
def manifest_pods(draw: st.DrawFn) -> Pod:
    def container(i: int, is_init: bool) -> Container:
        requests, limits = draw(resource_requirements())
        sidecar = is_init and draw(st.booleans())
        return Container(
            name=f"{'i' if is_init else 'c'}{i}", requests=requests, limits=limits,
            is_init=is_init, restart_policy="Always" if sidecar else None,
        )

    return Pod(
        name="p",
        namespace="ns",
        uid="uid-1",
        init_containers=tuple(container(i, True) for i in range(draw(st.integers(0, 2)))),
        containers=tuple(container(i, False) for i in range(draw(st.integers(1, 3)))),
    )


# --- resource.Quantity texts and values -------------------------------------------------------

_suffixes = st.sampled_from(
    ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E-3", "e0", "e-9",
     "e12", "E+2"]
)


@st.composite
def quantity_texts(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.integers(min_value=0, max_value=10**12))
    frac = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,12}", fullmatch=True)))
    return f"{sign}{whole}{frac}{draw(_suffixes)}"


_DSI, _DEX, _BSI = QuantityFormat.DECIMAL_SI, QuantityFormat.DECIMAL_EXPONENT, QuantityFormat.BINARY_SI
_INT64_MAX = 2**63 - 1
quantities = st.one_of(
    quantity_texts().map(Quantity.parse),
    st.builds(Quantity, st.integers(min_value=-(10**40), max_value=10**40), st.sampled_from([_DSI, _DEX])),
    # Parsing caps BinarySI at int64 max (upstream maxAllowed), so only values below it round-trip.
    st.builds(Quantity, st.integers(min_value=-_INT64_MAX * NANO, max_value=_INT64_MAX * NANO), st.just(_BSI)),
)


# --- pods of CPU-only init, sidecar and app containers (effective requests) -------------------

_milli_cpu = st.integers(min_value=0, max_value=5000).map(Quantity.from_milli)


@st.composite
def sidecar_cpu_pods(draw: st.DrawFn) -> Pod:
    inits = [
        Container(f"i{i}", requests={"cpu": draw(_milli_cpu)}, is_init=True,
                  restart_policy="Always" if draw(st.booleans()) else None)
        for i in range(draw(st.integers(0, 4)))
    ]
    apps = [Container(f"a{i}", requests={"cpu": draw(_milli_cpu)}) for i in range(draw(st.integers(1, 3)))]
    return Pod(name="p", uid="u", init_containers=tuple(inits), containers=tuple(apps))


# --- CPU topologies ---------------------------------------------------------------------------

@st.composite
def uneven_cpu_topologies(draw: st.DrawFn) -> CPUTopology:
    nodes = draw(st.integers(1, 8))
    sockets = draw(st.sampled_from([s for s in (1, 2, 4) if nodes % s == 0]))
    infos = []
    cpu = 0
    for n in range(nodes):
        # Uneven node sizes make the "k largest nodes" rule matter.
        for _ in range(draw(st.integers(1, 6))):
            infos.append(CPUInfo(cpu, n, n * sockets // nodes, cpu, n))
            cpu += 1
    return CPUTopology.from_cpu_infos(infos)


@st.composite
def regular_cpu_topologies(draw: st.DrawFn) -> CPUTopology:
    sockets = draw(st.integers(1, 2))
    numa_per_socket = draw(st.integers(1, 2))
    cores_per_numa = draw(st.integers(1, 4))
    threads = draw(st.sampled_from([1, 2]))
    uncores_per_numa = draw(st.sampled_from([1, 2]))
    cores = sockets * numa_per_socket * cores_per_numa
    infos = []
    for t in range(threads):
        for core in range(cores):
            numa = core // cores_per_numa
            uncore = numa * uncores_per_numa + (core % cores_per_numa) * uncores_per_numa // cores_per_numa
            infos.append(CPUInfo(t * cores + core, numa, numa // numa_per_socket, core, uncore))
    return CPUTopology.from_cpu_infos(infos)


# --- checkpoints (the codecs' round trips) ----------------------------------------------------

_cpu_cp_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_cpu_cp_entries = st.dictionaries(_cpu_cp_text, st.dictionaries(_cpu_cp_text, _cpu_cp_text, max_size=3), max_size=3)
cpu_checkpoints = st.builds(CPUManagerCheckpoint, _cpu_cp_text, _cpu_cp_text, _cpu_cp_entries)


_mem_u64 = st.integers(0, 2**64 - 1)
_mem_node = st.integers(0, 15)
_mem_resource = st.sampled_from(["memory", "hugepages-1Gi", "hugepages-2Mi"])
_mem_tables = st.builds(MemoryTable, _mem_u64, _mem_u64, _mem_u64, _mem_u64, _mem_u64)
_mem_states = st.builds(
    NUMANodeState,
    st.integers(-(2**63), 2**63 - 1),
    st.dictionaries(_mem_resource, _mem_tables, max_size=3),
    st.lists(_mem_node, max_size=4),
)
_mem_blocks = st.builds(Block, st.lists(_mem_node, max_size=3), _mem_resource, _mem_u64)
_mem_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
memory_checkpoints = st.builds(
    MemoryManagerCheckpoint,
    st.sampled_from(["Static", "None"]),
    st.dictionaries(_mem_node, _mem_states, max_size=4),
    st.dictionaries(_mem_text, st.dictionaries(_mem_text, st.lists(_mem_blocks, max_size=3), max_size=2), max_size=3),
)


_dev_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
_dev_ids = st.lists(_dev_text, max_size=3)
_dev_entries = st.builds(
    PodDevicesEntry,
    _dev_text,
    _dev_text,
    _dev_text,
    st.dictionaries(st.integers(-1, 2**63 - 1), _dev_ids, max_size=3),
    st.binary(max_size=16),
)
device_checkpoints = st.builds(
    DeviceCheckpoint,
    st.lists(_dev_entries, max_size=3),
    st.dictionaries(_dev_text, _dev_ids, max_size=3),
    boot_id=_dev_text,
)


# --- manager scripts: random admit/remove sequences -------------------------------------------

memory_scripts = st.lists(
    st.tuples(st.booleans(), st.integers(64, 6 * 1024), st.sampled_from([0, 0, 64, 300])),
    min_size=1, max_size=25,
)


DEVICE_TOPOLOGIES: list[tuple[int, ...] | None] = [(0,), (1,), (0, 1), None, ()]


device_topology_lists = st.lists(st.sampled_from(DEVICE_TOPOLOGIES), min_size=1, max_size=8)
device_ops = st.one_of(
    st.tuples(st.just("admit"), st.integers(0, 3), st.integers(0, 3), st.booleans(), st.sampled_from([None, 1, 2, 3])),
    st.tuples(st.just("remove"), st.integers(0, 5)),
    st.tuples(st.just("health"), st.integers(0, 255)),
)


pod_shapes = st.tuples(
    st.integers(1, 24),  # cpus
    st.integers(1, 300),  # memory GiB
    st.integers(0, 2),  # gpus
    st.integers(0, 2),  # nics
    st.booleans(),  # with an init container
    st.booleans(),  # Guaranteed or Burstable
)


# --- machines ---------------------------------------------------------------------------------

@st.composite
def regular_machines(draw: st.DrawFn) -> Machine:
    """Random regular machines: sockets x nodes x cores x threads, L3 shared by some cores, CPU ids
    shuffled, some CPUs offline."""
    sockets, nodes_per, cores_per, threads = (draw(st.integers(1, 3)) for _ in range(4))
    cores_per_l3 = draw(st.integers(1, cores_per * nodes_per))
    n_cores = sockets * nodes_per * cores_per
    ids = draw(st.permutations(range(n_cores * threads)))
    cpus = []
    for g in range(n_cores):
        node = g // cores_per
        socket = node // nodes_per
        for t in range(threads):
            online = draw(st.integers(0, 9)) > 0
            cpus.append(
                CPU(ids[g * threads + t], socket, g % (cores_per * nodes_per), node, 0, g // cores_per_l3, online)
            )
    n_nodes = sockets * nodes_per
    node_list = tuple(
        NUMANode(
            i,
            frozenset(c.id for c in cpus if c.online and c.numa_node == i),
            1 << 30,
            {2 << 20: i},
            tuple(10 if i == j else 20 for j in range(n_nodes)),
        )
        for i in range(n_nodes)
    )
    return Machine("r", node_list, tuple(cpus))


@st.composite
def machine_models(draw: st.DrawFn) -> Machine:
    n_nodes = draw(st.integers(1, 4))
    node_ids = sorted(draw(st.sets(st.integers(0, 300), min_size=n_nodes, max_size=n_nodes)))
    cpus = []
    cpu_ids = draw(st.lists(st.integers(0, 2000), unique=True, max_size=24))
    for cid in cpu_ids:
        online = draw(st.booleans()) or draw(st.booleans())
        cpus.append(
            CPU(
                cid,
                draw(st.integers(0, 3)),
                draw(st.integers(0, 40)),
                draw(st.one_of(st.none(), st.sampled_from(node_ids))),
                draw(st.integers(0, 2)),
                draw(st.one_of(st.none(), st.integers(0, 9))),
                online,
            )
        )
    with_dist = draw(st.booleans())
    nodes = tuple(
        NUMANode(
            i,
            frozenset(c.id for c in cpus if c.online and c.numa_node == i),
            draw(st.integers(0, 1 << 42)),
            draw(st.dictionaries(st.sampled_from([2 << 20, 1 << 30, 64 << 10]), st.integers(0, 5000), max_size=3)),
            tuple(draw(st.integers(10, 255)) for _ in node_ids) if with_dist else None,
        )
        for i in node_ids
    )
    devices = tuple(
        MachineDevice(
            f"dev{k}",
            draw(st.sampled_from(["a.com/gpu", "b.io/nic"])),
            draw(st.one_of(st.none(), st.just((node_ids[0],)))),
        )
        for k in range(draw(st.integers(0, 3)))
    )
    free_ids = [i for i in range(2001, 2010) if draw(st.booleans())]
    return Machine(draw(st.text(min_size=1, max_size=8)), nodes, tuple(cpus), devices, frozenset(free_ids))


_GiB = 1 << 30
_Q = Quantity.parse


@st.composite
def small_machines(draw: st.DrawFn) -> Machine:
    """1-2 sockets of 1-3 NUMA nodes (2-6 cores, SMT 1-2), maybe a CPU-less memory node, random
    memory, symmetric random distances, and GPUs/NICs on random nodes (some without a node)."""
    sockets, per_socket = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    cores, threads = draw(st.integers(2, 6)), draw(st.integers(1, 2))
    cpu_nodes = sockets * per_socket
    n_nodes = cpu_nodes + draw(st.integers(0, 1))
    n_cores = cpu_nodes * cores
    cpus, node_cpus = [], {i: set[int]() for i in range(n_nodes)}
    for g in range(n_cores):
        node = g // cores
        socket = node // per_socket
        for t in range(threads):
            cpus.append(CPU(g + t * n_cores, socket, g - socket * per_socket * cores, node, 0, g // 2))
            node_cpus[node].add(g + t * n_cores)
    far = {(i, j): draw(st.integers(11, 40)) for i in range(n_nodes) for j in range(i + 1, n_nodes)}

    def dist(i: int, j: int) -> int:
        return 10 if i == j else far[min(i, j), max(i, j)]

    nodes = [
        NUMANode(i, frozenset(node_cpus[i]), draw(st.integers(4, 48)) * _GiB, {2 << 20: 512},
                 tuple(dist(i, j) for j in range(n_nodes)))
        for i in range(n_nodes)
    ]
    devices = []
    for res in ("nvidia.com/gpu", "intel.com/sriov_netdevice"):
        for k in range(draw(st.integers(0, 4))):
            where = draw(st.one_of(st.none(), st.integers(0, n_nodes - 1)))
            devices.append(MachineDevice(f"{res[:3]}{k}", res, None if where is None else (where,)))
    return Machine("random", tuple(nodes), tuple(sorted(cpus, key=lambda c: c.id)), tuple(devices))


def static_container(name: str, cpu: int, mem_gi: int, huge_mi: int, devices: dict[str, int], init: bool) -> Container:
    limits = {"cpu": _Q(str(cpu)), "memory": _Q(f"{mem_gi}Gi")}
    if huge_mi:
        limits["hugepages-2Mi"] = _Q(f"{huge_mi}Mi")
    for res, n in devices.items():
        if n:
            limits[res] = _Q(str(n))
    return Container(name, requests=dict(limits), limits=limits, is_init=init)


@st.composite
def admission_pods(draw: st.DrawFn, resources: list[str], uid: int) -> Pod:
    if draw(st.integers(0, 5)) == 0:  # a Burstable pod: no hints, shared CPUs
        app = Container("app", requests={"cpu": _Q("100m")}, limits={"cpu": _Q("2")})
        return Pod(name=f"b{uid}", uid=f"uid-{uid}", containers=(app,))
    ctrs = []
    for i in range(draw(st.integers(1, 2))):
        devs = {r: draw(st.integers(0, 2)) for r in resources}
        ctrs.append(static_container(f"c{i}", draw(st.integers(1, 24)), draw(st.integers(1, 64)),
                              draw(st.sampled_from([0, 0, 4, 512])), devs, False))
    inits: tuple[Container, ...] = ()
    if draw(st.booleans()):
        inits = (static_container("init", draw(st.integers(1, 8)), draw(st.integers(1, 8)), 0, {}, True),)
    return Pod(name=f"g{uid}", uid=f"uid-{uid}", init_containers=inits, containers=tuple(ctrs))


# --- merge scenarios --------------------------------------------------------------------------

@st.composite
def merge_scenarios(draw: st.DrawFn) -> tuple[str, NUMAInfo, list[ProviderHints], bool]:
    numa = draw(numa_infos(max_nodes=10))
    providers = draw(provider_hint_sets(numa))
    policy = draw(st.sampled_from(POLICIES))
    closest = draw(st.booleans()) and numa.distances is not None
    return policy, numa, providers, closest


@st.composite
def long_lists(draw: st.DrawFn) -> tuple[NUMAInfo, list[list[TopologyHint]], bool]:
    numa = draw(numa_infos(max_nodes=10).filter(lambda n: len(n.nodes) >= 5))
    every = list(iterate_bitmasks(list(numa.nodes)))
    lists: list[list[TopologyHint]] = []
    for _ in range(draw(st.integers(2, 4))):
        shape = draw(st.sampled_from(["upward", "random", "every"]))
        if shape == "every":
            masks = every
        elif shape == "upward":  # all masks holding enough weight: an upward-closed list
            w = {n: draw(st.integers(0, 3)) for n in numa.nodes}
            t = draw(st.integers(1, max(1, sum(w.values()))))
            masks = [m for m in every if sum(v for n, v in w.items() if m >> n & 1) >= t] or [every[-1]]
        else:
            masks = draw(st.lists(st.sampled_from(every), min_size=1, max_size=150))
        lists.append([TopologyHint(m, draw(st.integers(0, 9)) == 0) for m in masks])
    return numa, lists, draw(st.booleans()) and numa.distances is not None


def _implicit_family(
    top: int, weights: dict[int, int], threshold: int, required: int, pref_salt: int, extras: list[TopologyHint]
) -> ImplicitHints:
    def up_pass(m: int) -> bool:
        return required & ~m == 0 and sum(w for x, w in weights.items() if m >> x & 1) >= threshold

    def preferred(m: int) -> bool:
        return (m * 2654435761 + pref_salt) % 3 == 0

    members = [m for m in iterate_bitmasks([x for x in range(top.bit_length()) if top >> x & 1]) if up_pass(m)]
    listed = [TopologyHint(m, preferred(m)) for m in members] + extras
    counts = [h.mask.bit_count() for h in listed if h.mask is not None]
    return ImplicitHints(
        top=top,
        up_pass=up_pass,
        is_preferred=preferred,
        min_count=min(counts),
        extras=tuple(extras),
        materialize=lambda: list(listed),
        label="random",
    )


@st.composite
def implicit_lists(draw: st.DrawFn, numa: NUMAInfo) -> ImplicitHints | list[TopologyHint]:
    nodes = list(numa.nodes)
    outside = draw(st.booleans()) and draw(st.integers(0, 5)) == 0  # sometimes a top beyond the machine
    pool = [*nodes, max(nodes) + 1] if outside else nodes
    top_nodes = draw(st.sets(st.sampled_from(pool), min_size=1))
    top = 0
    for x in top_nodes:
        top |= 1 << x
    weights = {x: draw(st.integers(0, 3)) for x in top_nodes}
    threshold = draw(st.integers(0, sum(weights.values())))
    required = 0
    for x in draw(st.sets(st.sampled_from(sorted(top_nodes)), max_size=1)):
        required |= 1 << x
    extras = [h for h in draw(st.lists(hints_for(numa), max_size=2)) if h.mask is not None]
    fam = _implicit_family(top, weights, threshold, required, draw(st.integers(0, 2)), extras)
    if not fam.materialize or not fam.materialize():
        return []  # providers answer [] when nothing passes, never an empty implicit list
    return fam


@st.composite
def implicit_merge_scenarios(draw: st.DrawFn) -> tuple[str, NUMAInfo, list[ProviderAnswer], bool]:
    numa = draw(numa_infos(max_nodes=4).filter(lambda n: len(n.nodes) > 0))
    providers: list[ProviderAnswer] = []
    for p in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["none", "implicit", "implicit", "explicit"]))
        if kind == "none":
            providers.append(draw(st.sampled_from([None, {}])))
            continue
        pmap: dict[str, Any] = {}
        for r in range(draw(st.integers(1, 2))):
            if kind == "implicit":
                pmap[f"r{p}{r}"] = draw(implicit_lists(numa))
            else:
                pmap[f"r{p}{r}"] = draw(st.one_of(st.none(), st.lists(hints_for(numa), max_size=3)))
        providers.append(pmap)
    policy = draw(st.sampled_from(POLICIES))
    closest = draw(st.booleans()) and numa.distances is not None
    return policy, numa, providers, closest


@st.composite
def closest_cases(draw: st.DrawFn) -> tuple[NUMAInfo, list[int], int, frozenset[int], int]:
    n = draw(st.integers(2, 9))
    ids = sorted(draw(st.sets(st.integers(0, 11), min_size=n, max_size=n)))
    # sockets give twin classes; a few random edits break some of them
    socket = {x: draw(st.integers(0, 2)) for x in ids}
    between = {(a, b): draw(st.sampled_from([11, 12, 20, 21, 30])) for a in range(3) for b in range(3)}
    width = max(ids) + 1
    rows = {x: [10 if x == y else between[socket[x], socket.get(y, 0)] for y in range(width)] for x in ids}
    for _ in range(draw(st.integers(0, 2))):
        x, y = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
        rows[x][y] = draw(st.sampled_from([10, 11, 15, 40]))
    numa = NUMAInfo.create(ids, rows)
    size = draw(st.integers(1, n))
    every = [mask_of(c) for c in combinations(ids, size)]
    allowed = frozenset(draw(st.lists(st.sampled_from(every), max_size=len(every))))
    need = draw(st.sampled_from(ids))
    return numa, ids, size, allowed, need


HintScenario = tuple[list[ProviderAnswer], list[ProviderHints], NUMAInfo, str, bool]


@st.composite
def hint_scenarios(draw: st.DrawFn, max_nodes: int) -> HintScenario:
    c = draw(cpu_cases(max_nodes=max_nodes))
    nodes = sorted(c.topo.details.numa_nodes())
    width = max(nodes) + 1
    dist = {i: [10 if i == j else draw(st.sampled_from([11, 12, 20, 21])) for j in range(width)] for i in nodes}
    numa = NUMAInfo.create(nodes, dist)
    fast: list[ProviderAnswer] = []
    slow: list[ProviderHints] = []
    for kind in draw(st.lists(st.sampled_from(["cpu", "gpu", "gpu+nic", "memory", "explicit"]), max_size=4)):
        if kind == "cpu":
            args = (c.topo, c.available, c.reusable, c.request, c.align_by_socket)
            fast.append({"cpu": cpu_topology_hints(*args)})
            slow.append({"cpu": generate_cpu_topology_hints(*args)})
        elif kind.startswith("gpu"):
            fmap: dict[str, ListOrImplicit] = {}
            smap: dict[str, list[TopologyHint] | None] = {}
            for res in kind.split("+"):
                d = draw(device_cases(nodes=nodes))
                dargs = (d.nodes, d.devices, d.available, d.reusable, d.request)
                fmap[res] = device_topology_hints(*dargs)
                smap[res] = generate_device_topology_hints(*dargs)
            fast.append(fmap)
            slow.append(smap)
        elif kind == "memory":
            m = draw(memory_cases(nodes=nodes))
            fast.append(memory_topology_hints(m.state, m.requested, m.reusable))
            slow.append(dict(calculate_hints(m.state, m.requested, m.reusable)))
        else:
            hints = draw(st.one_of(st.none(), st.lists(hints_for(numa), max_size=3)))
            fast.append({"x": hints})
            slow.append({"x": hints})
    policy = draw(st.sampled_from(["best-effort", "restricted", "single-numa-node"]))
    return fast, slow, numa, policy, draw(st.booleans())
