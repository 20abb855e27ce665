"""NodeResourceTopologyMatch's Filter, ported from scheduler-plugins pkg/noderesourcetopology/filter_test.go
(TestNodeResourceTopology, TestNodeResourceTopologyMultiContainerPodScope and
TestNodeResourceTopologyMultiContainerContainerScope): the same NRT objects, pods and verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from numalign.cluster.nrt import NodeResourceTopology, ResourceInfo, Zone
from numalign.cluster.nrtmatch import filter_node
from numalign.cluster.resources import amount
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity

CPU, MEM, EXT, HP2M = "cpu", "memory", "namespace/extended", "hugepages-2Mi"
NIC, NO_NIC, NIC_NO_NUMA = "vendor/nic1", "vendor/notexistingnic", "vendor.com/old-nic-model"


def _q(v: str) -> int:
    return Quantity.parse(v).value()


def _nrt(name: str, policy: str, zones: list[tuple[str, list[tuple[str, str, str]]]]) -> NodeResourceTopology:
    """MakeTopologyResInfo(name, capacity, available) per resource, as in the Go tables."""
    return NodeResourceTopology(name, tuple(
        Zone(zname, "Node", tuple(ResourceInfo(r, _q(cap), _q(cap), _q(avail)) for r, cap, avail in res))
        for zname, res in zones), (), (policy,))


def _node_allocatable(nrt: NodeResourceTopology, extra: dict[str, str] | None = None) -> dict[str, int]:
    """makeResourceListFromZones: the zones' available amounts summed, plus node-only resources."""
    out: dict[str, int] = {}
    for z in nrt.zones:
        for r in z.resources:
            out[r.name] = out.get(r.name, 0) + (r.available * 1000 if r.name == CPU else r.available)
    for k, v in (extra or {}).items():
        out[k] = amount(k, Quantity.parse(v))
    return out


NRTS = [
    _nrt("node1", "SingleNUMANodeContainerLevel", [
        ("node-0", [(CPU, "20", "4"), (MEM, "8Gi", "8Gi"), (NIC, "30", "10")]),
        ("node-1", [(CPU, "30", "8"), (MEM, "8Gi", "8Gi"), (NIC, "30", "10")])]),
    _nrt("node2", "SingleNUMANodeContainerLevel", [
        ("node-0", [(CPU, "20", "2"), (MEM, "8Gi", "4Gi"), (HP2M, "128Mi", "128Mi"), (NIC, "30", "5")]),
        ("node-1", [(CPU, "30", "4"), (MEM, "8Gi", "4Gi"), (HP2M, "128Mi", "128Mi"), (NIC, "30", "2")])]),
    _nrt("node3", "SingleNUMANodePodLevel", [
        ("node-0", [(CPU, "20", "2"), (MEM, "8Gi", "4Gi"), (NIC, "30", "5")]),
        ("node-1", [(CPU, "30", "4"), (MEM, "8Gi", "4Gi"), (NIC, "30", "2")])]),
    _nrt("badly_formed_node", "SingleNUMANodePodLevel", [
        ("node-0", [(CPU, "20", "2"), (MEM, "8Gi", "4Gi"), (NIC, "30", "5")]),
        ("node-75", [(CPU, "30", "4"), (MEM, "8Gi", "4Gi"), (NIC, "30", "2")])]),
    _nrt("extended", "SingleNUMANodeContainerLevel", [
        ("node-0", [(CPU, "20", "4"), (MEM, "8Gi", "8Gi"), (NIC, "30", "10")]),
        ("node-1", [(CPU, "30", "8"), (MEM, "8Gi", "8Gi"), (NIC, "30", "10")])]),
]
NODES = [_node_allocatable(NRTS[0]), _node_allocatable(NRTS[1], {NIC_NO_NUMA: "4"}), _node_allocatable(NRTS[2]),
         _node_allocatable(NRTS[3]), _node_allocatable(NRTS[4], {EXT: "1"})]


def _res(d: dict[str, str]) -> dict[str, Quantity]:
    return {k: Quantity.parse(v) for k, v in d.items()}


def _pod(req: dict[str, str] | None, lim: dict[str, str] | None = None, containers: int = 1,
         init: list[dict[str, str]] | None = None, app: list[dict[str, str]] | None = None) -> Pod:
    if app is not None or init is not None:
        return Pod("testpod", init_containers=tuple(
            Container(f"cnt-{i + 1}", _res(r), _res(r), is_init=True) for i, r in enumerate(init or [])),
            containers=tuple(Container(f"cnt-{i + 1}", _res(r), _res(r)) for i, r in enumerate(app or [])))
    if req is None:
        return Pod("testpod")
    return Pod("testpod", containers=tuple(
        Container("container1" if i == 0 else "", _res(req), _res(lim if lim is not None else req))
        for i in range(containers)))


def _req_only(req: dict[str, str]) -> Pod:
    return Pod("testpod", containers=(Container("container1", _res(req), {}),))


G = "cannot align container"
P = "cannot align pod"
# TestNodeResourceTopology: (name, pod, node index, expected message or None)
CASES: list[tuple[str, Any, int, str | None]] = [
    ("Guaranteed QoS, pod with extended resource fit",
     _pod({CPU: "2", MEM: "2Gi", EXT: "1", NIC: "3"}), 4, None),
    ("Guaranteed QoS, pod with extended resource no devices; pod fit", _pod({CPU: "2", MEM: "2Gi", EXT: "1"}), 4, None),
    ("Best effort QoS, pod fit", _pod(None), 0, None),
    ("Best effort QoS requesting devices, Pod Scope; fit", _pod({NIC: "5"}), 2, None),
    ("Best effort QoS requesting devices, Pod Scope; doesn't fit", _pod({NIC: "20"}), 2, P),
    ("Best effort QoS requesting devices, Container Scope; fit", _pod({NIC: "5"}), 1, None),
    ("Best effort QoS requesting devices, Container Scope; doesn't fit", _pod({NIC: "20"}), 0, G),
    ("Best effort QoS requesting devices and extended resources, Container Scope",
     _pod({EXT: "1", NIC: "10"}), 4, None),
    ("cpu, memory (enough on NUMA), devices (not enough), Container Scope; doesn't fit",
     _pod({CPU: "3", MEM: "3Gi", NIC: "11"}, {CPU: "4", MEM: "4Gi", NIC: "11"}), 1, G),
    ("cpu, memory (enough on NUMA), devices (not enough), Pod Scope; doesn't fit",
     _pod({CPU: "1", MEM: "1Gi", NIC: "6"}, {CPU: "2", MEM: "2Gi", NIC: "6"}), 2, P),
    ("cpu, memory (enough on NUMA) and devices, Pod Scope; fit",
     _pod({CPU: "1", MEM: "1Gi", NIC: "5"}, {CPU: "2", MEM: "2Gi", NIC: "5"}), 2, None),
    ("cpu, memory (not enough on NUMA) and devices, Pod Scope; fit",
     _pod({CPU: "19", MEM: "5Gi", NIC: "5"}, {CPU: "20", MEM: "6Gi", NIC: "5"}), 2, None),
    ("cpu, memory (enough on NUMA) and devices, Container Scope; fit",
     _pod({CPU: "3", MEM: "3Gi", NIC: "5"}, {CPU: "4", MEM: "4Gi", NIC: "5"}), 1, None),
    ("cpu, memory (not enough on NUMA) and devices, Container Scope; fit",
     _pod({CPU: "5", MEM: "5Gi", NIC: "5"}, {CPU: "6", MEM: "6Gi", NIC: "5"}), 1, None),
    ("Guaranteed QoS, minimal, pod fit", _pod({CPU: "2", MEM: "2Gi"}), 0, None),
    ("Guaranteed QoS, minimal, saturating zone, pod fit", _pod({CPU: "8", MEM: "8Gi"}), 0, None),
    ("Guaranteed QoS, zero quantity of unavailable resource, pod fit",
     _pod({CPU: "2", MEM: "2Gi", HP2M: "0", NIC: "3"}), 0, None),
    ("Guaranteed QoS, pod fit", _pod({CPU: "2", MEM: "2Gi", NIC: "3"}), 1, None),
    ("Guaranteed QoS, hugepages, pod fit", _pod({CPU: "2", MEM: "2Gi", HP2M: "64Mi", NIC: "3"}), 1, None),
    ("Burstable QoS, pod fit", _pod({CPU: "4", NIC: "3"}), 1, None),
    ("Burstable cpu and devices (not enough), Container Scope", _pod({CPU: "4", NIC: "11"}), 1, G),
    ("Burstable cpu and devices (not enough), Pod Scope", _pod({CPU: "2", NIC: "6"}), 2, P),
    ("Burstable cpu (enough on NUMA) and devices, Pod Scope; fit", _pod({CPU: "2", NIC: "5"}), 2, None),
    ("Burstable cpu (not enough on NUMA) and devices, Pod Scope; fit", _pod({CPU: "20", NIC: "5"}), 2, None),
    ("Burstable cpu (enough on NUMA) and devices, Container Scope; fit", _pod({CPU: "2", NIC: "5"}), 1, None),
    ("Burstable cpu (not enough on NUMA) and devices, Container Scope; fit", _pod({CPU: "4", NIC: "5"}), 1, None),
    ("Burstable memory and devices (not enough), Container Scope", _pod({MEM: "2Gi", NIC: "11"}), 1, G),
    ("Burstable memory and devices (not enough), Pod Scope", _pod({MEM: "2Gi", NIC: "6"}), 2, P),
    ("Burstable memory (enough on NUMA) and devices, Pod Scope; fit", _pod({MEM: "2Gi", NIC: "5"}), 2, None),
    ("Burstable memory (not enough on NUMA) and devices, Pod Scope; fit", _pod({MEM: "5Gi", NIC: "5"}), 2, None),
    ("Burstable memory (enough on NUMA) and devices, Container Scope; fit", _pod({MEM: "4Gi", NIC: "5"}), 1, None),
    ("Burstable memory (not enough on NUMA) and devices, Container Scope; fit", _pod({MEM: "5Gi", NIC: "5"}), 1, None),
    ("Burstable cpu, memory, devices (not enough), Container Scope",
     _req_only({CPU: "4", MEM: "4Gi", NIC: "11"}), 1, G),
    ("Burstable cpu, memory, devices (not enough), Pod Scope", _req_only({CPU: "2", MEM: "2Gi", NIC: "6"}), 2, P),
    ("Burstable cpu, memory (enough) and devices, Pod Scope; fit",
     _req_only({CPU: "2", MEM: "2Gi", NIC: "5"}), 2, None),
    ("Burstable cpu, memory (not enough) and devices, Pod Scope; fit",
     _req_only({CPU: "20", MEM: "5Gi", NIC: "5"}), 2, None),
    ("Burstable cpu, memory (enough) and devices, Container Scope; fit",
     _req_only({CPU: "4", MEM: "4Gi", NIC: "5"}), 1, None),
    ("Burstable cpu, memory (not enough) and devices, Container Scope; fit",
     _req_only({CPU: "5", MEM: "5Gi", NIC: "5"}), 1, None),
    ("Burstable QoS with extended resources, pod fit", _pod({EXT: "1", CPU: "4", NIC: "3"}), 4, None),
    ("Guaranteed QoS, hugepages, pod doesn't fit", _pod({CPU: "2", MEM: "2Gi", HP2M: "256Mi", NIC: "3"}), 1, G),
    ("Guaranteed QoS, pod doesn't fit", _pod({CPU: "9", MEM: "1Gi", NIC: "3"}), 0, G),
    ("Guaranteed QoS, zero of a resource the node lacks, pod fit", _pod({CPU: "2", MEM: "1Gi", NO_NIC: "0"}), 0, None),
    ("Guaranteed QoS Topology Scope, pod doesn't fit", _pod({CPU: "3", MEM: "1Gi", NO_NIC: "0"}, containers=3), 2, P),
    ("Guaranteed QoS Topology Scope, minimal, pod fit", _pod({CPU: "1", MEM: "1Gi"}), 2, None),
    ("Guaranteed QoS TopologyScope, minimal, saturating zone, pod fit", _pod({CPU: "2", MEM: "4Gi"}), 3, None),
    ("Guaranteed QoS Topology Scope, pod fit", _pod({CPU: "1", MEM: "1Gi", NO_NIC: "0"}, containers=3), 2, None),
    ("Guaranteed QoS Topology Scope, invalid node", _pod({CPU: "1", MEM: "1Gi", NO_NIC: "0"}, containers=3), 3, P),
    ("Guaranteed QoS, hugepages, non-NUMA affine NIC, pod fit",
     _pod({CPU: "2", MEM: "2Gi", HP2M: "64Mi", NIC_NO_NUMA: "3"}), 1, None),
    ("Guaranteed QoS, ephemeral-storage (non-NUMA), pod fit",
     _pod({CPU: "2", MEM: "2Gi", "ephemeral-storage": "100Mi"}), 1, None),
]


@pytest.mark.parametrize(("name", "pod", "node", "expected"), CASES, ids=[c[0] for c in CASES])
def test_node_resource_topology(name: str, pod: Pod, node: int, expected: str | None) -> None:
    assert filter_node(pod, NRTS[node], NODES[node]) == expected


HOST0_ZONES = [
    ("node-0", [(CPU, "32", "30"), (MEM, "64Gi", "60Gi"), (HP2M, "384Mi", "384Mi"), (NIC, "16", "16")]),
    ("node-1", [(CPU, "32", "32"), (MEM, "64Gi", "64Gi"), (HP2M, "512Mi", "512Mi"), (NIC, "32", "32")]),
]
POD_SCOPE = _nrt("host0", "SingleNUMANodePodLevel", HOST0_ZONES)
CONTAINER_SCOPE = _nrt("host0", "SingleNUMANodeContainerLevel", HOST0_ZONES)


@pytest.mark.parametrize(("app", "expected"), [
    ([{CPU: "2", MEM: "2Gi"}, {CPU: "4", MEM: "8Gi"}, {CPU: "26", MEM: "32Gi", HP2M: "512Mi", NIC: "26"}], None),
    ([{CPU: "2", MEM: "2Gi"}, {CPU: "8", MEM: "8Gi"}, {CPU: "26", MEM: "26Gi", HP2M: "52Mi", NIC: "26"}], P),
    ([{CPU: "2", MEM: "4Gi"}, {CPU: "4", MEM: "16Gi"}, {CPU: "26", MEM: "52Gi", HP2M: "52Mi", NIC: "26"}], P),
    ([{CPU: "2", MEM: "2Gi"}, {CPU: "4", MEM: "8Gi"}, {CPU: "26", MEM: "32Gi", HP2M: "3328Mi", NIC: "26"}], P),
    ([{CPU: "2", MEM: "2Gi"}, {CPU: "4", MEM: "8Gi"}, {CPU: "26", MEM: "26Gi", HP2M: "52Mi", NIC: "52"}], P),
])
def test_multi_container_pod_scope(app: list[dict[str, str]], expected: str | None) -> None:
    assert filter_node(_pod(None, app=app), POD_SCOPE, _node_allocatable(POD_SCOPE)) == expected


INIT = "cannot align init container"


@pytest.mark.parametrize(("init", "app", "expected"), [
    ([], [{CPU: "2", MEM: "4G"}], None),
    ([], [{CPU: "40", MEM: "4G"}], G),
    ([], [{CPU: "2", MEM: "100G"}], G),
    ([], [{CPU: "40", MEM: "100G"}], G),
    ([], [{CPU: "20", MEM: "40G"}, {CPU: "20", MEM: "40G"}], None),
    ([], [{CPU: "2", MEM: "6G", HP2M: "500Mi", NIC: "16"}, {CPU: "2", MEM: "6G", HP2M: "50Mi", NIC: "8"}], None),
    ([{CPU: "40", MEM: "40G"}], [{CPU: "1", MEM: "4G"}, {CPU: "1", MEM: "4G"}], INIT),
    ([{CPU: "4", MEM: "70G"}], [{CPU: "1", MEM: "4G"}, {CPU: "1", MEM: "4G"}], INIT),
    ([{CPU: "4", MEM: "10G"}], [{CPU: "20", MEM: "40G"}, {CPU: "20", MEM: "40G"}], None),
    ([{CPU: "4", MEM: "10G"}] * 3, [{CPU: "20", MEM: "40G"}, {CPU: "20", MEM: "40G"}, {CPU: "6", MEM: "10G"}], None),
    ([{CPU: "30", MEM: "10G"}] * 2, [{CPU: "20", MEM: "40G"}, {CPU: "20", MEM: "40G"}, {CPU: "20", MEM: "6G"}], G),
    ([{CPU: "30", MEM: "10G"}] * 2, [{CPU: "35", MEM: "40G"}], G),
    ([{CPU: "30", MEM: "10G"}] * 2, [{CPU: "20", MEM: "40G"}, {CPU: "20", MEM: "40G"}], None),
    ([{CPU: "30", MEM: "10G"}] * 3, [{CPU: "20", MEM: "40G"}, {CPU: "20", MEM: "40G"}, {CPU: "2", MEM: "6G"}], None),
    ([{CPU: "3", MEM: "50G"}] * 3, [{CPU: "20", MEM: "40G"}, {CPU: "20", MEM: "40G"}, {CPU: "2", MEM: "6G"}], None),
    ([{CPU: "40", MEM: "50G"}, {CPU: "3", MEM: "50G"}, {CPU: "3", MEM: "50G"}],
     [{CPU: "20", MEM: "40G"}, {CPU: "2", MEM: "6G"}], INIT),
    ([{CPU: "20", MEM: "50G"}, {CPU: "40", MEM: "50G"}, {CPU: "3", MEM: "50G"}],
     [{CPU: "20", MEM: "40G"}, {CPU: "2", MEM: "6G"}], INIT),
])
def test_multi_container_container_scope(init: list[dict[str, str]], app: list[dict[str, str]],
                                          expected: str | None) -> None:
    pod = _pod(None, init=init, app=app)
    assert filter_node(pod, CONTAINER_SCOPE, _node_allocatable(CONTAINER_SCOPE)) == expected
