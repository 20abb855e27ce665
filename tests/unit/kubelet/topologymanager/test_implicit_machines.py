"""Implicit hints on the built-in machines: equal to the exhaustive path where that is feasible
(8 nodes), and deciding on the 16-, 34- and 64-node machines where upstream's walk never ends."""

from __future__ import annotations

import random

import pytest
from support.reference_merge import policy_merge

from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ProviderAnswer
from numalign.core.numa import NUMAInfo
from numalign.core.policies import PolicyOptions, make_policy
from numalign.k8s.deviceplugin import Device
from numalign.kubelet.cpumanager.hints import generate_cpu_topology_hints
from numalign.kubelet.cpumanager.implicit_hints import cpu_topology_hints
from numalign.kubelet.cpumanager.topology import CPUTopology
from numalign.kubelet.devicemanager.hints import generate_device_topology_hints
from numalign.kubelet.devicemanager.implicit_hints import device_topology_hints
from numalign.kubelet.memorymanager.hints import calculate_hints
from numalign.kubelet.memorymanager.implicit_hints import memory_topology_hints
from numalign.kubelet.memorymanager.policy_static import numa_memory_of
from numalign.kubelet.memorymanager.state import NUMANodeMap, default_machine_state
from numalign.machine.examples import example

GiB = 1 << 30


class Box:
    def __init__(self, name: str) -> None:
        m = example(name)
        self.topo = CPUTopology.from_machine(m)
        self.memory: NUMANodeMap = default_machine_state(numa_memory_of(m))
        self.nodes = sorted(self.memory)
        ids = m.numa_ids()
        dist = {n.id: [n.distances[ids.index(j)] for j in range(max(ids) + 1)] for n in m.numa_nodes if n.distances}
        self.numa = NUMAInfo.create(self.nodes, dist)
        self.devices: dict[str, dict[str, Device]] = {}
        for d in m.devices:
            self.devices.setdefault(d.resource, {})[d.id] = Device(d.id, topology=d.numa_nodes)
        self.cpus = sorted(self.topo.details.cpus())

    def fast(self, free_cpus: list[int], ncpu: int, mem: int, res: str, free_devs: list[str]) -> list[ProviderAnswer]:
        return [
            {"cpu": cpu_topology_hints(self.topo, free_cpus, [], ncpu)},
            memory_topology_hints(self.memory, {"memory": mem}),
            {res: device_topology_hints(self.nodes, self.devices[res], free_devs, [], 1)},
        ]


@pytest.mark.parametrize(
    ("name", "resource", "want"),
    [
        ("snc-16", "intel.com/sriov_netdevice", TopologyHint(1 << 0, True)),
        ("gb200", "nvidia.com/gpu", TopologyHint(1 << 0, True)),
        ("numa-64", "nvidia.com/gpu", TopologyHint(1 << 3, True)),  # the first GPU sits on node 3
    ],
)
def test_guaranteed_pod_on_large_machines(name: str, resource: str, want: TopologyHint) -> None:
    box = Box(name)
    devs = sorted(box.devices[resource])
    got = policy_merge(box.fast(box.cpus, 4, GiB, resource, devs), box.numa, "restricted")
    assert (got.hint, got.admit) == (want, True)
    assert 1 <= len(got.considered) <= 17


def test_numa64_fragmented_is_not_preferred_and_restricted_rejects() -> None:
    box = Box("numa-64")
    last_node_cpus = sorted(box.topo.details.cpus_in_numa_nodes(63))
    gpu_on_3 = [d for d, dev in box.devices["nvidia.com/gpu"].items() if dev.topology == (3,)]
    # CPU hints all contain node 63, GPU hints all contain node 3: {0} = {0,63} & {0,3} & memory {0}
    got = policy_merge(box.fast(last_node_cpus, 4, GiB, "nvidia.com/gpu", gpu_on_3), box.numa, "restricted")
    assert (got.hint, got.admit) == (TopologyHint(1, False), False)
    assert got.best_non_preferred_affinity_count == 1


@pytest.mark.parametrize("seed", range(6))
def test_epyc8_random_states_equal_exhaustive(seed: int) -> None:
    box = Box("epyc-nps4")
    rnd = random.Random(seed)
    free = [c for c in box.cpus if rnd.random() < 0.4]
    ncpu = rnd.choice([2, 8, 20, 40])
    mem = rnd.choice([1, 40, 100]) * GiB
    res = sorted(box.devices)[0]
    devs = [d for d in sorted(box.devices[res]) if rnd.random() < 0.5]
    fast = box.fast(free, ncpu, mem, res, devs)
    slow = [
        {"cpu": generate_cpu_topology_hints(box.topo, free, [], ncpu)},
        dict(calculate_hints(box.memory, {"memory": mem})),
        {res: generate_device_topology_hints(box.nodes, box.devices[res], devs, [], 1)},
    ]
    for policy in ("best-effort", "restricted", "single-numa-node"):
        for closest in (False, True):
            want = make_policy(policy, box.numa, PolicyOptions(prefer_closest_numa=closest)).merge(slow)
            got = policy_merge(fast, box.numa, policy, closest)
            assert (got.hint, got.admit) == (want.hint, want.admit)


@pytest.mark.parametrize("seed", range(10))
def test_twelve_nodes_random_state_equals_exhaustive(seed: int) -> None:
    from numalign.kubelet.cpumanager.topology import CPUInfo
    from numalign.kubelet.memorymanager.state import MemoryTable, NUMANodeState

    rnd = random.Random(seed)
    nodes = list(range(12))
    infos, cpu = [], 0
    for n in nodes:
        for _ in range(4):
            infos.append(CPUInfo(cpu, n, n // 6, cpu, n))
            cpu += 1
    topo = CPUTopology.from_cpu_infos(infos)
    free = [c for c in range(cpu) if rnd.random() < 0.5]
    memory = {
        n: NUMANodeState(0, {"memory": MemoryTable(10, 0, 10, 10 - (f := rnd.randint(0, 10)), f)}, [n]) for n in nodes
    }
    devices = {f"g{i}": Device(f"g{i}", topology=(rnd.choice(nodes),)) for i in range(6)}
    free_devs = [d for d in devices if rnd.random() < 0.5]
    ncpu, mem = rnd.choice([3, 6, 10]), rnd.choice([4, 12, 25])
    fast: list[ProviderAnswer] = [
        {"cpu": cpu_topology_hints(topo, free, [], ncpu)},
        memory_topology_hints(memory, {"memory": mem}),
        {"gpu": device_topology_hints(nodes, devices, free_devs, [], 2)},
    ]
    slow = [
        {"cpu": generate_cpu_topology_hints(topo, free, [], ncpu)},
        dict(calculate_hints(memory, {"memory": mem})),
        {"gpu": generate_device_topology_hints(nodes, devices, free_devs, [], 2)},
    ]
    dist = {i: [10 if i == j else 12 if i // 6 == j // 6 else 21 for j in nodes] for i in nodes}
    numa = NUMAInfo.create(nodes, dist)
    for policy in ("best-effort", "restricted", "single-numa-node"):
        for closest in (False, True):
            want = make_policy(policy, numa, PolicyOptions(prefer_closest_numa=closest)).merge(slow)
            got = policy_merge(fast, numa, policy, closest)
            assert (got.hint, got.admit) == (want.hint, want.admit)
