"""The static policy's CPU sets as int masks (topology.cpu_mask, CPUTopology.mask_of / cpus_of): the masks
answer what the sets did, the pools stay what set arithmetic gives, and a state replaced from outside the
policy is read again."""

from __future__ import annotations

import random

import pytest

from numalign.core.hint import TopologyHint
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager import topology as topology_module
from numalign.kubelet.cpumanager.hints import generate_cpu_topology_hints
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology, cpu_mask, cpus_in_mask


def build(rows: dict[int, tuple[int, int, int, int]]) -> CPUTopology:
    """rows: cpu -> (core, socket, numa, uncore)."""
    return CPUTopology.from_cpu_infos(
        CPUInfo(cpu=c, core=core, socket=s, numa_node=n, uncore=u) for c, (core, s, n, u) in rows.items()
    )


# 2 sockets x 2 NUMA nodes x 8 cores x 2 threads, 64 CPUs: ids past 62 make the masks Python longs.
WIDE = build({c: (c % 32, (c % 32) // 16, (c % 32) // 8, (c % 32) // 4) for c in range(64)})


@pytest.mark.parametrize("top", [0, 1, 7, 8, 61, 62, 63, 64, 65, 127, 1000, 8191])
def test_mask_round_trip(top: int) -> None:
    rng = random.Random(top)
    cpus = {top} | set(rng.sample(range(top + 1), min(top + 1, 40)))
    mask = cpu_mask(cpus)
    assert mask == sum(1 << c for c in cpus)
    assert cpus_in_mask(mask) == sorted(cpus)
    assert cpus_in_mask(0) == [] and cpu_mask(()) == 0


def test_one_set_object_per_mask() -> None:
    topo = build({c: (c, 0, c // 4, 0) for c in range(8)})
    got = topo.cpus_of(0b1011_0001)
    assert got == {0, 4, 5, 7}
    assert topo.cpus_of(0b1011_0001) is got
    assert topo.mask_of(got) == 0b1011_0001
    assert topo.mask_of(frozenset({1, 2})) == 0b110  # a set never handed out: read CPU by CPU
    # CPUs outside the topology keep their bits (upstream reads them as NUMA node 0's)
    assert topo.mask_of(frozenset({9})) == 1 << 9 and topo.cpus_of(1 << 9) == {9}


def test_kept_sets_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topology_module, "CPU_SETS_KEPT", 4)
    topo = build({c: (c, 0, 0, 0) for c in range(8)})
    first = topo.cpus_of(1)
    for mask in range(2, 12):
        assert topo.cpus_of(mask) == set(cpus_in_mask(mask))
    again = topo.cpus_of(1)
    assert again == first and again is not first  # the table was cleared and made the set again


def test_hints_count_cpus_outside_the_topology_on_node_0() -> None:
    topo = build({c: (c % 4, 0, c // 4, 0) for c in range(8)})  # node 0: 0-3, node 1: 4-7
    # Two free CPUs outside the machine count for node 0, as upstream's CPUDetails[cpu] reads them.
    assert generate_cpu_topology_hints(topo, {100, 101}, (), 2) == [
        TopologyHint.of([0], True), TopologyHint.of([0, 1], False)]
    # A reusable CPU outside the machine pins node 0 into every hint.
    assert generate_cpu_topology_hints(topo, {4, 5}, {100}, 2) == [TopologyHint.of([0, 1], False)]


def _ctr(name: str, cpus: int) -> Container:
    res = {"cpu": Quantity.parse(str(cpus)), "memory": Quantity.parse("1G")}
    return Container(name=name, requests=res, limits=res)


def test_pools_follow_set_arithmetic() -> None:
    """Random admissions and removals: the default set, the available CPUs and the gauges stay what the
    CPU sets give, whatever order the masks were made in."""
    rng = random.Random(7)
    p = StaticPolicy(WIDE, 2, reserved_cpus={0, 32})
    p.start()
    all_cpus = WIDE.details.cpus()
    live: dict[str, Pod] = {}
    for step in range(300):
        if live and (rng.random() < 0.45 or len(live) > 12):
            uid = rng.choice(sorted(live))
            pod = live.pop(uid)
            for c in pod.containers:
                p.remove_container(uid, c.name)
        else:
            uid = f"pod-{step}"
            pod = Pod(name=uid, uid=uid, containers=tuple(_ctr(f"c{i}", rng.choice([1, 2, 3, 4, 6]))
                                                          for i in range(rng.choice([1, 1, 2]))))
            try:
                for c in pod.containers:
                    p.allocate(pod, c)
            except Exception:  # not enough CPUs: what was allocated is released, as the kubelet would
                for c in pod.containers:
                    p.remove_container(uid, c.name)
                continue
            live[uid] = pod
        held = frozenset().union(*(s for ctrs in p.state.entries.values() for s in ctrs.values()))
        assert p.state.default_cpu_set == all_cpus - held
        assert p.get_available_cpus() == p.state.default_cpu_set - {0, 32}
        assert p.exclusive_cpu_allocation_count == len(held)
        assert p.shared_pool_size_millicores == len(p.get_available_cpus()) * 1000
        assert set(p.state.entries) == set(live)


def test_a_replaced_state_is_read_again() -> None:
    p = StaticPolicy(WIDE, 1, reserved_cpus={0})
    p.start()
    c = _ctr("app", 2)
    assert p.get_available_cpus() == WIDE.details.cpus() - {0}
    # as the tests and the resize preview do: the state (or its default set) replaced from outside
    p.state = CPUManagerState("static", frozenset({0, 40, 41, 42}), {})
    assert p.get_available_cpus() == {40, 41, 42}
    got = p.get_topology_hints(Pod(name="a", uid="a", containers=(c,)), c)
    assert got is not None and got["cpu"][0] == TopologyHint.of([1], True)  # CPUs 40-42 are node 1's
    assert all(h.mask is not None and h.mask & 0b10 for h in got["cpu"])
    p.state.default_cpu_set = frozenset({0, 1, 2, 40})
    assert p.get_available_cpus() == {1, 2, 40}
    pod = Pod(name="b", uid="b", containers=(c,))
    p.allocate(pod, c)
    taken = p.get_cpu_set("b", "app")
    assert taken is not None and len(taken) == 2 and taken <= {1, 2, 40}
    assert p.state.default_cpu_set == {0, 1, 2, 40} - taken
    p.remove_container("b", "app")
    assert p.state.default_cpu_set == {0, 1, 2, 40}
