"""Where 1.34's allocator differs from 1.35's, as the conformance harness found against the real
k8s.io/dynamic-resource-allocation.

Which slices make a pool complete: 1.35+ count the pool's slices for every node (checkSlicesInPool) and
offer no device from an incomplete pool; 1.34's GatherPools counts only the slices that apply to the node,
so a pool whose slices are spread over nodes is incomplete there, and 1.34 still searches its devices
(only allocationMode All refuses an incomplete pool).

distinctAttribute: 1.34 compares the attribute values' pointers, so two devices never share a value; from
1.35 (in the implementations that have the constraint) the values are compared."""

from __future__ import annotations

from typing import Any

import pytest
from support.dra_oracle import answer


def _slice(name: str, node: str, devices: list[str], count: int = 2) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "gpu.example.com",
                     "pool": {"name": "gpus", "generation": 1, "resourceSliceCount": count}, "nodeName": node,
                     "devices": [{"name": d} for d in devices]}}


def _case(mode: dict[str, Any], slices: list[dict[str, Any]], constraints: list[Any] | None = None
          ) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "r0", "exactly": {"deviceClassName": "gpu", **mode}}]}
    if constraints:
        devices["constraints"] = constraints
    return {
        "gate_overrides": {}, "node": {"name": "node-a", "labels": {}}, "slices": slices, "allocated": [],
        "classes": [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                     "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}],
        "claims": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "c0", "namespace": "default", "uid": "uid-c0"},
                    "spec": {"devices": devices}}],
    }


# One pool of two slices: one for node-a (gpu-0, gpu-1), one for node-b (gpu-2).
SPREAD = [_slice("a", "node-a", ["gpu-0", "gpu-1"]), _slice("b", "node-b", ["gpu-2"])]
# The same pool with its node-b slice missing: incomplete for every release.
MISSING = [_slice("a", "node-a", ["gpu-0", "gpu-1"])]
BEING_UPDATED = ("claim default/c0, request r0: asks for all devices, but resource pool gpu.example.com/gpus is "
                 "currently being updated")


def _devices(out: dict[str, Any]) -> list[str]:
    assert out["outcome"] == "ok", out
    return [e["device"] for e in out["claims"][0]]


def test_134_calls_a_pool_spread_over_nodes_incomplete_for_all_devices() -> None:
    out = answer(_case({"allocationMode": "All"}, SPREAD), "1.34.4")
    assert (out["outcome"], out["message"]) == ("error", BEING_UPDATED)


@pytest.mark.parametrize("version", ["1.35.4", "1.36.3", "1.37.2"])
def test_135_and_later_count_the_pools_slices_on_every_node(version: str) -> None:
    assert _devices(answer(_case({"allocationMode": "All"}, SPREAD), version)) == ["gpu-0", "gpu-1"]


def test_134_searches_an_incomplete_pools_devices() -> None:
    assert _devices(answer(_case({"count": 1}, MISSING), "1.34.4")) == ["gpu-0"]


@pytest.mark.parametrize("version", ["1.35.4", "1.36.3", "1.37.2"])
def test_135_and_later_offer_nothing_from_an_incomplete_pool(version: str) -> None:
    out = answer(_case({"count": 1}, MISSING), version)
    assert (out["outcome"], out["message"]) == ("unschedulable", "cannot allocate all claims")


def _numa_slice(numa: list[int]) -> dict[str, Any]:
    s = _slice("a", "node-a", [f"gpu-{i}" for i in range(len(numa))], count=1)
    for d, n in zip(s["spec"]["devices"], numa, strict=True):
        d["attributes"] = {"resource.kubernetes.io/numaNode": {"int": n}}
    return s


def test_134_distinct_attribute_never_finds_two_devices_alike() -> None:
    case = _case({"count": 2}, [_numa_slice([0, 0])], [{"distinctAttribute": "resource.kubernetes.io/numaNode"}])
    assert _devices(answer(case, "1.34.4")) == ["gpu-0", "gpu-1"]
    # 1.35's default implementation (incubating) has no distinctAttribute; 1.36's compares values.
    out = answer(case, "1.36.3")
    assert (out["outcome"], out["message"]) == ("unschedulable", "cannot allocate all claims")
    distinct = _case({"count": 2}, [_numa_slice([0, 0, 1])], [{"distinctAttribute": "resource.kubernetes.io/numaNode"}])
    assert _devices(answer(distinct, "1.36.3")) == ["gpu-0", "gpu-2"]


@pytest.mark.parametrize(("version", "devices"), [("1.34.4", ["gpu-0"]), ("1.35.4", ["gpu-0"]),
                                                  ("1.36.3", ["gpu-0", "gpu-1"]), ("1.37.2", ["gpu-0", "gpu-1"])])
def test_before_136_an_all_subrequest_goes_on_as_the_first_subrequest(version: str, devices: list[str]) -> None:
    # firstAvailable: s0 asks a class no device is in (one device), s1 all the GPUs. 1.34 and 1.35 drop the
    # subrequest's index after s1's first device and go on as s0, whose one device is then "done".
    case = _case({}, [_numa_slice([0, 1])])
    case["classes"].append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "none"},
                            "spec": {"selectors": [{"cel": {"expression": "false"}}]}})
    case["claims"][0]["spec"]["devices"]["requests"] = [{"name": "r0", "firstAvailable": [
        {"name": "s0", "deviceClassName": "none"}, {"name": "s1", "deviceClassName": "gpu", "allocationMode": "All"}]}]
    assert _devices(answer(case, version)) == devices


def _two_drivers_case(s1_selectors: list[dict[str, Any]]) -> dict[str, Any]:
    """firstAvailable [s0: every GPU, s1: every NIC], with gpu-0 held by another pod so s0 cannot be had."""
    nics = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "nics"},
            "spec": {"driver": "nic.example.com", "pool": {"name": "nics", "generation": 1, "resourceSliceCount": 1},
                     "nodeName": "node-a", "devices": [{"name": "nic-0"}, {"name": "nic-1"}]}}
    case = _case({}, [_slice("a", "node-a", ["gpu-0", "gpu-1"], count=1), nics])
    case["classes"].append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nic"},
                            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "nic.example.com"'}}]}})
    case["claims"][0]["spec"]["devices"]["requests"] = [{"name": "r0", "firstAvailable": [
        {"name": "s0", "deviceClassName": "gpu", "allocationMode": "All"},
        {"name": "s1", "deviceClassName": "nic", "allocationMode": "All", "selectors": s1_selectors}]}]
    case["allocated"] = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": {"name": "held", "namespace": "other", "uid": "uid-held"},
                          "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu"}}]}},
                          "status": {"allocation": {"devices": {"results": [
                              {"request": "req", "driver": "gpu.example.com", "pool": "gpus", "device": "gpu-0"}]}}}}]
    return case


@pytest.mark.parametrize("version", ["1.34.4", "1.35.4"])
def test_before_136_a_second_all_subrequest_gets_the_first_ones_devices(version: str) -> None:
    # Up to 1.35 s1 is validated under s0's key, and s0's verdicts are cached there: s1's "all devices" are
    # s0's GPUs (one held by another pod), so neither subrequest can be had.
    out = answer(_two_drivers_case([]), version)
    assert (out["outcome"], out["message"]) == ("unschedulable", "cannot allocate all claims")
    # ... and s1's own selector is never evaluated: one that fails on every NIC does not fail the allocation.
    out = answer(_two_drivers_case([{"cel": {"expression": 'device.attributes["x"].missing == 1'}}]), version)
    assert (out["outcome"], out["message"]) == ("unschedulable", "cannot allocate all claims")


@pytest.mark.parametrize("version", ["1.36.3", "1.37.2"])
def test_from_136_a_second_all_subrequest_gets_its_own_devices(version: str) -> None:
    assert _devices(answer(_two_drivers_case([]), version)) == ["nic-0", "nic-1"]
    out = answer(_two_drivers_case([{"cel": {"expression": 'device.attributes["x"].missing == 1'}}]), version)
    assert out["outcome"] == "error" and "CEL runtime error" in out["message"], out


def _capacity_case(first_has_memory: bool) -> dict[str, Any]:
    """One slice: gpu-0 (no capacity, or memory only), then gpu-1 (shared, 10G of bandwidth in 1G steps); one
    request for 3G of bandwidth."""
    shared = {"allowMultipleAllocations": True, "capacity": {"bandwidth": {
        "value": "10G", "requestPolicy": {"default": "1G", "validRange": {"min": "1G", "step": "1G"}}}}}
    s = _slice("a", "node-a", ["gpu-0", "gpu-1"], count=1)
    s["spec"]["devices"][1].update(shared)
    if first_has_memory:
        s["spec"]["devices"][0].update({"capacity": {"memory": {"value": "80Gi"}}})
    case = _case({"capacity": {"requests": {"bandwidth": "3G"}}}, [s])
    case["gate_overrides"] = {"DRAConsumableCapacity": True}
    return case


def test_134_checks_the_capacity_of_the_device_at_the_requests_index() -> None:
    # The scan passes over gpu-0 (no bandwidth) and takes gpu-1, whose capacity check then reads the slice's
    # device at the request's device index, 0: gpu-0, without bandwidth, so gpu-1 cannot be taken either
    # (conformance seed 8, dra-alloc-191 at 1.34.4).
    for first_has_memory in (False, True):
        out = answer(_capacity_case(first_has_memory), "1.34.4")
        assert (out["outcome"], out["message"]) == ("unschedulable", "cannot allocate all claims")


@pytest.mark.parametrize("version", ["1.35.4", "1.36.3", "1.37.2"])
def test_135_and_later_check_the_capacity_of_the_device_taken(version: str) -> None:
    out = answer(_capacity_case(False), version)
    assert _devices(out) == ["gpu-1"]
    assert out["claims"][0][0]["shared"] is True
