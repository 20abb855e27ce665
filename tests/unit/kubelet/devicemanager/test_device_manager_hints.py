"""Ported from upstream devicemanager topology_hints_test.go: TestGetTopologyHints,
TestGetPodTopologyHints (common and pod-scope cases) and TestGetPodDeviceRequest."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from numalign.core.hint import TopologyHint
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.devicemanager.manager import DeviceManager
from numalign.kubelet.topologymanager.provider import HintProvider
from numalign.kubelet.versions import behaviours


class NoAffinity:
    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return TopologyHint(None, True)


def numa(dev_id: str, node: int) -> Device:
    return Device(dev_id, topology=(node,))


def ctr(name: str, limits: dict[str, int], *, init: bool = False, restart: str | None = None) -> Container:
    return Container(
        name, limits={r: Quantity.from_int(v) for r, v in limits.items()}, is_init=init, restart_policy=restart
    )


def H(*nodes: int, p: bool) -> TopologyHint:
    return TopologyHint.of(nodes, p)


@dataclass
class Case:
    description: str
    pod: Pod
    devices: dict[str, list[Device]]
    expected: dict[str, list[TopologyHint] | None]
    allocated: dict[str, dict[str, dict[str, list[str]]]] = field(default_factory=dict)


def one(limits: dict[str, int]) -> Pod:
    return Pod("p", uid="fakePod", containers=(ctr("fakeContainer", limits),))


FOUR = [numa("Dev1", 0), numa("Dev2", 1), numa("Dev3", 0), numa("Dev4", 1)]
FOUR_PACKED = [numa("Dev1", 0), numa("Dev2", 0), numa("Dev3", 1), numa("Dev4", 1)]

COMMON = [
    Case("Single Request, no alignment", one({"testdevice": 1}),
         {"testdevice": [Device("Dev1"), Device("Dev2")]}, {"testdevice": None}),
    Case("Single Request, only one with alignment", one({"testdevice": 1}),
         {"testdevice": [Device("Dev1"), numa("Dev2", 1)]},
         {"testdevice": [H(1, p=True)]}),  # 1.36+: masks over the device-hosting nodes only (k/k #138244)
    Case("Single Request, one device per socket", one({"testdevice": 1}),
         {"testdevice": [numa("Dev1", 0), numa("Dev2", 1)]},
         {"testdevice": [H(0, p=True), H(1, p=True), H(0, 1, p=False)]}),
    Case("Request for 2, one device per socket", one({"testdevice": 2}),
         {"testdevice": [numa("Dev1", 0), numa("Dev2", 1)]}, {"testdevice": [H(0, 1, p=True)]}),
    Case("Request for 2, 2 devices per socket", one({"testdevice": 2}), {"testdevice": FOUR},
         {"testdevice": [H(0, p=True), H(1, p=True), H(0, 1, p=False)]}),
    Case("Request for 2, optimal on 1 NUMA node, forced cross-NUMA", one({"testdevice": 2}),
         {"testdevice": FOUR}, {"testdevice": [H(0, 1, p=False)]},
         {"fakePod": {"fakeOtherContainer": {"testdevice": ["Dev1", "Dev2"]}}}),
    Case("2 device types, mixed configuration", one({"testdevice1": 2, "testdevice2": 1}),
         {"testdevice1": FOUR, "testdevice2": [numa("Dev1", 0)]},
         {"testdevice1": [H(0, p=True), H(1, p=True), H(0, 1, p=False)],
          "testdevice2": [H(0, p=True)]}),
    Case("Single device type, more requested than available", one({"testdevice": 6}),
         {"testdevice": FOUR_PACKED}, {"testdevice": []}),
    Case("Single device type, all already allocated to container", one({"testdevice": 2}),
         {"testdevice": [numa("Dev1", 0), numa("Dev2", 0)]},
         {"testdevice": [H(0, p=True)]},
         {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2"]}}}),
    Case("Single device type, less already allocated to container than requested", one({"testdevice": 4}),
         {"testdevice": FOUR_PACKED}, {"testdevice": []},
         {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2"]}}}),
    Case("Single device type, more already allocated to container than requested", one({"testdevice": 2}),
         {"testdevice": FOUR_PACKED}, {"testdevice": []},
         {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2", "Dev3", "Dev4"]}}}),
]  # fmt: skip

TWO_TYPES = {"testdevice1": FOUR_PACKED, "testdevice2": FOUR_PACKED}
BOTH_SPREAD = [H(0, p=True), H(1, p=True), H(0, 1, p=False)]
POD_SCOPE = [
    Case("2 device types, user container only",
         Pod("p", uid="fakePod", containers=(ctr("fakeContainer1", {"testdevice1": 2}),
                                             ctr("fakeContainer2", {"testdevice2": 2}),
                                             ctr("fakeContainer3", {"notRegistered": 2}))),
         TWO_TYPES, {"testdevice1": BOTH_SPREAD, "testdevice2": BOTH_SPREAD}),
    Case("2 device types, request resources for init containers and user container",
         Pod("p", uid="fakePod",
             init_containers=(ctr("i1", {"testdevice1": 1, "testdevice2": 1}, init=True),
                              ctr("i2", {"testdevice1": 1, "testdevice2": 2}, init=True)),
             containers=(ctr("fakeContainer1", {"testdevice1": 1, "testdevice2": 1}),
                         ctr("fakeContainer2", {"testdevice1": 1, "testdevice2": 1}),
                         ctr("fakeContainer3", {"notRegistered": 1}))),
         TWO_TYPES, {"testdevice1": BOTH_SPREAD, "testdevice2": BOTH_SPREAD}),
    Case("2 device types, user container only, optimal on 1 NUMA node, forced cross-NUMA",
         Pod("p", uid="fakePod", containers=(ctr("fakeContainer1", {"testdevice1": 1, "testdevice2": 1}),
                                             ctr("fakeContainer2", {"testdevice1": 1, "testdevice2": 1}),
                                             ctr("fakeContainer3", {"notRegistered": 1}))),
         TWO_TYPES, {"testdevice1": [H(0, 1, p=False)], "testdevice2": [H(0, 1, p=False)]},
         {"fakeOtherPod": {"fakeOtherContainer": {"testdevice1": ["Dev1", "Dev3"],
                                                  "testdevice2": ["Dev1", "Dev3"]}}}),
]  # fmt: skip


def build(case: Case) -> DeviceManager:
    m = DeviceManager([0, 1], NoAffinity(), active_pods=lambda: [case.pod.uid, "fakeOtherPod"])
    for resource, devices in case.devices.items():
        m.update_devices(resource, devices)
    for pod_uid, containers in case.allocated.items():
        for name, resources in containers.items():
            for resource, ids in resources.items():
                m.pod_devices.insert(pod_uid, name, resource, {0: ids}, ContainerAllocateResponse())
    m.allocated = m.pod_devices.devices()
    return m


def sort_hints(hints: list[TopologyHint] | None) -> list[TopologyHint] | None:
    if hints is None:
        return None
    return sorted(hints, key=lambda h: (not h.preferred, (h.mask or 0).bit_count(), h.mask or 0))


@pytest.mark.parametrize("case", COMMON, ids=lambda c: c.description)
def test_container_scope_hints(case: Case) -> None:
    m = build(case)
    hints = m.get_topology_hints(case.pod, case.pod.containers[0])
    assert set(hints) == set(case.expected)
    for r, want in case.expected.items():
        assert sort_hints(hints[r]) == sort_hints(want), r


@pytest.mark.parametrize("case", COMMON + POD_SCOPE, ids=lambda c: c.description)
def test_pod_scope_hints(case: Case) -> None:
    m = build(case)
    hints = m.get_pod_topology_hints(case.pod)
    assert set(hints) == set(case.expected)
    for r, want in case.expected.items():
        assert sort_hints(hints[r]) == sort_hints(want), r


def test_hints_are_in_mask_generation_order_not_just_the_same_set() -> None:
    m = DeviceManager([0, 1, 2], NoAffinity())
    m.update_devices("r", [numa("a", 2), numa("b", 0), numa("c", 1)])
    pod = one({"r": 2})
    got = m.get_topology_hints(pod, pod.containers[0])["r"]
    assert got == [H(0, 1, p=True), H(0, 2, p=True), H(1, 2, p=True), H(0, 1, 2, p=False)]


POD_REQUESTS = [
    ("empty pod", Pod("p"), [], {}),
    ("init container requests device plugin resource",
     Pod("p", init_containers=(ctr("i", {"gpu": 2}, init=True),)), ["gpu"], {"gpu": 2}),
    ("init containers request device plugin resource",
     Pod("p", init_containers=(ctr("i1", {"gpu": 2}, init=True), ctr("i2", {"gpu": 4}, init=True))),
     ["gpu"], {"gpu": 4}),
    ("user container requests device plugin resource",
     Pod("p", containers=(ctr("c", {"gpu": 2}),)), ["gpu"], {"gpu": 2}),
    ("init and user containers request the same amount",
     Pod("p", init_containers=(ctr("i1", {"gpu": 2, "nic": 2}, init=True),
                               ctr("i2", {"gpu": 2, "nic": 2}, init=True)),
         containers=(ctr("c1", {"gpu": 1, "nic": 1}), ctr("c2", {"gpu": 1, "nic": 1}))),
     ["gpu", "nic"], {"gpu": 2, "nic": 2}),
    ("init containers request more than user containers",
     Pod("p", init_containers=(ctr("i1", {"gpu": 2, "nic": 1}, init=True),
                               ctr("i2", {"gpu": 3, "nic": 2}, init=True)),
         containers=(ctr("c1", {"gpu": 1, "nic": 1}), ctr("c2", {"gpu": 1}))),
     ["gpu", "nic"], {"gpu": 3, "nic": 2}),
    ("user containers request more than init containers",
     Pod("p", init_containers=(ctr("i1", {"gpu": 2, "nic": 1}, init=True),
                               ctr("i2", {"gpu": 2, "nic": 1}, init=True)),
         containers=(ctr("c1", {"gpu": 3, "nic": 2}), ctr("c2", {"gpu": 3, "nic": 2}))),
     ["gpu", "nic"], {"gpu": 6, "nic": 4}),
    ("sidecar adds to the app containers and to later init containers",
     Pod("p", init_containers=(ctr("sc", {"gpu": 1}, init=True, restart="Always"),
                               ctr("i1", {"gpu": 3}, init=True)),
         containers=(ctr("c1", {"gpu": 1}),)),
     ["gpu"], {"gpu": 4}),
]  # fmt: skip


@pytest.mark.parametrize(("desc", "pod", "registered", "expected"), POD_REQUESTS, ids=[c[0] for c in POD_REQUESTS])
def test_pod_scope_request_is_the_effective_pod_limit(
    desc: str, pod: Pod, registered: list[str], expected: dict[str, int]
) -> None:
    """TestGetPodDeviceRequest, observed through pod-scope hints: with one device on NUMA 0 per
    unit of the expected request, the request fits exactly on NUMA 0 and not one device less."""
    m = DeviceManager([0, 1], NoAffinity())
    for r in registered:
        m.update_devices(r, [numa(f"{r}{i}", 0) for i in range(expected[r])] + [numa(f"{r}-far", 1)])
    hints = m.get_pod_topology_hints(pod)
    assert set(hints) == set(expected)
    for r, n in expected.items():
        assert hints[r] == [H(0, p=True), H(0, 1, p=False)], r
        m.update_devices(r, [numa(f"{r}{i}", 0) for i in range(n - 1)] + [numa(f"{r}-far", 1)])
        assert m.get_pod_topology_hints(pod)[r] == [H(0, 1, p=True)], r


def test_manager_is_a_hint_provider_named_devices() -> None:
    m = DeviceManager([0], NoAffinity())
    assert isinstance(m, HintProvider)
    assert m.name == "devices"


def test_unregistered_resource_gets_no_hint_and_no_allocation() -> None:
    m = DeviceManager([0, 1], NoAffinity())
    pod = one({"example.com/never-registered": 1})
    assert m.get_topology_hints(pod, pod.containers[0]) == {}
    m.allocate_now(pod, pod.containers[0])
    assert m.get_container_devices("fakePod", "fakeContainer") is None


def test_inactive_pods_are_collected_before_hints() -> None:
    active = {"fakePod", "gone"}
    m = DeviceManager([0, 1], NoAffinity(), active_pods=lambda: active)
    m.update_devices("r", [numa("a", 0), numa("b", 1)])
    m.pod_devices.insert("gone", "c", "r", {0: ["a"]}, ContainerAllocateResponse())
    m.allocated = m.pod_devices.devices()
    pod = one({"r": 2})
    assert m.get_topology_hints(pod, pod.containers[0])["r"] == []
    active.discard("gone")
    assert m.get_topology_hints(pod, pod.containers[0])["r"] == [H(0, 1, p=True)]
    assert m.allocated == {}


@pytest.mark.parametrize(("version", "want"), [
    # 1.35: request 0 fits every mask over all nodes, single nodes preferred.
    ("1.35", [H(0, p=True), H(1, p=True), H(0, 1, p=False)]),
    # 1.36+ (k/k #138244): only the device's node.
    ("1.36.0", [H(0, p=True)]),
])
def test_zero_device_limit_still_gets_hints_in_both_scopes(version: str, want: list[TopologyHint]) -> None:
    """Upstream keeps a 0 limit: it still gets hints."""
    m = DeviceManager([0, 1], NoAffinity(), behaviours=behaviours(KubeletVersion.parse(version)))
    m.update_devices("r", [numa("a", 0)])
    pod = Pod("p", uid="u", containers=(ctr("c", {"r": 0}),))
    assert m.get_topology_hints(pod, pod.containers[0]) == {"r": want}
    assert m.get_pod_topology_hints(pod) == {"r": want}


def test_fractional_device_limit_rounds_up_like_quantity_value() -> None:
    m = DeviceManager([0, 1], NoAffinity())
    m.update_devices("r", [numa("a", 0), numa("b", 0), numa("c", 1)])
    c = Container("c", limits={"r": Quantity.parse("1500m")})
    pod = Pod("p", uid="u", containers=(c,))
    assert m.get_topology_hints(pod, c) == {"r": [H(0, p=True), H(0, 1, p=False)]}
