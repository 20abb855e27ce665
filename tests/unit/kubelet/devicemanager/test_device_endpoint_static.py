"""StaticEndpoint, the in-process plugin behind tests, the simulator and the CLI."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from numalign.errors import PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DevicePluginOptions
from numalign.kubelet.devicemanager.endpoint import Endpoint, StaticEndpoint


def test_device_keeps_no_topology_apart_from_empty_topology() -> None:
    assert Device("a").topology is None
    assert Device("a", topology=()).topology == ()
    assert Device("a") != Device("a", topology=())
    assert Device("a").healthy and not Device("a", "Unhealthy").healthy


def test_static_endpoint_satisfies_the_protocol_and_records_calls() -> None:
    ep = StaticEndpoint("r", [Device("d1"), Device("d2")])
    assert isinstance(ep, Endpoint)
    assert ep.options == DevicePluginOptions()
    assert ep.allocate(["d1"]) == ContainerAllocateResponse()
    assert ep.get_preferred_allocation(["d1", "d2"], [], 1) == []
    ep.pre_start_container(["d2"])
    assert ep.calls == [
        ("Allocate", (("d1",),)),
        ("GetPreferredAllocation", (("d1", "d2"), (), 1)),
        ("PreStartContainer", (("d2",),)),
    ]
    assert ep.pre_started == [("d2",)]


def test_preferred_callback_turns_the_option_on() -> None:
    def prefer_last(available: Sequence[str], must: Sequence[str], size: int) -> list[str]:
        return list(must) + [d for d in reversed(available) if d not in must][: size - len(must)]

    ep = StaticEndpoint("r", [Device("a"), Device("b"), Device("c")], preferred_fn=prefer_last)
    assert ep.options.get_preferred_allocation_available
    assert ep.get_preferred_allocation(["a", "b", "c"], ["a"], 2) == ["a", "c"]


def test_allocate_callback_and_unknown_ids() -> None:
    resp = ContainerAllocateResponse(envs={"K": "v"}, cdi_devices=("vendor.com/dev=a",))
    ep = StaticEndpoint("r", [Device("a")], allocate_fn=lambda ids: resp)
    assert ep.allocate(["a"]) is resp
    with pytest.raises(PluginError, match=r"Allocate on plugin 'r': unknown device ids \['zz'\]"):
        ep.allocate(["a", "zz"])
    with pytest.raises(PluginError, match="PreStartContainer"):
        ep.pre_start_container(["zz"])


def test_add_static_plugin_registers_and_lists_devices() -> None:
    from numalign.core.hint import TopologyHint
    from numalign.kubelet.devicemanager import DeviceManager

    class AnyNode:
        def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
            return TopologyHint(None, True)

    m = DeviceManager([0, 1], AnyNode())
    ep = m.add_static_plugin("vendor.com/nic", [Device("n0", topology=(0,)), Device("n1", "Unhealthy")])
    assert m.endpoints["vendor.com/nic"].endpoint is ep
    assert m.healthy == {"vendor.com/nic": {"n0"}} and m.unhealthy == {"vendor.com/nic": {"n1"}}
    cap = m.get_capacity(0.0)
    assert (cap.capacity, cap.allocatable, cap.deleted) == ({"vendor.com/nic": 2}, {"vendor.com/nic": 1}, [])
