"""StaticPolicy: upstream topology_hints_test.go / policy_static_test.go cases and lifecycle."""

from __future__ import annotations

import pytest

from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, CheckpointError, ConfigError
from numalign.k8s.cpuset import parse_cpuset
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.policy_static import (
    StaticPolicy,
    guaranteed_cpus,
    num_reserved_cpus,
    pod_guaranteed_cpus,
)
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.topologymanager.provider import HintProvider

P = parse_cpuset


def build(rows: dict[int, tuple[int, int, int, int]]) -> CPUTopology:
    """rows: cpu -> (core, socket, numa, uncore)."""
    return CPUTopology.from_cpu_infos(
        CPUInfo(cpu=c, core=core, socket=s, numa_node=n, uncore=u) for c, (core, s, n, u) in rows.items()
    )


SINGLE_SOCKET_HT = build({c: (c % 4, 0, 0, 0) for c in range(8)})
DUAL_SOCKET_HT = build({c: (c % 6, c % 2, c % 2, 0) for c in range(12)})
DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT = build(
    {c: (c % 40, (c % 40) // 20, (c % 40) // 10, 0) for c in range(80)}
)

# returnMachineInfo(): node 0 = cores (0,6) (1,7) (2,8) on socket 0; node 1 = (3,9) (4,10) (5,11).
MACHINE = build({c: (c % 6, (c % 6) // 3, (c % 6) // 3, (c % 6) // 3) for c in range(12)})


def ctr(name: str, cpu: str, mem: str = "1G", restart: str | None = None, init: bool = False) -> Container:
    res = {"cpu": Quantity.parse(cpu), "memory": Quantity.parse(mem)}
    return Container(name=name, requests=res, limits=res, restart_policy=restart, is_init=init)


def pod(*apps: Container, inits: tuple[Container, ...] = (), uid: str = "pod-uid") -> Pod:
    return Pod(name="fakePod", uid=uid, containers=apps, init_containers=inits)


def hints(*spec: tuple[list[int], bool]) -> list[TopologyHint]:
    return [TopologyHint.of(nodes, pref) for nodes, pref in spec]


class Store:
    def __init__(self, hint: TopologyHint | None = None) -> None:
        self.hint = hint or TopologyHint(None, False)

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return self.hint


def policy(
    topo: CPUTopology = MACHINE,
    default: str = "",
    entries: dict[str, dict[str, frozenset[int]]] | None = None,
    options: dict[str, str] | None = None,
    feature_gates: dict[str, bool] | None = None,
) -> StaticPolicy:
    p = StaticPolicy(topo, 0, options=options, feature_gates=feature_gates)
    p.state = CPUManagerState("static", P(default), entries or {})
    return p


@pytest.mark.parametrize(
    ("cpu", "default", "entries", "expected"),
    [
        ("2", "2-11", None, hints(([0], True), ([1], True), ([0, 1], False))),
        ("5", "2-11", None, hints(([1], True), ([0, 1], False))),
        ("7", "2-11", None, hints(([0, 1], True))),
        ("11", "2-11", None, []),
        ("2", "0,3", None, hints(([0, 1], False))),
        ("5", "0-3", None, []),
        ("2", "", {"0,6"}, hints(([0], True), ([0, 1], False))),
        ("2", "", {"3,9"}, hints(([1], True), ([0, 1], False))),
        ("11", "", {"0-10"}, hints(([0, 1], True))),
        ("2", "", {"0,3,6,9"}, []),
        ("11", "", {"0,3,6,9"}, []),
    ],
)
def test_get_topology_hints(cpu: str, default: str, entries: set[str] | None, expected: list[TopologyHint]) -> None:
    c = ctr("fakeContainer", cpu)
    p = pod(c)
    state_entries = {"pod-uid": {"fakeContainer": P(next(iter(entries)))}} if entries else None
    pol = policy(default=default, entries=state_entries)
    got = pol.get_topology_hints(p, c)
    assert got == {"cpu": expected}
    assert pol.get_pod_topology_hints(p) == {"cpu": expected}


def test_hints_with_align_by_socket() -> None:
    c2 = ctr("fakeContainer", "2")
    opts = {"align-by-socket": "true"}
    gates = {"CPUManagerPolicyAlphaOptions": True}
    on = policy(DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT, "2,3,11", options=opts, feature_gates=gates)
    off = policy(DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT, "2,3,11")
    rest = [([0, 2], False), ([0, 3], False), ([0, 1, 2], False), ([0, 1, 3], False),
            ([0, 2, 3], False), ([0, 1, 2, 3], False)]
    assert off.get_pod_topology_hints(pod(c2)) == {"cpu": hints(([0], True), ([0, 1], False), *rest)}
    assert on.get_pod_topology_hints(pod(c2)) == {"cpu": hints(([0], True), ([0, 1], True), *rest)}
    c41 = ctr("fakeContainer", "41")
    wide = policy(DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT, "0-28,40-57", options=opts, feature_gates=gates)
    assert wide.get_pod_topology_hints(pod(c41)) == {"cpu": hints(([0, 1, 2], True), ([0, 1, 2, 3], True))}


def _pod_with(inits: list[tuple[str, str | None]], apps: list[str]) -> Pod:
    ic = tuple(ctr(f"init{i}", r, restart=rp, init=True) for i, (r, rp) in enumerate(inits))
    ac = tuple(ctr(f"app{i}", r) for i, r in enumerate(apps))
    return pod(*ac, inits=ic)


@pytest.mark.parametrize(
    ("inits", "apps", "expected"),
    [
        ([("0", None)], ["0"], 0),
        ([("0", None)], ["2"], 0),
        ([("2", None)], ["0"], 0),
        ([("2", None)], ["2"], 2),
        ([("5", None)], ["5"], 5),
        ([("2", None)], ["5"], 5),
        ([("5", None)], ["2"], 5),
        ([("2", None), ("4", None)], ["2", "4"], 6),
        ([("1", "Always")], ["1"], 2),
        ([("5", None), ("1", "Always"), ("2", "Always"), ("3", "Always")], ["1"], 7),
        ([("5", None), ("1", "Always"), ("2", "Always"), ("5", None), ("3", "Always")], ["1"], 8),
        ([("10", "Always"), ("200", None)], ["100"], 210),
    ],
)
def test_pod_guaranteed_cpus(inits: list[tuple[str, str | None]], apps: list[str], expected: int) -> None:
    assert pod_guaranteed_cpus(_pod_with(inits, apps)) == expected


def test_guaranteed_cpus_integral_only() -> None:
    assert guaranteed_cpus(pod(ctr("a", "1500m")), ctr("a", "1500m")) == 0
    assert guaranteed_cpus(pod(ctr("a", "2000m")), ctr("a", "2000m")) == 2
    burst = Container("b", requests={"cpu": Quantity.parse("2")}, limits={"cpu": Quantity.parse("4")})
    assert guaranteed_cpus(pod(burst), burst) == 0


def test_reserved_from_count_takes_lowest_core() -> None:
    p = StaticPolicy(SINGLE_SOCKET_HT, 2)
    assert p.reserved_cpus == {0, 4}
    assert p.reserved_physical_cpus == {0, 4}
    explicit = StaticPolicy(SINGLE_SOCKET_HT, 1, reserved_cpus={1})
    assert explicit.reserved_cpus == {1} and explicit.reserved_physical_cpus == {1, 5}


def test_reserved_count_mismatch_and_unknown_cpu() -> None:
    with pytest.raises(ConfigError, match="did not equal 3"):
        StaticPolicy(SINGLE_SOCKET_HT, 3, reserved_cpus={0, 1})
    with pytest.raises(ConfigError, match="unknown CPU ID: 42"):
        StaticPolicy(SINGLE_SOCKET_HT, 1, reserved_cpus={42})


def test_num_reserved_cpus() -> None:
    assert num_reserved_cpus(Quantity.parse("1500m")) == 2
    assert num_reserved_cpus(Quantity.parse("2")) == 2
    with pytest.raises(ConfigError, match="unable to determine reserved CPU"):
        num_reserved_cpus(None)
    with pytest.raises(ConfigError, match="greater than zero"):
        num_reserved_cpus(Quantity.parse("0"))


def test_start_initializes_and_validates() -> None:
    p = StaticPolicy(DUAL_SOCKET_HT, 1)
    p.start()
    assert p.state.default_cpu_set == P("0-11")
    assert p.get_available_cpus() == P("1-11")
    strict = StaticPolicy(DUAL_SOCKET_HT, 1, options={"strict-cpu-reservation": "true"})
    strict.start()
    assert strict.state.default_cpu_set == P("1-11")
    with pytest.raises(CheckpointError, match="default cpuset cannot be empty"):
        p.start(CPUManagerState("static", frozenset(), {"u": {"c": P("2")}}))
    with pytest.raises(CheckpointError, match='not all reserved cpus: "0" are present'):
        p.start(CPUManagerState("static", P("1-11")))
    with pytest.raises(CheckpointError, match="overlaps with default cpuset"):
        p.start(CPUManagerState("static", P("0-11"), {"u": {"c": P("2")}}))
    with pytest.raises(CheckpointError, match="doesn't match with CPUs in state"):
        p.start(CPUManagerState("static", P("0-10")))
    with pytest.raises(CheckpointError, match="strictly reserved cpus"):
        strict.start(CPUManagerState("static", P("0-11")))
    with pytest.raises(CheckpointError, match='configured policy "static" differs'):
        p.restore(CPUManagerState("none", P("0-11")))


def test_allocate_remove_round_trip_and_metrics() -> None:
    store = Store(TopologyHint.of([1], True))
    p = StaticPolicy(DUAL_SOCKET_HT, 1, affinity=store)
    assert isinstance(p, HintProvider)
    p.start()
    c = ctr("app", "4")
    pd = pod(c)
    p.allocate(pd, c)
    got = p.get_cpu_set("pod-uid", "app")
    assert got == P("1,3,7,9")  # two whole cores of NUMA 1
    assert p.state.default_cpu_set == P("0-11") - got
    assert p.pinning_requests_total == 1 and p.exclusive_cpu_allocation_count == 4
    assert p.shared_pool_size_millicores == 7000
    assert p.get_exclusive_cpus("pod-uid", "app") == got
    assert p.cpus_for_container("pod-uid", "other") == p.state.default_cpu_set
    assert p.get_exclusive_cpus("pod-uid", "other") == frozenset()
    assert p.allocated_per_numa() == {0: 0, 1: 4}
    p.allocate(pd, c)  # idempotent
    assert p.get_cpu_set("pod-uid", "app") == got
    snap = p.snapshot()
    q = StaticPolicy(DUAL_SOCKET_HT, 1, affinity=store)
    q.restore(snap)
    assert q.get_cpu_set("pod-uid", "app") == got and q.exclusive_cpu_allocation_count == 4
    p.remove_container("pod-uid", "app")
    assert p.state.default_cpu_set == P("0-11") and p.state.entries == {}
    assert p.exclusive_cpu_allocation_count == 0


def test_shared_pool_containers_get_nothing() -> None:
    p = StaticPolicy(DUAL_SOCKET_HT, 1)
    p.start()
    c = ctr("app", "1500m")
    assert p.get_topology_hints(pod(c), c) is None
    p.allocate(pod(c), c)
    assert p.state.entries == {} and p.pinning_requests_total == 0


def test_full_pcpus_only_errors() -> None:
    p = StaticPolicy(DUAL_SOCKET_HT, 1, options={"full-pcpus-only": "true"})
    p.start()
    odd = ctr("app", "3")
    with pytest.raises(AllocationError) as e:
        p.allocate(pod(odd), odd)
    assert e.value.reason == "SMTAlignmentError"
    assert str(e.value) == "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"
    big = ctr("app", "12")
    with pytest.raises(AllocationError) as e:
        p.allocate(pod(big), big)
    assert str(e.value) == (
        "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 10, "
        "requested CPUs = 12, CPUs per core = 2"
    )
    assert p.pinning_errors_total == 2 and p.aligned_physical_cpu_failures_total == 2


def test_init_container_cpus_are_reused() -> None:
    p = StaticPolicy(DUAL_SOCKET_HT, 1, affinity=Store())
    p.start()
    init = ctr("init", "4", init=True)
    app = ctr("app", "4")
    pd = pod(app, inits=(init,))
    p.allocate(pd, init)
    init_cpus = p.get_cpu_set("pod-uid", "init")
    assert init_cpus is not None
    assert p.cpus_to_reuse["pod-uid"] == init_cpus
    p.allocate(pd, app)
    assert p.get_cpu_set("pod-uid", "app") == init_cpus
    assert p.cpus_to_reuse["pod-uid"] == frozenset()
    # Removing the init container keeps CPUs the app still holds out of the shared pool.
    p.remove_container("pod-uid", "init")
    assert not (init_cpus & p.state.default_cpu_set)
    assert p.remove_stale_state([]) == [("pod-uid", "app")]
    assert p.state.default_cpu_set == P("0-11")


def test_regenerated_hints_after_size_mismatch_are_empty_in_pod_scope() -> None:
    c = ctr("app", "2")
    p = policy(default="2-11", entries={"pod-uid": {"app": P("0,6,1")}})
    assert p.get_pod_topology_hints(pod(c)) == {"cpu": []}
