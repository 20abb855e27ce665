"""Upstream policy_static_test.go tables: Start, Add (Allocate), ReuseCPUs, Remove, allocateCPUs."""

from __future__ import annotations

import pytest

from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, CheckpointError, ConfigError
from numalign.k8s.cpuset import parse_cpuset
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.cpumanager.take import TakeOptions, allocate_cpus
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology

P = parse_cpuset


def build(rows: dict[int, tuple[int, int, int, int]]) -> CPUTopology:
    return CPUTopology.from_cpu_infos(
        CPUInfo(cpu=c, core=core, socket=s, numa_node=n, uncore=u) for c, (core, s, n, u) in rows.items()
    )


SSHT = build({c: (c % 4, 0, 0, 0) for c in range(8)})
DSHT = build({c: (c % 6, c % 2, c % 2, 0) for c in range(12)})
DSNOHT = build({c: (c, c // 4, c // 4, 0) for c in range(8)})
MULTI = build({c: (c % 40, (c % 40) // 20, (c % 40) // 10, 0) for c in range(80)})


class Store:
    def __init__(self, hint: TopologyHint | None) -> None:
        self.hint = hint or TopologyHint(None, False)

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return self.hint


def make_pod(container: str, request: str, limit: str) -> tuple[Pod, Container]:
    c = Container(
        name=container,
        requests={"cpu": Quantity.parse(request), "memory": Quantity.parse("1G")},
        limits={"cpu": Quantity.parse(limit), "memory": Quantity.parse("1G")},
    )
    return Pod(name="fakePod", uid="fakePod", containers=(c,)), c


def set_state(p: StaticPolicy, default: str, entries: dict[str, str]) -> None:
    # Upstream's tests use a mock state without validation; so do we.
    p.state = CPUManagerState("static", P(default), {"fakePod": {n: P(s) for n, s in entries.items()}})


@pytest.mark.parametrize(
    ("topo", "reserved", "entries", "default", "err", "expect"),
    [
        (DSHT, 0, {"0": "0"}, "1-11", None, "1-11"),
        (DSHT, 1, {}, "", None, "0-11"),
        (DSHT, 2, {}, "0,1", 'not all reserved cpus: "0,6" are present in defaultCpuSet: "0-1"', None),
        (DSHT, 0, {"0": "0-2"}, "2-11",
         'pod: fakePod, container: 0 cpuset: "0-2" overlaps with default cpuset "2-11"', None),
        (DSHT, 0, {"0": "0-2", "1": "3,4"}, "5-12",
         'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-12"', None),
        (DSHT, 0, {"0": "0-2", "1": "3,4"}, "5-10",
         'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-10"', None),
    ],
)
def test_start(
    topo: CPUTopology, reserved: int, entries: dict[str, str], default: str, err: str | None, expect: str | None
) -> None:
    p = StaticPolicy(topo, reserved)
    st = CPUManagerState("static", P(default), {"fakePod": {n: P(s) for n, s in entries.items()}} if entries else {})
    if err is not None:
        with pytest.raises(CheckpointError) as e:
            p.start(st)
        assert str(e.value).startswith(err)
    else:
        p.start(st)
        assert p.state.default_cpu_set == P(expect or "")


OPTIONS_INSENSITIVE = [
    (SSHT, 1, {"fakeContainer100": "2,3,6,7"}, "0,1,4,5", "fakeContainer3", "2000m", "1,5"),
    (DSHT, 1, {"fakeContainer100": "2"}, "0,1,3-11", "fakeContainer3", "6000m", "1,3,5,7,9,11"),
    (DSHT, 1, {"fakeContainer100": "1,5"}, "0,2-4,6-11", "fakeContainer3", "6000m", "2-4,8-10"),
    (DSNOHT, 1, {"fakeContainer100": ""}, "0,1,3-7", "fakeContainer1", "4000m", "4-7"),
    (DSNOHT, 1, {"fakeContainer100": "4,5"}, "0,1,3,6,7", "fakeContainer1", "4000m", "1,3,6,7"),
    (DSHT, 1, {"fakeContainer100": "2"}, "0,1,3-11", "fakeContainer3", "8000m", "1,3-5,7,9-11"),
]


@pytest.mark.parametrize("options", [None, {"full-pcpus-only": "true"}])
@pytest.mark.parametrize(("topo", "reserved", "entries", "default", "name", "cpu", "expect"), OPTIONS_INSENSITIVE)
def test_add_options_insensitive(
    options: dict[str, str] | None, topo: CPUTopology, reserved: int, entries: dict[str, str],
    default: str, name: str, cpu: str, expect: str,
) -> None:
    p = StaticPolicy(topo, reserved, affinity=Store(None), options=options)
    set_state(p, default, entries)
    pod, c = make_pod(name, cpu, cpu)
    p.allocate(pod, c)
    got = p.get_cpu_set("fakePod", name)
    assert got == P(expect)
    assert not got & p.state.default_cpu_set


@pytest.mark.parametrize(
    ("request_", "limit"), [("1000m", "2000m"), ("977m", "977m")]
)
def test_add_no_alloc(request_: str, limit: str) -> None:
    p = StaticPolicy(SSHT, 1, affinity=Store(None))
    set_state(p, "0-7", {})
    pod, c = make_pod("fakeContainer1", request_, limit)
    p.allocate(pod, c)
    assert p.get_cpu_set("fakePod", "fakeContainer1") is None


@pytest.mark.parametrize(
    ("topo", "entries", "default", "name", "cpu", "expect", "err"),
    [
        (SSHT, {}, "0-7", "fakeContainer2", "1000m", "4", None),
        (SSHT, {}, "0-7", "fakeContainer2", "8000m", None, "not enough cpus available to satisfy request"),
        (SSHT, {"fakeContainer3": "2,3,6,7"}, "0,1,4,5", "fakeContainer3", "4000m", "2,3,6,7", None),
        (DSHT, {"fakeContainer100": "1-3"}, "0,4-11", "fakeContainer5", "10000m", None,
         "not enough cpus available to satisfy request"),
        (SSHT, {"fakeContainer100": "1-6"}, "0,7", "fakeContainer5", "2000m", None,
         "not enough cpus available to satisfy request"),
    ],
)
def test_add_default_options(
    topo: CPUTopology, entries: dict[str, str], default: str, name: str, cpu: str, expect: str | None, err: str | None
) -> None:
    p = StaticPolicy(topo, 1, affinity=Store(None))
    set_state(p, default, entries)
    pod, c = make_pod(name, cpu, cpu)
    if err is not None:
        with pytest.raises(AllocationError, match=err):
            p.allocate(pod, c)
        assert p.get_cpu_set("fakePod", name) is None
        assert p.pinning_errors_total == 1
        return
    p.allocate(pod, c)
    assert p.get_cpu_set("fakePod", name) == P(expect or "")


@pytest.mark.parametrize(
    ("reserved", "explicit", "default", "cpu", "expect", "err"),
    [
        (1, "", "0-7", "1000m", None, "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"),
        (2, "1,6", "0,2-5,7-11", "10000m", None,
         "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 8, "
         "requested CPUs = 10, CPUs per core = 2"),
        (2, "", "1-5,7-11", "10000m", "1-5,7-11", None),
        (2, "0,6", "1-5,7-11", "10000m", "1-5,7-11", None),
    ],
)
def test_add_full_pcpus_only(
    reserved: int, explicit: str, default: str, cpu: str, expect: str | None, err: str | None
) -> None:
    topo = SSHT if cpu == "1000m" else DSHT
    p = StaticPolicy(
        topo, reserved, reserved_cpus=P(explicit), affinity=Store(None), options={"full-pcpus-only": "true"}
    )
    set_state(p, default, {})
    pod, c = make_pod("c", cpu, cpu)
    if err is not None:
        with pytest.raises(AllocationError) as e:
            p.allocate(pod, c)
        assert str(e.value) == err and e.value.reason == "SMTAlignmentError"
        return
    p.allocate(pod, c)
    assert p.get_cpu_set("fakePod", "c") == P(expect or "")


@pytest.mark.parametrize(("align", "expect"), [("true", "2,11"), ("false", "2,21")])
def test_add_align_by_socket(align: str, expect: str) -> None:
    p = StaticPolicy(
        MULTI, 1, affinity=Store(TopologyHint.of([0, 2], True)),
        options={"align-by-socket": align}, feature_gates={"CPUManagerPolicyAlphaOptions": True},
    )
    set_state(p, "2,11,21,22", {})
    pod, c = make_pod("fakeContainer2", "2000m", "2000m")
    p.allocate(pod, c)
    assert p.get_cpu_set("fakePod", "fakeContainer2") == P(expect)


def test_reuse_cpus_of_init_container() -> None:
    p = StaticPolicy(SSHT, 0, affinity=Store(None))
    set_state(p, "0-7", {})
    q = {"cpu": Quantity.parse("4000m"), "memory": Quantity.parse("1G")}
    r = {"cpu": Quantity.parse("2000m"), "memory": Quantity.parse("1G")}
    init = Container("initContainer-0", requests=q, limits=q, is_init=True)
    app = Container("appContainer-0", requests=r, limits=r)
    pod = Pod(name="p", uid="fakePod", init_containers=(init,), containers=(app,))
    for c in pod.all_containers():
        p.allocate(pod, c)
    assert p.state.default_cpu_set == P("2,3,6,7")
    p.remove_container("fakePod", "initContainer-0")
    assert p.state.default_cpu_set == P("1-3,5-7")
    assert p.get_cpu_set("fakePod", "initContainer-0") is None


@pytest.mark.parametrize(
    ("name", "entries", "default", "expect"),
    [
        ("fakeContainer1", {"fakeContainer1": "1-3"}, "4-7", "1-7"),
        ("fakeContainer1", {"fakeContainer1": "1-3", "fakeContainer2": "4-7"}, "", "1-3"),
        ("fakeContainer1", {"fakeContainer1": "1,3,5", "fakeContainer2": "2,4"}, "6,7", "1,3,5-7"),
        ("fakeContainer2", {"fakeContainer1": "1,3,5"}, "2,4,6,7", "2,4,6,7"),
    ],
)
def test_remove(name: str, entries: dict[str, str], default: str, expect: str) -> None:
    p = StaticPolicy(SSHT, 0)
    set_state(p, default, entries)
    p.remove_container("fakePod", name)
    assert p.state.default_cpu_set == P(expect)
    assert p.get_cpu_set("fakePod", name) is None


@pytest.mark.parametrize(
    ("n", "mask", "expect"),
    [
        (2, None, "0,6"),
        (2, [0], "0,6"),
        (2, [1], "1,7"),
        (8, [0], "0,6,2,8,4,10,1,7"),
        (8, [1], "1,7,3,9,5,11,0,6"),
    ],
)
def test_topology_aware_allocate_cpus(n: int, mask: list[int] | None, expect: str) -> None:
    affinity = None if mask is None else TopologyHint.of(mask, True).mask
    got = allocate_cpus(DSHT, n, affinity, P("0-11"), frozenset(), TakeOptions())
    assert got == P(expect)


@pytest.mark.parametrize(
    ("reserved", "options", "default", "err", "expect"),
    [
        ("0,1", None, "", None, "0-11"),
        ("0,1", {"strict-cpu-reservation": "true"}, "", None, "2-11"),
        ("0,1", None, "2-5", 'not all reserved cpus: "0-1" are present in defaultCpuSet: "2-5"', None),
        ("0,1", {"strict-cpu-reservation": "true"}, "0-5",
         'some of strictly reserved cpus: "0-1" are present in defaultCpuSet: "0-5"', None),
    ],
)
def test_start_with_reserved_list(
    reserved: str, options: dict[str, str] | None, default: str, err: str | None, expect: str | None
) -> None:
    p = StaticPolicy(DSHT, 2, reserved_cpus=P(reserved), options=options)
    if err is not None:
        with pytest.raises(CheckpointError) as e:
            p.start(CPUManagerState("static", P(default)))
        assert str(e.value).startswith(err)
        return
    p.start(CPUManagerState("static", P(default)))
    assert p.state.default_cpu_set == P(expect or "")


def test_reserved_list_size_must_match_count() -> None:
    with pytest.raises(ConfigError) as e:
        StaticPolicy(DSHT, 1, reserved_cpus=P("0,1"))
    assert str(e.value) == "[cpumanager] unable to reserve the required amount of CPUs (size of 0-1 did not equal 1)"


@pytest.mark.parametrize(
    ("count", "reserved", "entries", "default", "name", "cpu", "expect", "err"),
    [
        (1, "0", {}, "0-7", "fakeContainer2", "8000m", None,
         "not enough cpus available to satisfy request: requested=8, available=7"),
        (2, "0,1", {}, "0-7", "fakeContainer2", "1000m", "4", None),
        (2, "0,1", {"fakeContainer100": "2,3,6,7"}, "0,1,4,5", "fakeContainer3", "2000m", "4,5", None),
    ],
)
def test_add_with_reserved_list(
    count: int, reserved: str, entries: dict[str, str], default: str, name: str, cpu: str,
    expect: str | None, err: str | None,
) -> None:
    p = StaticPolicy(SSHT, count, reserved_cpus=P(reserved), affinity=Store(None))
    set_state(p, default, entries)
    pod, c = make_pod(name, cpu, cpu)
    if err is not None:
        with pytest.raises(AllocationError) as e:
            p.allocate(pod, c)
        assert str(e.value) == err
        assert p.get_cpu_set("fakePod", name) is None
        return
    p.allocate(pod, c)
    got = p.get_cpu_set("fakePod", name)
    assert got == P(expect or "")
    assert not got & p.state.default_cpu_set
