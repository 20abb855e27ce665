"""Where 1.37's allocator differs from 1.36's, as the conformance harness found against the real
k8s.io/dynamic-resource-allocation (each answer here is the real 1.36.3's and 1.37.2's).

distinctAttribute (seed 3, dra-alloc-407 and dra-alloc-504 at 1.37.2): 1.37 keeps every added device's
attribute (a list) and compares a new device with all of them. 1.34-1.36 key the values by request name, so
each request holds only its last device's value: a request's third device is compared with its second, not
its first. (1.34 compares pointers besides: test_dra_134_differences.py.)

The devices listed for an `All` request: 1.37 checks their capacity with nothing consumed, so a device
other pods' shares have used up stays listed and the request fails; 1.36 leaves it out.
Shared counters: 1.37 keeps them per driver and pool; 1.36 per pool name, so two drivers' pools of one name
draw on one set of counters."""

from __future__ import annotations

from typing import Any

import pytest
from support.dra_oracle import answer

ROOT = "resource.kubernetes.io/pcieRoot"
NUMA = "resource.kubernetes.io/numaNode"


def _case(requests: list[dict[str, Any]], values: list[Any], attribute: str = ROOT,
          shared: frozenset[int] = frozenset()) -> dict[str, Any]:
    kind = "string" if isinstance(values[0], str) else "int"
    devices: list[dict[str, Any]] = []
    for i, v in enumerate(values):
        d: dict[str, Any] = {"name": f"gpu-{i}", "attributes": {attribute: {kind: v}}}
        if i in shared:
            d["allowMultipleAllocations"] = True
        devices.append(d)
    return {
        "gate_overrides": {"DRAConsumableCapacity": True}, "node": {"name": "node-a", "labels": {}},
        "slices": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                    "spec": {"driver": "gpu.example.com",
                             "pool": {"name": "gpus", "generation": 1, "resourceSliceCount": 1},
                             "nodeName": "node-a", "devices": devices}}],
        "classes": [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                     "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}],
        "claims": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "c0", "namespace": "default", "uid": "uid-c0"},
                    "spec": {"devices": {"requests": [
                        {"name": f"r{i}", "exactly": {"deviceClassName": "gpu", **r}} for i, r in enumerate(requests)],
                        "constraints": [{"distinctAttribute": attribute}]}}}],
        "allocated": [],
    }


def _devices(out: dict[str, Any]) -> list[str]:
    assert out["outcome"] == "ok", out
    return [e["device"] for e in out["claims"][0]]


@pytest.mark.parametrize(("version", "devices"), [
    ("1.34.4", ["gpu-0", "gpu-1", "gpu-2"]), ("1.35.4", ["gpu-0", "gpu-1", "gpu-2"]),
    ("1.36.3", ["gpu-0", "gpu-1", "gpu-2"]), ("1.37.0", ["gpu-0", "gpu-1", "gpu-3"]),
    ("1.37.2", ["gpu-0", "gpu-1", "gpu-3"])])
def test_a_device_is_compared_with_every_earlier_one_from_137(version: str, devices: list[str]) -> None:
    # a, b, a, c: gpu-2 repeats gpu-0's value; before 1.37 only gpu-1's (the request's last) is remembered.
    assert _devices(answer(_case([{"count": 3}], ["a", "b", "a", "c"]), version)) == devices


@pytest.mark.parametrize("version", ["1.35.4", "1.36.3"])
def test_before_137_all_devices_take_a_repeated_value(version: str) -> None:
    assert _devices(answer(_case([{"allocationMode": "All"}], ["a", "b", "a"]), version)) == ["gpu-0", "gpu-1", "gpu-2"]


def test_137_all_devices_name_the_first_repeated_one() -> None:
    # dra-alloc-504's shape: upstream names the device whose value an earlier one of the same request has.
    out = answer(_case([{"allocationMode": "All"}], ["a", "b", "a", "c"]), "1.37.2")
    assert (out["outcome"], out["message"]) == (
        "error", "claim default/c0, request r0: cannot add device gpu.example.com/gpus/gpu-2 because a claim "
        "constraint would not be satisfied")


@pytest.mark.parametrize(("version", "outcome"), [("1.36.3", "ok"), ("1.37.2", "unschedulable")])
def test_137_leaves_no_way_round_two_values_for_three_devices(version: str, outcome: str) -> None:
    # dra-alloc-407's shape: three devices over NUMA nodes 0 and 1 cannot be pairwise distinct; 1.36
    # compares the third with the second only. A shared device (allowMultipleAllocations) changes nothing.
    out = answer(_case([{"count": 3}], [1, 0, 1], NUMA, shared=frozenset({2})), version)
    assert out["outcome"] == outcome, out
    if outcome == "unschedulable":
        assert out["message"] == "cannot allocate all claims"


def _all_of_used_capacity() -> dict[str, Any]:
    # every shared GPU (10G of bandwidth each) for 5G, gpu-0 with 8G held by another pod's share
    case = _case([{"allocationMode": "All", "capacity": {"requests": {"bandwidth": "5G"}}}], ["a", "b"],
                 shared=frozenset({0, 1}))
    case["claims"][0]["spec"]["devices"].pop("constraints")
    for d in case["slices"][0]["spec"]["devices"]:
        d["capacity"] = {"bandwidth": {"value": "10G"}}
    case["allocated"] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "held", "namespace": "other", "uid": "uid-held"},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [{
            "request": "req", "driver": "gpu.example.com", "pool": "gpus", "device": "gpu-0",
            "shareID": "6a2b0e4e-0000-4000-8000-000000000001", "consumedCapacity": {"bandwidth": "8G"}}]}}}}]
    return case


def test_136_lists_for_all_only_devices_with_capacity_left() -> None:
    assert _devices(answer(_all_of_used_capacity(), "1.36.3")) == ["gpu-1"]


def test_137_lists_for_all_every_device_whose_capacity_could_fit() -> None:
    out = answer(_all_of_used_capacity(), "1.37.2")
    assert (out["outcome"], out["message"]) == ("unschedulable", "cannot allocate all claims")


def _same_pool_name() -> dict[str, Any]:
    # a GPU and a NIC driver each publish pool p: a counter set of 10Gi and one device consuming all of it
    slices: list[dict[str, Any]] = []
    for driver, device in (("gpu.example.com", "gpu-0"), ("nic.example.com", "nic-0")):
        spec: dict[str, Any] = {"driver": driver, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 2},
                                "nodeName": "node-a"}
        slices += [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{device}-c"},
                    "spec": dict(spec, sharedCounters=[{"name": "set-0", "counters": {"memory": {"value": "10Gi"}}}])},
                   {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": device},
                    "spec": dict(spec, devices=[{"name": device, "consumesCounters": [
                        {"counterSet": "set-0", "counters": {"memory": {"value": "10Gi"}}}]}])}]
    case = _case([{}], ["a"])
    case["slices"] = slices
    case["gate_overrides"] = {"DRAPartitionableDevices": True}
    case["classes"].append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nic"},
                            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "nic.example.com"'}}]}})
    case["claims"][0]["spec"]["devices"] = {"requests": [{"name": "r0", "exactly": {"deviceClassName": "gpu"}},
                                                         {"name": "r1", "exactly": {"deviceClassName": "nic"}}]}
    return case


@pytest.mark.parametrize("version", ["1.35.4", "1.36.3"])
def test_before_137_pools_of_one_name_share_counters(version: str) -> None:
    out = answer(_same_pool_name(), version)
    assert (out["outcome"], out["message"]) == ("unschedulable", "cannot allocate all claims")


def test_137_keeps_counters_per_driver_and_pool() -> None:
    assert _devices(answer(_same_pool_name(), "1.37.2")) == ["gpu-0", "nic-0"]
