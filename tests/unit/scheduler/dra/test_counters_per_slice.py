"""Shared counters (partitionable devices) as 1.33 and 1.34 keep them, each answer here the real allocator's
(k8s.io/dynamic-resource-allocation v0.33.13 and v0.34.4) as the conformance harness gave it: the dra-alloc
area's named cases counters-in-own-slice, counter-not-in-set and counters-held-in-slice run the first
three inputs against it at 1.33 and 1.34.

Both read a device's counters from the counter sets published in its own slice, beside its devices, and
keep them per slice. 1.34 reserves what a device consumes and checks every counter of the slice's sets
against it (a counter set or counter the slice lacks is never checked); 1.33 checks each counter the
device consumes against what is left once the slice's held and marked devices are taken off (a set or
counter the slice lacks refuses the device), reserving nothing. From 1.35 counter sets are published in
slices of their own and kept per pool (1.37: per driver and pool)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from support.dra_oracle import answer

from numalign.scheduler.dra.features import features_for

TEN = {"memory": {"value": "10Gi"}}


def _gpu(name: str, counters: dict[str, Any], counter_set: str = "set-0") -> dict[str, Any]:
    return {"name": name, "consumesCounters": [{"counterSet": counter_set, "counters": counters}]}


def _case(version: str, slices: Mapping[str, tuple[str | None, list[dict[str, Any]]]], count: int,
          partitionable: bool = True) -> dict[str, Any]:
    """One pool `gpus` of the given slices (name: the memory of its set-0, None for none; its devices) and
    one claim for `count` GPUs."""
    gates = {"DRAPartitionableDevices": partitionable} | ({"DynamicResourceAllocation": True}
                                                          if version.startswith("1.33") else {})
    out = []
    for name, (total, devices) in slices.items():
        spec: dict[str, Any] = {"driver": "gpu.example.com", "nodeName": "node-a", "devices": devices,
                                "pool": {"name": "gpus", "generation": 1, "resourceSliceCount": len(slices)}}
        if total is not None:
            spec["sharedCounters"] = [{"name": "set-0", "counters": {"memory": {"value": total}}}]
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                    "spec": spec})
    return {
        "gate_overrides": gates, "node": {"name": "node-a", "labels": {}}, "slices": out, "allocated": [],
        "classes": [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                     "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}],
        "claims": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "c0", "namespace": "default", "uid": "uid-c0"},
                    "spec": {"devices": {"requests": [{"name": "r0", "exactly": {"deviceClassName": "gpu",
                                                                                 "count": count}}]}}}],
    }


def _devices(out: dict[str, Any]) -> list[str]:
    assert out["outcome"] == "ok", out
    return [e["device"] for e in out["claims"][0]]


TWO_SLICES = {"gpus-a": ("10Gi", [_gpu("gpu-0", TEN), _gpu("gpu-1", TEN)]), "gpus-b": ("10Gi", [_gpu("gpu-2", TEN)])}


@pytest.mark.parametrize("version", ["1.33", "1.34"])
def test_each_slice_s_devices_draw_on_its_own_counter_sets(version: str) -> None:
    # gpu-0 spends slice a's 10Gi, gpu-1 (slice a) no longer fits, gpu-2 draws on slice b's own 10Gi
    assert _devices(answer(_case(version, TWO_SLICES, 2), version)) == ["gpu-0", "gpu-2"]


@pytest.mark.parametrize("version", ["1.33", "1.34"])
def test_a_held_device_spends_its_own_slice_s_counters_only(version: str) -> None:
    case = _case(version, TWO_SLICES, 1)
    case["allocated"] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "held", "namespace": "other", "uid": "uid-held"},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "req", "driver": "gpu.example.com", "pool": "gpus", "device": "gpu-0"}]}}}}]
    assert _devices(answer(case, version)) == ["gpu-2"]


def test_133_refuses_a_device_consuming_a_counter_its_set_lacks_and_134_never_checks_it() -> None:
    slices = {"gpus": ("20Gi", [_gpu("gpu-0", {**TEN, "cores": {"value": "2"}}), _gpu("gpu-1", TEN)])}
    assert _devices(answer(_case("1.33", slices, 1), "1.33")) == ["gpu-1"]
    assert _devices(answer(_case("1.34", slices, 1), "1.34")) == ["gpu-0"]


def test_a_counter_set_in_another_slice_is_never_drawn_on_in_134_and_refuses_the_device_in_133() -> None:
    # the 1.35 shape: the counters in a slice of their own, 10Gi for two devices of 10Gi each
    slices = {"counters": ("10Gi", []), "gpus": (None, [_gpu("gpu-0", TEN), _gpu("gpu-1", TEN)])}
    assert _devices(answer(_case("1.34", slices, 2), "1.34")) == ["gpu-0", "gpu-1"]
    assert answer(_case("1.33", slices, 1), "1.33") == {"outcome": "unschedulable",
                                                        "message": "cannot allocate all claims"}
    # 1.35 (its incubating generation, DRAPartitionableDevices on) keeps them per pool: one device fits
    assert answer(_case("1.35", slices, 2), "1.35") == {"outcome": "unschedulable",
                                                        "message": "cannot allocate all claims"}
    assert _devices(answer(_case("1.35", slices, 1), "1.35")) == ["gpu-0"]


def test_without_partitionable_devices_133_leaves_counters_unchecked_and_134_refuses_the_device() -> None:
    slices = {"gpus": (None, [_gpu("gpu-0", TEN), {"name": "gpu-1"}])}
    assert _devices(answer(_case("1.33", slices, 2, partitionable=False), "1.33")) == ["gpu-0", "gpu-1"]
    assert _devices(answer(_case("1.34", slices, 1, partitionable=False), "1.34")) == ["gpu-1"]


def test_without_partitionable_devices_134_still_gathers_a_slice_with_counter_sets() -> None:
    # 1.33 and 1.35+ leave such a slice out (its pool of one slice: none), 1.34 takes its plain devices
    slices = {"gpus": ("10Gi", [_gpu("gpu-0", TEN), {"name": "gpu-1"}])}
    assert _devices(answer(_case("1.34", slices, 1, partitionable=False), "1.34")) == ["gpu-1"]
    assert answer(_case("1.33", slices, 1, partitionable=False), "1.33")["outcome"] == "unschedulable"


def test_counters_count_a_share_other_pods_hold_from_1362_only() -> None:
    """Counter set of 10Gi in a slice of its own; shared gpu-0 and whole gpu-1 each consume all of it, another
    pod holds a share of gpu-0; one claim for a whole GPU (the answers of the named case counters-held-share)."""
    memory = {"counterSet": "set-0", "counters": TEN}
    case = _case("1.35", {"counters": ("10Gi", []), "gpus": (None, [
        {"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"bandwidth": {"value": "10G"}},
         "consumesCounters": [memory]}, {"name": "gpu-1", "consumesCounters": [memory]}])}, 1)
    case["gate_overrides"]["DRAConsumableCapacity"] = True
    case["claims"][0]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "device.allowMultipleAllocations == false"}}]
    case["allocated"] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "held", "namespace": "other", "uid": "uid-held"},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "req", "driver": "gpu.example.com", "pool": "gpus", "device": "gpu-0",
             "shareID": "6a2b0e4e-0000-4000-8000-000000000001", "consumedCapacity": {"bandwidth": "1G"}}]}}}}]
    assert _devices(answer(case, "1.35")) == ["gpu-1"]
    for version in ("1.36.3", "1.37"):
        assert answer(case, version) == {"outcome": "unschedulable", "message": "cannot allocate all claims"}


def test_134_takes_a_shared_device_s_counters_at_every_share() -> None:
    """Three shared GPUs, each share consuming 10Gi of a 20Gi set; three shares of 1G asked: 1.34 takes the
    counters again at gpu-0's second share, so a third share fits nowhere (named case counters-every-share)."""
    devices = [dict(_gpu(f"gpu-{i}", TEN), allowMultipleAllocations=True, capacity={"bandwidth": {"value": "10G"}})
               for i in range(3)]
    for count, outcome in ((3, "unschedulable"), (2, "ok")):
        case = _case("1.34", {"gpus": ("20Gi", devices)}, count)
        case["gate_overrides"]["DRAConsumableCapacity"] = True
        case["claims"][0]["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"bandwidth": "1G"}}
        assert answer(case, "1.34")["outcome"] == outcome


@pytest.mark.parametrize(("version", "gates"), [
    ("1.35", {"DRAAdminAccess": False, "DRAPrioritizedList": False}),
    ("1.36", {"DRAConsumableCapacity": False, "DRADeviceBindingConditions": False}),
    ("1.37", {"DRAConsumableCapacity": False, "DRADeviceBindingConditions": False})])
def test_the_stable_generation_without_partitionable_devices_keeps_a_counter_slice_in_its_pool(
        version: str, gates: dict[str, bool]) -> None:
    """A pool of a counter-set slice and a device slice, DRAPartitionableDevices off, the stable generation
    picked: 1.35's gathers the counter slice as a device slice without devices, 1.36's and 1.37's leave it out
    but count it toward the pool's completeness; either way gpu-0 (named case stable-counter-slice)."""
    case = _case(version, {"counters": ("10Gi", []), "gpus": (None, [{"name": "gpu-0"}])}, 1, partitionable=False)
    case["gate_overrides"].update(gates)
    assert features_for(version, case["gate_overrides"]).implementation == "stable"
    assert _devices(answer(case, version)) == ["gpu-0"]
