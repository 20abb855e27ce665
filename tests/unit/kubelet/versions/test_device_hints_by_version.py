"""k/k #138244 (v1.36.0): device hints over the device-hosting NUMA nodes only (no all-nodes hint).

Each side of the change: the last versions without it (1.35's newest modelled patch, and 1.34.0 as the
issue's example) and the first with it (1.36.0)."""

from __future__ import annotations

import dataclasses

import pytest

from numalign.core.hint import TopologyHint
from numalign.k8s.deviceplugin import Device
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.devicemanager.hints import resource_topology_hints
from numalign.kubelet.devicemanager.implicit_hints import resource_topology_hints_implicit
from numalign.kubelet.node import Node
from numalign.kubelet.versions import CHANGES, DEVICE_HINTS_OVER_DEVICE_NUMA_NODES, behaviours
from numalign.machine.shorthand import parse_shorthand
from numalign.machine.topology import Device as MachineDevice

CHANGE = next(c for c in CHANGES if c.name == DEVICE_HINTS_OVER_DEVICE_NUMA_NODES)
LAST_WITHOUT = CHANGE.last_without((1, 35))
FIRST_WITH = KubeletVersion(1, 36, 0)

ERA_135 = [
    TopologyHint.of([0], True),
    *(TopologyHint.of(n, False) for n in ([0, 1], [0, 2], [0, 1, 2], [0, 3], [0, 1, 3], [0, 2, 3], [0, 1, 2, 3])),
]
FROM_136 = [TopologyHint.of([0], True)]


def gpu_node(version: KubeletVersion) -> Node:
    """4 NUMA nodes, both GPUs on NUMA 0, best-effort, static CPUs."""
    machine = parse_shorthand("1s x 4n x 4c x 1t, 8Gi/node")
    gpus = tuple(MachineDevice(f"gpu{i}", "nvidia.com/gpu", (0,)) for i in range(2))
    machine = dataclasses.replace(machine, devices=gpus)
    config = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="best-effort",
                           kube_reserved={"cpu": Quantity.parse("1")})
    return Node(machine, config, kubelet_version=version)


def one_gpu_pod() -> Pod:
    limits = {"cpu": Quantity.parse("1"), "memory": Quantity.parse("1Gi"), "nvidia.com/gpu": Quantity.parse("1")}
    return Pod("p", uid="u1", containers=(Container("c", requests=dict(limits), limits=dict(limits)),))


def device_hints(node: Node) -> list[TopologyHint]:
    record = node.admit(one_gpu_pod())
    assert record.result.admit
    (decision,) = record.decisions
    (devices,) = [p for p in decision.providers if p.provider == "devices"]
    assert devices.hints is not None
    hints = devices.hints["nvidia.com/gpu"]
    assert isinstance(hints, list)
    return hints


def test_the_table_says_where_the_change_lands() -> None:
    assert LAST_WITHOUT is not None and LAST_WITHOUT.minor_key == (1, 35)
    assert not behaviours(LAST_WITHOUT).device_hints_over_device_numa_nodes
    assert behaviours(FIRST_WITH).device_hints_over_device_numa_nodes


@pytest.mark.parametrize("version", [KubeletVersion(1, 34, 0), LAST_WITHOUT])
def test_before_136_every_mask_over_all_nodes(version: KubeletVersion) -> None:
    by_mask = sorted(device_hints(gpu_node(version)), key=lambda h: h.mask or 0)
    assert by_mask == sorted(ERA_135, key=lambda h: h.mask or 0)


def test_from_136_only_the_device_node() -> None:
    assert device_hints(gpu_node(FIRST_WITH)) == FROM_136


def test_both_sides_merge_to_the_same_affinity() -> None:
    """The change narrows the candidate masks, not the best-effort merge's answer here."""
    merged = []
    for version in (LAST_WITHOUT, FIRST_WITH):
        assert version is not None
        (decision,) = gpu_node(version).admit(one_gpu_pod()).decisions
        merged.append(decision.merged)
    assert merged[0] == merged[1] == TopologyHint.of([0], True)


DEVICES = {"a": Device("a", topology=(0,)), "b": Device("b", topology=(2,)), "c": Device("c", topology=None)}


@pytest.mark.parametrize("implicit", [False, True])
def test_candidates_are_every_registered_device_node_whatever_its_state(implicit: bool) -> None:
    """Device b (NUMA 2) is allocated: its node is still a candidate; device c has no topology."""
    gen = resource_topology_hints_implicit if implicit else resource_topology_hints
    out = gen([0, 1, 2, 3], DEVICES, allocated=None, available=["a"], reusable=[], request=1,
              over_device_nodes=True)
    listed = out if isinstance(out, list) else out.materialize() if out is not None and out.materialize else None
    assert listed == [TopologyHint.of([0], True), TopologyHint.of([0, 2], False)]
    before = resource_topology_hints([0, 1, 2, 3], DEVICES, allocated=None, available=["a"], reusable=[], request=1)
    assert before is not None and len(before) == 8


def test_reusable_devices_must_still_touch_the_mask() -> None:
    out = resource_topology_hints([0, 1, 2, 3], DEVICES, allocated=None, available=["a"], reusable=["b"], request=2,
                                  over_device_nodes=True)
    assert out == [TopologyHint.of([0, 2], True)]


def test_nothing_fits_or_devices_cover_every_node() -> None:
    assert resource_topology_hints([0, 1, 2, 3], DEVICES, allocated=None, available=[], reusable=[], request=1,
                                   over_device_nodes=True) == []
    spread = {f"d{n}": Device(f"d{n}", topology=(n,)) for n in range(2)}
    assert resource_topology_hints([0, 1], spread, allocated=None, available=["d0", "d1"], reusable=[], request=1,
                                   over_device_nodes=True) == [
        TopologyHint.of([0], True), TopologyHint.of([1], True), TopologyHint.of([0, 1], False)]


def test_device_nodes_the_machine_lacks_are_dropped() -> None:
    odd = {"x": Device("x", topology=(0, 9))}
    out = resource_topology_hints([0, 1], odd, allocated=None, available=["x"], reusable=[], request=1,
                                  over_device_nodes=True)
    assert out == [TopologyHint.of([0], True)]
