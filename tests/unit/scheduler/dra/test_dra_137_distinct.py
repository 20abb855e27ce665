"""distinctAttribute: what a new device is compared with, per release, as the conformance harness found
against the real k8s.io/dynamic-resource-allocation (seed 3, dra-alloc-407 and dra-alloc-504 at 1.37.2).

1.37 keeps every added device's attribute (a list) and compares a new device with all of them. 1.34-1.36 key
the values by request name, so each request holds only its last device's value: a request's third device is
compared with its second, not its first. (1.34 compares pointers besides: test_dra_134_differences.py.)"""

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
