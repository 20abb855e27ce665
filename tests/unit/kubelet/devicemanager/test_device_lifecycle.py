"""Inventory, health, plugin lifecycle, capacity grace period, checkpoint data and container start.
Ported in part from upstream manager_test.go (TestUpdateCapacityAllocatable, TestGetAllocatableDevices*,
TestCheckpoint, TestReadPreNUMACheckpoint, TestDevicePreStartContainer, TestGetDeviceRunContainerOptions)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DevicePluginOptions, DeviceSpec, Mount
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.checkpointmanager.checksum import fnv1a_32
from numalign.kubelet.devicemanager.checkpoint import decode_device_checkpoint, encode_device_checkpoint
from numalign.kubelet.devicemanager.endpoint import StaticEndpoint
from numalign.kubelet.devicemanager.manager import DeviceManager
from numalign.kubelet.devicemanager.state import DeviceManagerState, PodDevicesEntry

R1 = "domain1.com/resource1"
R2 = "resource2"


class NoAffinity:
    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return TopologyHint(None, True)


def new(**kw: Any) -> DeviceManager:
    return DeviceManager([0, 1], NoAffinity(), **kw)


def caps(m: DeviceManager, now: float) -> tuple[dict[str, int], dict[str, int], list[str]]:
    c = m.get_capacity(now)
    return c.capacity, c.allocatable, c.deleted


def test_update_capacity_allocatable() -> None:
    """TestUpdateCapacityAllocatable, step by step."""
    m = new()
    devs = [Device("Device1"), Device("Device2"), Device("Device3", "Unhealthy")]
    m.register_endpoint(R1, StaticEndpoint(R1))
    m.update_devices(R1, devs)
    assert caps(m, 0) == ({R1: 3}, {R1: 2}, [])
    m.update_devices(R1, devs[:2])  # an unhealthy device vanishes: capacity only
    assert caps(m, 0) == ({R1: 2}, {R1: 2}, [])
    devs[1] = Device("Device2", "Unhealthy")
    m.update_devices(R1, devs)
    assert caps(m, 0) == ({R1: 3}, {R1: 1}, [])
    m.update_devices(R1, devs[1:])  # a healthy device vanishes
    assert caps(m, 0) == ({R1: 2}, {R1: 0}, [])

    m.register_endpoint(R2, StaticEndpoint(R2))
    m.update_devices(R2, devs)
    assert caps(m, 0) == ({R1: 2, R2: 3}, {R1: 0, R2: 1}, [])

    # resource1's endpoint stopped longer ago than the grace period: dropped, and reported once.
    m.plugin_disconnected(R1, now=100.0)
    assert caps(m, 100.0 + 300.0) == ({R1: 2, R2: 3}, {R1: 0, R2: 1}, [])  # not strictly longer yet
    assert caps(m, 100.0 + 310.0) == ({R2: 3}, {R2: 1}, [R1])
    assert R1 not in m.healthy and R1 not in m.unhealthy and R1 not in m.endpoints
    assert caps(m, 1000.0)[2] == []

    # resource2's plugin goes away: capacity stays, allocatable drops to 0 during the grace period.
    m.plugin_disconnected(R2, now=500.0)
    assert caps(m, 501.0) == ({R2: 3}, {R2: 0}, [])

    # Checkpoint and restore into a fresh manager: stopped endpoint, capacity 0, still a device resource.
    restored = new()
    restored.restore(m.snapshot(), now=600.0)
    assert set(restored.endpoints) == {R2}
    assert caps(restored, 601.0) == ({R2: 0}, {R2: 0}, [])
    assert restored.is_device_plugin_resource(R2)
    assert caps(restored, 901.0) == ({}, {}, [R2])


def test_grace_period_is_configurable() -> None:
    m = new(endpoint_stop_grace_period=10.0)
    m.register_endpoint(R1, StaticEndpoint(R1))
    m.update_devices(R1, [Device("a")])
    m.plugin_disconnected(R1, now=0.0)
    assert caps(m, 10.0)[2] == []
    assert caps(m, 10.5)[2] == [R1]


def test_devices_without_an_endpoint_are_dropped_at_the_next_capacity_query() -> None:
    m = new()
    m.update_devices(R1, [Device("a")])
    assert caps(m, 0.0) == ({}, {}, [R1])


def test_reregistration_clears_the_stop_and_a_stale_disconnect_is_ignored() -> None:
    m = new()
    old, fresh = StaticEndpoint(R1), StaticEndpoint(R1)
    m.register_endpoint(R1, old)
    m.update_devices(R1, [Device("a")])
    m.plugin_disconnected(R1, now=1.0)
    assert m.healthy[R1] == set() and m.unhealthy[R1] == {"a"}
    m.register_endpoint(R1, fresh)
    m.update_devices(R1, [Device("a")])
    m.plugin_disconnected(R1, now=2.0, endpoint=old)  # the old stream breaking late
    assert m.endpoints[R1].stop_time is None
    assert caps(m, 1000.0) == ({R1: 1}, {R1: 1}, [])
    m.plugin_disconnected(R1, now=3.0)  # upstream form: whoever disconnects stops the resource
    assert m.endpoints[R1].stop_time == 3.0


def test_get_allocatable_devices_follows_health() -> None:
    """TestGetAllocatableDevicesMultipleResources and ...HealthTransition."""
    m = new()
    m.register_endpoint(R1, StaticEndpoint(R1))
    m.register_endpoint(R2, StaticEndpoint(R2))
    m.update_devices(R1, [Device("R1Device1"), Device("R1Device2"), Device("R1Device3", "Unhealthy")])
    m.update_devices(R2, [Device("R2Device1", topology=(1,))])
    got = m.get_allocatable_devices()
    assert {r: sorted(d) for r, d in got.items()} == {R1: ["R1Device1", "R1Device2"], R2: ["R2Device1"]}
    assert got[R2]["R2Device1"].topology == (1,)
    m.update_devices(R1, [Device("R1Device1"), Device("R1Device2"), Device("R1Device3")])
    assert sorted(m.get_allocatable_devices()[R1]) == ["R1Device1", "R1Device2", "R1Device3"]


def test_health_change_reports_the_pods_holding_the_device() -> None:
    m = new()
    m.register_endpoint(R1, StaticEndpoint(R1, [Device("a"), Device("b")]))
    m.update_devices(R1, [Device("a"), Device("b")])
    pod = Pod("p", uid="u1", containers=(Container("c", limits={R1: Quantity.from_int(1)}),))
    m.allocate_now(pod, pod.containers[0])
    (mine,) = m.pod_devices.container_devices("u1", "c", R1) or set()
    other = "b" if mine == "a" else "a"
    assert m.update_devices(R1, [Device(mine, "Unhealthy"), Device(other)]) == ["u1"]
    assert m.update_devices(R1, [Device(mine, "Unhealthy"), Device(other, "Unhealthy")]) == []
    assert m.update_devices(R1, [Device(other, "Unhealthy")]) == []
    assert m.update_devices(R1, [Device(mine, "Unhealthy"), Device(other, "Unhealthy")]) == ["u1"]


def test_unhealthy_devices_get_no_hints_and_are_not_allocated() -> None:
    m = new()
    devices = [Device("a", topology=(0,)), Device("b", "Unhealthy", topology=(1,))]
    m.register_endpoint(R1, StaticEndpoint(R1, devices))
    m.update_devices(R1, devices)
    c = Container("c", limits={R1: Quantity.from_int(1)})
    pod = Pod("p", uid="u", containers=(c,))
    # minAffinitySize counts all devices, the candidates only healthy ones.
    assert m.get_topology_hints(pod, c) == {R1: [TopologyHint.of([0], True), TopologyHint.of([0, 1], False)]}
    m.allocate_now(pod, c)
    assert m.pod_devices.container_devices("u", "c", R1) == {"a"}


# -- checkpoint data ----------------------------------------------------------------------------------


def resp(devices: dict[str, str], mounts: dict[str, str], envs: dict[str, str] | None = None,
         cdi: Sequence[str] = ()) -> ContainerAllocateResponse:  # fmt: skip
    return ContainerAllocateResponse(
        envs=envs or {},
        mounts=tuple(Mount(k, v, True) for k, v in mounts.items()),
        devices=tuple(DeviceSpec(v, k, "mrw") for k, v in devices.items()),
        cdi_devices=tuple(cdi),
    )


def test_checkpoint_round_trip() -> None:
    """TestCheckpoint."""
    m = new()
    m.pod_devices.insert("pod1", "con1", R1, {0: ["dev1", "dev2"]},
                         resp({"/dev/r1dev1": "/dev/r1dev1", "/dev/r1dev2": "/dev/r1dev2"},
                              {"/home/r1lib1": "/usr/r1lib1"}, cdi=["domain1.com/resource1=dev1"]))
    m.pod_devices.insert("pod1", "con1", R2, {0: ["dev1", "dev2"]},
                         resp({"/dev/r2dev1": "/dev/r2dev1"}, {"/home/r2lib1": "/usr/r2lib1"},
                              {"r2devices": "dev1 dev2"}))
    m.pod_devices.insert("pod1", "con2", R1, {0: ["dev3"]}, resp({"/dev/r1dev3": "/dev/r1dev3"}, {}))
    m.pod_devices.insert("pod2", "con1", R1, {0: ["dev4"]}, resp({"/dev/r1dev4": "/dev/r1dev4"}, {}))
    m.pod_devices.insert("pod3", "con3", "domain2.com/resource3", {-1: ["dev5"]}, resp({}, {}))
    m.healthy = {R1: {"dev1", "dev2", "dev3", "dev4", "dev5"}, R2: {"dev1", "dev2"},
                 "domain2.com/resource3": {"dev5"}}  # fmt: skip
    data = json.loads(encode_device_checkpoint(m.snapshot()))["Data"]
    assert data["RegisteredDevices"] == {R1: ["dev1", "dev2", "dev3", "dev4", "dev5"], R2: ["dev1", "dev2"],
                                         "domain2.com/resource3": ["dev5"]}  # fmt: skip
    assert [(e["PodUID"], e["ContainerName"], e["ResourceName"]) for e in data["PodDeviceEntries"]] == [
        ("pod1", "con1", R1), ("pod1", "con1", R2), ("pod1", "con2", R1), ("pod2", "con1", R1),
        ("pod3", "con3", "domain2.com/resource3"),
    ]  # fmt: skip
    assert data["PodDeviceEntries"][4]["DeviceIDs"] == {"-1": ["dev5"]}

    # Through the file's bytes and back.
    restored = new()
    restored.restore(decode_device_checkpoint(encode_device_checkpoint(m.snapshot())), now=0.0)
    assert restored.pod_devices.devs == m.pod_devices.devs
    assert restored.allocated == m.pod_devices.devices()
    for pod, con in [("pod1", "con1"), ("pod1", "con2"), ("pod2", "con1"), ("pod3", "con3")]:
        assert restored.get_device_run_container_options(
            Pod("p", uid=pod), Container(con)
        ) == m.pod_devices.run_container_options(pod, con)


def test_pre_numa_checkpoint_reads_devices_as_numa_node_0() -> None:
    """TestReadPreNUMACheckpoint: the old flat DeviceIDs list."""
    m = new()
    # checkpointDataV1, hashed with the V1 type names replaced (the decoder's pre-1.20 fallback)
    spew = ("(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)p "
            f"ContainerName:(string)c ResourceName:(string){R1} DeviceIDs:([]string)[dev1 dev2] "
            "AllocResp:([]uint8)[]}] "
            f"RegisteredDevices:(map[string][]string)map[{R1}:[dev1 dev2]]}}")
    blob = (f'{{"Data":{{"PodDeviceEntries":[{{"PodUID":"p","ContainerName":"c","ResourceName":"{R1}",'
            f'"DeviceIDs":["dev1","dev2"],"AllocResp":""}}],"RegisteredDevices":{{"{R1}":["dev1","dev2"]}}}},'
            f'"Checksum":{fnv1a_32(spew.encode())}}}').encode()
    m.restore(decode_device_checkpoint(blob), now=0.0)
    assert m.pod_devices.devs["p"]["c"][R1].device_ids == {0: ["dev1", "dev2"]}
    assert m.allocated == {R1: {"dev1", "dev2"}}


def test_undecodable_alloc_resp_entry_is_skipped_like_upstream() -> None:
    m = new()
    m.restore(DeviceManagerState([PodDevicesEntry("p", "c", R1, {0: ["d"]}, b"\xff\xff")]), now=0.0)
    assert m.pod_devices.devs == {}


def test_checkpoint_hook_fires_where_upstream_writes_the_checkpoint() -> None:
    calls: list[int] = []
    m = new(checkpoint_hook=lambda: calls.append(1))
    m.register_endpoint(R1, StaticEndpoint(R1, [Device("a")]))
    m.update_devices(R1, [Device("a")])
    assert len(calls) == 1
    pod = Pod("p", uid="u", containers=(Container("c", limits={R1: Quantity.from_int(1)}),))
    m.allocate_now(pod, pod.containers[0])
    assert len(calls) == 2
    m.get_capacity(0.0)
    assert len(calls) == 2  # nothing deleted, nothing written
    m.remove_pod("u")
    assert len(calls) == 3
    assert m.allocated == {}


# -- container start ------------------------------------------------------------------------------


def test_pre_start_container_is_called_with_the_allocated_devices() -> None:
    """TestDevicePreStartContainer."""
    devices = [Device("dev1"), Device("dev2")]
    answer = resp({"/dev/dev1": "/dev/dev1", "/dev/dev2": "/dev/dev2"}, {"/home/lib": "/usr/lib"}, {"A": "1"})
    endpoint = StaticEndpoint(R1, devices, options=DevicePluginOptions(pre_start_required=True),
                              allocate_fn=lambda ids: answer)  # fmt: skip
    m = new()
    m.register_endpoint(R1, endpoint)
    m.update_devices(R1, devices)
    pod = Pod("p", uid="u", containers=(Container("c", limits={R1: Quantity.from_int(2)}),))
    m.allocate_now(pod, pod.containers[0])
    opts = m.get_device_run_container_options(pod, pod.containers[0])
    assert endpoint.pre_started == [("dev1", "dev2")]
    assert opts is not None
    assert opts.envs == (("A", "1"),)
    assert [d.container_path for d in opts.devices] == ["/dev/dev1", "/dev/dev2"]
    assert [mt.container_path for mt in opts.mounts] == ["/home/lib"]


class SlowPlugin(StaticEndpoint):
    def pre_start_container(self, device_ids: Sequence[str]) -> None:
        raise PluginError("deadline exceeded")


def test_pre_start_errors() -> None:
    endpoint = SlowPlugin(R1, [Device("d")], options=DevicePluginOptions(pre_start_required=True))
    m = new()
    m.register_endpoint(R1, endpoint)
    m.update_devices(R1, [Device("d")])
    c = Container("c", limits={R1: Quantity.from_int(1)})
    pod = Pod("p", uid="u", containers=(c,))
    with pytest.raises(PluginError, match=r"^no devices found allocated in local cache for pod u, container c, "):
        m.get_device_run_container_options(pod, c)
    m.allocate_now(pod, c)
    with pytest.raises(PluginError, match=r"^device plugin PreStartContainer rpc failed with err: deadline"):
        m.get_device_run_container_options(pod, c)


def test_run_container_options_merge_first_value_wins_and_dedups() -> None:
    """TestGetDeviceRunContainerOptions plus pod_devices merging rules."""
    m = new(active_pods=lambda: ["u"])
    m.pod_devices.insert("u", "c", "a.com/x", {0: ["1"]},
                         resp({"/dev/h1": "/dev/shared"}, {"/m": "/host1"}, {"E": "from-x", "X": "1"}, ["cdi/a"]))
    m.pod_devices.insert("u", "c", "b.com/y", {0: ["2"]},
                         resp({"/dev/h2": "/dev/shared"}, {"/m": "/host2"}, {"E": "from-y"}, ["cdi/a", "cdi/b"]))
    opts = m.pod_devices.run_container_options("u", "c")
    assert opts is not None
    assert opts.envs == (("E", "from-x"), ("X", "1"))
    assert [(d.container_path, d.host_path) for d in opts.devices] == [("/dev/shared", "/dev/h1")]
    assert [(mt.container_path, mt.host_path) for mt in opts.mounts] == [("/m", "/host1")]
    assert opts.cdi_devices == ("cdi/a", "cdi/b")
    assert m.pod_devices.run_container_options("u", "other") is None


def test_run_options_of_an_inactive_pod_are_none_and_not_reallocated() -> None:
    active = ["u"]
    m = new(active_pods=lambda: active)
    endpoint = StaticEndpoint(R1, [Device("d")])
    m.register_endpoint(R1, endpoint)
    m.update_devices(R1, [Device("d")])
    c = Container("c", limits={R1: Quantity.from_int(1)})
    pod = Pod("p", uid="u", containers=(c,))
    m.allocate_now(pod, c)
    assert m.get_device_run_container_options(pod, c) is not None
    active.clear()
    m.update_allocated_devices()
    assert m.get_device_run_container_options(pod, c) is None
    assert [k for k, _ in endpoint.calls] == ["Allocate"]


def test_active_pod_without_devices_is_reallocated_at_start() -> None:
    m = new()
    m.register_endpoint(R1, StaticEndpoint(R1, [Device("d")]))
    m.update_devices(R1, [Device("d")])
    c = Container("c", limits={R1: Quantity.from_int(1)})
    pod = Pod("p", uid="u", containers=(c,))
    assert m.get_device_run_container_options(pod, c) is not None
    assert m.pod_devices.container_devices("u", "c", R1) == {"d"}


def test_restored_allocation_survives_until_the_plugin_returns() -> None:
    m = new()
    m.register_endpoint(R1, StaticEndpoint(R1, [Device("d", topology=(1,)), Device("e", topology=(0,))]))
    m.update_devices(R1, [Device("d", topology=(1,)), Device("e", topology=(0,))])
    c = Container("c", limits={R1: Quantity.from_int(1)})
    pod = Pod("p", uid="u", containers=(c,))
    m.allocate_now(pod, c)
    held = m.pod_devices.container_devices("u", "c", R1)

    after = new()
    after.restore(m.snapshot(), now=0.0)
    assert after.pod_devices.container_devices("u", "c", R1) == held
    other = Pod("p2", uid="u2", containers=(c,))
    with pytest.raises(AllocationError, match="no healthy devices present"):
        after.allocate_now(other, c)
    devices = [Device("d", topology=(1,)), Device("e", topology=(0,))]
    after.register_endpoint(R1, StaticEndpoint(R1, devices))
    after.update_devices(R1, devices)
    after.allocate_now(other, c)
    assert after.pod_devices.container_devices("u2", "c", R1) == {"d", "e"} - (held or set())
