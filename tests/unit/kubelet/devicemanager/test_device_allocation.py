"""Allocation: ported from upstream TestTopologyAlignedAllocation, TestGetPreferredAllocationParameters,
TestInitContainerDeviceAllocation, TestRestartableInitContainerDeviceAllocation, plus error paths."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DevicePluginOptions
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.devicemanager.allocation import AllocationRequest, devices_to_allocate
from numalign.kubelet.devicemanager.endpoint import StaticEndpoint
from numalign.kubelet.devicemanager.manager import DeviceManager
from numalign.kubelet.devicemanager.pod_devices import PodDevices

R = "example.com/dev"
ANY = TopologyHint(None, True)


class FixedAffinity:
    def __init__(self, hint: TopologyHint) -> None:
        self.hint = hint
        self.asked: list[tuple[str, str]] = []

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        self.asked.append((pod_uid, container_name))
        return self.hint


def numa(dev_id: str, *nodes: int) -> Device:
    return Device(dev_id, topology=tuple(nodes))


def ctr(name: str, n: int, resource: str = R, *, init: bool = False, restart: str | None = None) -> Container:
    return Container(name, limits={resource: Quantity.from_int(n)}, is_init=init, restart_policy=restart)


def manager(
    devices: Sequence[Device],
    hint: TopologyHint = ANY,
    endpoint: StaticEndpoint | None = None,
    numa_nodes: Sequence[int] = (0, 1),
) -> DeviceManager:
    m = DeviceManager(numa_nodes, FixedAffinity(hint))
    m.register_endpoint(R, endpoint or StaticEndpoint(R, devices))
    m.update_devices(R, devices)
    return m


def alignment(m: DeviceManager, ids: Sequence[str]) -> dict[int, int]:
    out: dict[int, int] = {}
    for d in ids:
        topo = m.all_devices[R][d].topology
        if topo:
            out[topo[0]] = out.get(topo[0], 0) + 1
    return out


def pick(m: DeviceManager, request: int, reusable: set[str] | None = None) -> list[str]:
    got = devices_to_allocate(m, AllocationRequest("podUID", "containerName", R, request, reusable or set()))
    assert got is not None
    return got


def hundred_each() -> list[Device]:
    return [numa(f"Dev{i}", 0) for i in range(100)] + [numa(f"Dev{i}", 1) for i in range(100, 200)]


@dataclass
class AlignedCase:
    description: str
    request: int
    devices: list[Device]
    hint_nodes: tuple[int, ...]
    expected_alignment: dict[int, int]
    preferred: list[str] | None = None
    expected_preferred: list[str] = field(default_factory=list)


SIX = [numa(f"Dev{i}", (i + 1) % 2) for i in range(1, 7)]
ALIGNED_CASES = [
    AlignedCase("Single Request, no alignment", 1, [Device("Dev1"), Device("Dev2")], (0, 1), {}),
    AlignedCase("Request for 1, partial alignment", 1, [Device("Dev1"), numa("Dev2", 1)], (1,), {1: 1}),
    AlignedCase("Single Request, socket 0", 1, [numa("Dev1", 0), numa("Dev2", 1)], (0,), {0: 1}),
    AlignedCase("Single Request, socket 1", 1, [numa("Dev1", 0), numa("Dev2", 1)], (1,), {1: 1}),
    AlignedCase("Request for 2, socket 0", 2, SIX[:4], (0,), {0: 2}),
    AlignedCase("Request for 2, socket 1", 2, SIX[:4], (1,), {1: 2}),
    AlignedCase("Request for 4, unsatisfiable, prefer socket 0", 4, SIX, (0,), {0: 3, 1: 1}),
    AlignedCase("Request for 4, unsatisfiable, prefer socket 1", 4, SIX, (1,), {0: 1, 1: 3}),
    AlignedCase("Request for 4, multisocket", 4, [numa(f"Dev{i}", (i - 1) % 4) for i in range(1, 9)],
                (1, 3), {1: 2, 3: 2}),
    AlignedCase("Request for 5, socket 0, preferred aligned accepted", 5, hundred_each(), (0,), {0: 5},
                ["Dev0", "Dev19", "Dev83", "Dev42", "Dev77"], ["Dev0", "Dev19", "Dev83", "Dev42", "Dev77"]),
    AlignedCase("Request for 5, socket 0, preferred aligned accepted, unaligned ignored", 5, hundred_each(),
                (0,), {0: 5}, ["Dev0", "Dev19", "Dev83", "Dev150", "Dev186"], ["Dev0", "Dev19", "Dev83"]),
    AlignedCase("Request for 5, socket 1, preferred aligned accepted, bogus ignored", 5,
                [numa(f"Dev{i}", 1) for i in range(100)], (1,), {1: 5},
                ["Dev0", "Dev19", "Dev83", "bogus0", "bogus1"], ["Dev0", "Dev19", "Dev83"]),
    AlignedCase("Request for 5, multisocket, preferred accepted", 5,
                [numa(f"Dev{i}", 0) for i in range(3)] + [numa(f"Dev{i}", 1) for i in range(3, 100)], (0,),
                {0: 3, 1: 2}, ["Dev0", "Dev1", "Dev2", "Dev42", "Dev83"], ["Dev0", "Dev1", "Dev2", "Dev42", "Dev83"]),
    AlignedCase("Request for 5, multisocket, preferred unaligned accepted, bogus ignored", 5,
                [numa(f"Dev{i}", 0) for i in range(3)] + [numa(f"Dev{i}", 1) for i in range(3, 100)], (0,),
                {0: 3, 1: 2}, ["Dev0", "Dev1", "Dev2", "Dev42", "bogus0"], ["Dev0", "Dev1", "Dev2", "Dev42"]),
]  # fmt: skip


@pytest.mark.parametrize("case", ALIGNED_CASES, ids=lambda c: c.description)
def test_topology_aligned_allocation(case: AlignedCase) -> None:
    answer = case.preferred
    endpoint = StaticEndpoint(R, case.devices, preferred_fn=None if answer is None else lambda a, m, s: answer)
    m = manager(case.devices, TopologyHint.of(case.hint_nodes, True), endpoint)
    got = pick(m, case.request)
    assert len(got) == len(set(got)) == case.request
    assert set(case.expected_preferred) <= set(got)
    assert alignment(m, got) == case.expected_alignment


PARAM_CASES = [
    ("Request for 1, socket 0, 0 already allocated, 0 reusable", 1, [0] * 4, [], [],
     ["Dev0", "Dev1", "Dev2", "Dev3"], [], 1),
    ("Request for 4, socket 0, 2 already allocated, 2 reusable", 4, [0] * 8, ["Dev0", "Dev5"], ["Dev0", "Dev5"],
     [f"Dev{i}" for i in range(8)], ["Dev0", "Dev5"], 4),
    ("Request for 4, socket 0, 4 already allocated, 2 reusable", 4, [0] * 8, ["Dev0", "Dev5", "Dev4", "Dev1"],
     ["Dev0", "Dev5"], ["Dev0", "Dev2", "Dev3", "Dev5", "Dev6", "Dev7"], ["Dev0", "Dev5"], 4),
    ("Request for 6, multisocket, 2 already allocated, 2 reusable", 6, [0] * 4 + [1] * 4, ["Dev1", "Dev6"],
     ["Dev1", "Dev6"], [f"Dev{i}" for i in range(8)], ["Dev0", "Dev1", "Dev2", "Dev3", "Dev6"], 6),
    ("Request for 6, multisocket, 4 already allocated, 2 reusable", 6, [0] * 4 + [1] * 4,
     ["Dev0", "Dev1", "Dev6", "Dev7"], ["Dev1", "Dev6"], ["Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6"],
     ["Dev1", "Dev2", "Dev3", "Dev6"], 6),
]  # fmt: skip


@pytest.mark.parametrize(
    ("desc", "wanted", "nodes", "allocated", "reusable", "exp_available", "exp_must", "exp_size"),
    PARAM_CASES,
    ids=[c[0] for c in PARAM_CASES],
)
def test_get_preferred_allocation_parameters(
    desc: str,
    wanted: int,
    nodes: list[int],
    allocated: list[str],
    reusable: list[str],
    exp_available: list[str],
    exp_must: list[str],
    exp_size: int,
) -> None:
    devices = [numa(f"Dev{i}", n) for i, n in enumerate(nodes)]
    calls: list[tuple[list[str], list[str], int]] = []

    def record(available: Sequence[str], must: Sequence[str], size: int) -> list[str]:
        calls.append((list(available), list(must), size))
        return []

    m = manager(devices, TopologyHint.of([0], True), StaticEndpoint(R, devices, preferred_fn=record))
    m.allocated[R] = set(allocated)
    pick(m, wanted, set(reusable))
    assert len(calls) == 1
    available, must, size = calls[0]
    assert sorted(available) == sorted(exp_available)
    assert sorted(must) == sorted(exp_must)  # upstream's test compares `available` twice; we check both
    assert size == exp_size


def test_preferred_allocation_not_called_when_plugin_does_not_offer_it() -> None:
    devices = [numa(f"d{i}", 0) for i in range(4)]
    endpoint = StaticEndpoint(R, devices, options=DevicePluginOptions(), preferred_fn=lambda a, m, s: ["d3"])
    m = manager(devices, TopologyHint.of([0], True), endpoint)
    assert pick(m, 1) == ["d0"]  # our deterministic order: natural id order
    assert not [c for c in endpoint.calls if c[0] == "GetPreferredAllocation"]


def test_unaligned_and_no_topology_devices_fill_the_remainder_in_that_order() -> None:
    devices = [numa("a0", 0), numa("b1", 1), Device("c-none"), numa("d1", 1)]
    m = manager(devices, TopologyHint.of([0], True))
    got = pick(m, 4)
    assert got == ["a0", "b1", "d1", "c-none"]


def test_no_affinity_hint_takes_devices_in_natural_order() -> None:
    devices = [numa(f"gpu{i}", i % 2) for i in (10, 2, 1)]
    m = manager(devices)
    assert pick(m, 2) == ["gpu1", "gpu2"]


def test_multi_numa_device_counts_in_the_hint_group_of_its_first_matching_node() -> None:
    devices = [numa("wide", 0, 1), numa("n1", 1), numa("n1b", 1)]
    m = manager(devices, TopologyHint.of([1], True))
    assert set(pick(m, 3)) == {"wide", "n1", "n1b"}
    m2 = manager(devices, TopologyHint.of([0], True))
    assert pick(m2, 1) == ["wide"]


def test_preferred_allocation_rpc_error_is_wrapped_verbatim() -> None:
    def broken(a: Sequence[str], m: Sequence[str], s: int) -> list[str]:
        raise PluginError("connection refused")

    devices = [numa("a", 0), numa("b", 0)]
    m = manager(devices, TopologyHint.of([0], True), StaticEndpoint(R, devices, preferred_fn=broken))
    with pytest.raises(AllocationError, match=r"^device plugin GetPreferredAllocation rpc failed with err: "
                       r"connection refused$"):
        pick(m, 1)


def pod_with(*containers: Container, init: tuple[Container, ...] = (), uid: str = "pod-1") -> Pod:
    return Pod("p", uid=uid, init_containers=init, containers=containers)


def admit(m: DeviceManager, pod: Pod) -> None:
    for c in pod.all_containers():
        m.allocate_now(pod, c)


def held(m: DeviceManager, pod: Pod, name: str) -> set[str]:
    return m.pod_devices.container_devices(pod.uid, name, R) or set()


def test_init_container_devices_are_reused_by_app_containers() -> None:
    """TestInitContainerDeviceAllocation."""
    devices = [Device(f"dev{i}") for i in range(1, 5)]
    m = manager(devices)
    pod = pod_with(ctr("c1", 1), ctr("c2", 1), init=(ctr("i1", 1, init=True), ctr("i2", 2, init=True)))
    admit(m, pod)
    i1, i2, c1, c2 = (held(m, pod, n) for n in ("i1", "i2", "c1", "c2"))
    assert (len(i1), len(i2), len(c1), len(c2)) == (1, 2, 1, 1)
    assert i1 <= i2 and c1 <= i2 and c2 <= i2
    assert not c1 & c2
    assert m.allocated[R] == i2


def test_sidecar_devices_are_never_reused() -> None:
    """TestRestartableInitContainerDeviceAllocation."""
    devices = [Device(f"dev{i}") for i in range(1, 7)]
    m = manager(devices)
    init = (ctr("i1", 3, init=True), ctr("s2", 1, init=True, restart="Always"),
            ctr("s3", 2, init=True, restart="Always"))  # fmt: skip
    pod = pod_with(ctr("c1", 1), ctr("c2", 2), init=init)
    admit(m, pod)
    i1, s2, s3, c1, c2 = (held(m, pod, n) for n in ("i1", "s2", "s3", "c1", "c2"))
    assert (len(i1), len(s2), len(s3), len(c1), len(c2)) == (3, 1, 2, 1, 2)
    assert s2 <= i1 and s3 <= i1
    dedicated = [s2, s3, c1, c2]
    for i, a in enumerate(dedicated):
        for b in dedicated[i + 1 :]:
            assert not a & b
    assert m.devices_to_reuse == {pod.uid: {R: set()}}


def test_reuse_is_dropped_when_another_pod_allocates() -> None:
    devices = [Device(f"d{i}") for i in range(4)]
    m = manager(devices)
    first = pod_with(ctr("c", 1), init=(ctr("i", 2, init=True),), uid="first")
    m.allocate_now(first, first.init_containers[0])
    assert m.devices_to_reuse["first"][R]
    second = pod_with(ctr("c", 1), uid="second")
    m.allocate_now(second, second.containers[0])
    assert set(m.devices_to_reuse) == {"second"}
    assert not held(m, second, "c") & held(m, first, "i")


def test_allocation_records_devices_per_numa_and_the_allocate_response() -> None:
    devices = [numa("a", 0), numa("wide", 0, 1), Device("none")]
    resp = ContainerAllocateResponse(envs={"VISIBLE": "x"})
    endpoint = StaticEndpoint(R, devices, allocate_fn=lambda ids: resp)
    m = manager(devices, endpoint=endpoint)
    pod = pod_with(ctr("c", 3))
    m.allocate_now(pod, pod.containers[0])
    info = m.pod_devices.devs["pod-1"]["c"][R]
    assert info.device_ids == {0: ["a", "wide"], 1: ["wide"], -1: ["none"]}
    assert info.alloc_resp is resp
    assert endpoint.calls == [("Allocate", (("a", "none", "wide"),))]
    assert m.get_container_devices("pod-1", "c") == {
        R: {"a": numa("a", 0), "none": Device("none"), "wide": numa("wide", 0, 1)}
    }


def test_affinity_store_is_asked_for_the_container_being_allocated() -> None:
    devices = [numa("a", 0), numa("b", 1)]
    affinity = FixedAffinity(TopologyHint.of([1], True))
    m = DeviceManager([0, 1], affinity)
    m.register_endpoint(R, StaticEndpoint(R, devices))
    m.update_devices(R, devices)
    pod = pod_with(ctr("c", 1))
    m.allocate_now(pod, pod.containers[0])
    assert affinity.asked == [("pod-1", "c")]
    assert held(m, pod, "c") == {"b"}


# -- errors, upstream wording ---------------------------------------------------------------------


def test_unregistered_but_previously_allocated_resource_errors() -> None:
    m = manager([Device("a")])
    pod = pod_with(ctr("c", 1, resource="other.com/x"))
    m.allocated["other.com/x"] = set()
    with pytest.raises(AllocationError, match=r"^cannot allocate unregistered device other.com/x$"):
        m.allocate_now(pod, pod.containers[0])


def test_no_healthy_devices_error() -> None:
    m = manager([Device("a", "Unhealthy")])
    pod = pod_with(ctr("c", 1))
    with pytest.raises(AllocationError, match=rf"^no healthy devices present; cannot allocate unhealthy devices {R}$"):
        m.allocate_now(pod, pod.containers[0])


def test_previously_allocated_devices_unhealthy_error() -> None:
    m = manager([Device("a"), Device("b")])
    pod = pod_with(ctr("c", 1))
    m.allocate_now(pod, pod.containers[0])
    got = held(m, pod, "c")
    m.update_devices(R, [Device(d, "Healthy" if d not in got else "Unhealthy") for d in ("a", "b")])
    with pytest.raises(AllocationError, match=r"^previously allocated devices are no longer healthy; "):
        m.allocate_now(pod, pod.containers[0])


def test_changed_request_error() -> None:
    m = manager([Device("a"), Device("b")])
    pod = pod_with(ctr("c", 1))
    m.allocate_now(pod, pod.containers[0])
    bigger = pod_with(ctr("c", 2))
    with pytest.raises(AllocationError) as e:
        m.allocate_now(bigger, bigger.containers[0])
    assert str(e.value) == f'pod "pod-1" container "c" changed request for resource "{R}" from 1 to 2'


def test_same_request_again_is_a_no_op() -> None:
    endpoint = StaticEndpoint(R, [Device("a"), Device("b")])
    m = manager(endpoint.devices, endpoint=endpoint)
    pod = pod_with(ctr("c", 1))
    m.allocate_now(pod, pod.containers[0])
    m.allocate_now(pod, pod.containers[0])
    assert [c[0] for c in endpoint.calls] == ["Allocate"]


def test_not_enough_devices_error() -> None:
    m = manager([Device("a"), Device("b")])
    pod = pod_with(ctr("c", 3))
    with pytest.raises(AllocationError, match=rf"^requested number of devices unavailable for {R}. "
                       r"Requested: 3, Available: 2$"):
        m.allocate_now(pod, pod.containers[0])
    assert m.allocated.get(R, set()) == set()


def test_missing_endpoint_fails_at_get_preferred_allocation_first() -> None:
    m = DeviceManager([0], FixedAffinity(TopologyHint(None, True)))
    m.update_devices(R, [Device("a")])  # devices without a registered endpoint
    pod = pod_with(ctr("c", 1))
    with pytest.raises(AllocationError, match=rf"^endpoint not found in cache for a registered resource: {R}$"):
        m.allocate_now(pod, pod.containers[0])


def test_unknown_device_plugin_error_rolls_back() -> None:
    """Reached when reusable devices cover the request but the endpoint is gone."""
    m = manager([Device("a"), Device("b")])
    pod = pod_with(ctr("c", 1), init=(ctr("i", 1, init=True),))
    m.allocate_now(pod, pod.init_containers[0])
    m.plugin_disconnected(R, now=0.0)
    assert m.get_capacity(now=301.0).deleted == [R]
    m.update_devices(R, [Device("a"), Device("b")])  # a ListAndWatch update racing the removal
    with pytest.raises(AllocationError, match=rf"^unknown Device Plugin {R}$"):
        m.allocate_now(pod, pod.containers[0])
    assert m.allocated == m.pod_devices.devices()
    assert held(m, pod, "c") == set()


def test_plugin_allocate_error_rolls_back_and_keeps_the_message() -> None:
    def refuse(ids: Sequence[str]) -> ContainerAllocateResponse:
        raise PluginError("rpc error: code = Unavailable")

    devices = [Device("a")]
    m = manager(devices, endpoint=StaticEndpoint(R, devices, allocate_fn=refuse))
    pod = pod_with(ctr("c", 1))
    with pytest.raises(AllocationError, match=r"^rpc error: code = Unavailable$"):
        m.allocate_now(pod, pod.containers[0])
    assert m.allocated == {}
    assert m.get_container_devices(pod.uid, "c") is None


def test_kubelet_restart_running_container_is_left_alone() -> None:
    ready = False
    m = DeviceManager([0], FixedAffinity(TopologyHint(None, True)), sources_ready=lambda: ready,
                      running_containers=[("pod-1", "c")])  # fmt: skip
    m.register_endpoint(R, StaticEndpoint(R, []))
    m.update_devices(R, [])  # plugin not back yet: no healthy devices
    pod = pod_with(ctr("c", 1))
    m.allocate_now(pod, pod.containers[0])  # running before the restart: nothing to do, no error
    other = pod_with(ctr("c", 1), uid="pod-2")
    with pytest.raises(AllocationError, match="no healthy devices present"):
        m.allocate_now(other, other.containers[0])


@pytest.mark.parametrize(
    ("available", "aligned", "unaligned"),
    [({"dev1", "dev2"}, {"dev2"}, {"dev1"}), ({"dev1", "dev2", "dev3", "dev4"}, {"dev2", "dev3", "dev4"}, {"dev1"})],
)
def test_filter_by_affinity_upstream_cases(available: set[str], aligned: set[str], unaligned: set[str]) -> None:
    """TestFilterByAffinity: hint {2}; a device on nodes {1,2} counts as aligned."""
    from numalign.kubelet.devicemanager.affinity import filter_by_affinity

    inventory = {"dev1": numa("dev1", 1), "dev2": numa("dev2", 1, 2), "dev3": numa("dev3", 2),
                 "dev4": numa("dev4", 2), "devwithouttopology": Device("dev5")}  # fmt: skip
    got = filter_by_affinity(TopologyHint.of([2], True), inventory, available)
    assert (set(got[0]), set(got[1]), set(got[2])) == (aligned, unaligned, set())


def test_filter_by_affinity_orders_groups_hint_nodes_then_others_then_no_topology() -> None:
    from numalign.kubelet.devicemanager.affinity import filter_by_affinity

    inventory = {"a": numa("a", 3), "b": numa("b", 1), "c": numa("c", 1), "d": Device("d"), "e": numa("e", 0),
                 "f": numa("f", 2), "g": numa("g", 2), "h": numa("h", 2)}  # fmt: skip
    aligned, unaligned, none = filter_by_affinity(TopologyHint.of([1, 2], True), inventory, set(inventory))
    assert aligned == ["b", "c", "f", "g", "h"]  # node 1 (2 devices) before node 2 (3 devices)
    assert unaligned == ["e", "a"]  # nodes 0 and 3 tie on count: node 0 first
    assert none == ["d"]


def test_pod_container_device_to_allocate_errors() -> None:
    """TestPodContainerDeviceToAllocate."""
    r1, r2, r3 = "domain1.com/resource1", "domain2.com/resource2", "domain2.com/resource3"
    m = DeviceManager([0], FixedAffinity(ANY))
    m.pod_devices.insert("pod1", "con1", r1, {0: ["dev1", "dev2"]}, ContainerAllocateResponse())
    m.pod_devices.insert("pod2", "con2", r2, {-1: ["dev5"]}, ContainerAllocateResponse())
    m.pod_devices.insert("pod3", "con3", r3, {-1: ["dev5"]}, ContainerAllocateResponse())
    m.healthy = {r1: set(), r3: {"dev7", "dev8"}}
    cases = [
        ("pod1", "con1", r1, 2, f"no healthy devices present; cannot allocate unhealthy devices {r1}"),
        ("pod2", "con2", r2, 1, f"cannot allocate unregistered device {r2}"),
        ("pod3", "con3", r3, 1, f"previously allocated devices are no longer healthy; cannot allocate unhealthy "
                                f"devices {r3}"),
    ]  # fmt: skip
    for pod_uid, con, res, required, message in cases:
        with pytest.raises(AllocationError) as e:
            devices_to_allocate(m, AllocationRequest(pod_uid, con, res, required, set()))
        assert str(e.value) == message


def test_pod_container_device_allocation_sequence() -> None:
    """TestPodContainerDeviceAllocation: allocations accumulate, a short pod fails with upstream's text."""
    r1, r2 = "domain1.com/resource1", "domain2.com/resource2"
    active: list[str] = []
    m = DeviceManager([0], FixedAffinity(ANY), active_pods=lambda: active)
    m.add_static_plugin(r1, [numa("dev1", 0), numa("dev2", 0)])
    m.add_static_plugin(r2, [Device("dev3"), Device("dev4")])

    def make(uid: str, limits: dict[str, int]) -> Pod:
        c = Container("c", limits={r: Quantity.from_int(n) for r, n in limits.items()})
        return Pod(uid, uid=uid, containers=(c,))

    p1, p2, p3 = make("p1", {r1: 2, "cpu": 2, r2: 1}), make("p2", {r1: 1}), make("p3", {r2: 1})
    active.append("p1")
    m.allocate_now(p1, p1.containers[0])
    assert (len(m.allocated[r1]), len(m.allocated[r2])) == (2, 1)
    active.append("p2")
    with pytest.raises(AllocationError) as e:
        m.allocate_now(p2, p2.containers[0])
    assert str(e.value) == f"requested number of devices unavailable for {r1}. Requested: 1, Available: 0"
    # Still active and holding nothing: container start re-runs Allocate, which fails the same way.
    with pytest.raises(AllocationError, match="requested number of devices unavailable"):
        m.get_device_run_container_options(p2, p2.containers[0])
    active.append("p3")
    m.allocate_now(p3, p3.containers[0])
    assert (len(m.allocated[r1]), len(m.allocated[r2])) == (2, 2)


def test_the_cheap_device_queries_say_what_get_container_devices_says() -> None:
    held = PodDevices()
    held.insert("p", "gpu", R, {0: ["d1"], 1: ["d2", "d1"]}, ContainerAllocateResponse())  # one id on two NUMA nodes
    held.insert("p", "gpu", "example.com/nic", {-1: ["n0"]}, None)  # no topology, its call still out
    held.insert("p", "none", R, {}, ContainerAllocateResponse())  # an entry that lists no NUMA node at all
    held.insert("p", "empty", R, {0: []}, ContainerAllocateResponse())  # a NUMA node listing no id
    for pod, name in (("p", "gpu"), ("p", "none"), ("p", "empty"), ("p", "absent"), ("q", "gpu")):
        full = held.get_container_devices(pod, name)
        assert held.holds_devices(pod, name) is bool(full)
        ids = held.container_device_ids(pod, name)
        assert ids == (None if full is None else {r: set(devs) for r, devs in full.items()})
    assert held.container_device_ids("p", "gpu") == {R: {"d1", "d2"}, "example.com/nic": {"n0"}}
    assert held.holds_devices("p", "empty") and not held.holds_devices("p", "none")
