"""1.37's consumable-capacity arithmetic (scheduler/dra/capacity.py), each answer here the real 1.37.2's
and 1.36.3's as the conformance harness gave them (its named cases fractional-* and negative-capacity-
request run the same inputs against the real allocator in CI).

DRAFractionalCapacityRange (beta in 1.37, off by default: its on-by-default spec needs a minimum
compatibility version of 1.37) rounds a range of whole thousandths in thousandths; a request that cannot
be represented, or a negative consumed capacity, aborts the allocation from 1.37 on."""

from __future__ import annotations

from typing import Any

import pytest
from support.dra_oracle import answer

from numalign.errors import InvalidInputError
from numalign.k8s.dra.types import CapacityRequestPolicyRange
from numalign.k8s.quantity import Quantity
from numalign.scheduler.dra.capacity import CapacityRequestError, CapacityRules, _round_up_range
from numalign.scheduler.dra.features import features_for

STEPS = {"default": "500m", "validRange": {"min": "500m", "max": "8", "step": "250m"}}
ON = {"DRAFractionalCapacityRange": True}


def _case(requests: list[str], policy: dict[str, Any] | None, value: str = "10", mode: str | None = None,
          gates: dict[str, bool] | None = None) -> dict[str, Any]:
    bandwidth: dict[str, Any] = {"value": value, **({"requestPolicy": policy} if policy else {})}
    devices = [{"name": f"gpu-{i}", "allowMultipleAllocations": True, "capacity": {"bandwidth": bandwidth}}
               for i in range(2)]
    claims = []
    for i, amount in enumerate(requests):
        exactly: dict[str, Any] = {"deviceClassName": "gpu", "capacity": {"requests": {"bandwidth": amount}}}
        if mode:
            exactly["allocationMode"] = mode
        claims.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"uid-c{i}"},
                       "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
    return {
        "gate_overrides": {"DRAConsumableCapacity": True, **(gates or {})}, "node": {"name": "node-a", "labels": {}},
        "slices": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                    "spec": {"driver": "gpu.example.com",
                             "pool": {"name": "gpus", "generation": 1, "resourceSliceCount": 1},
                             "nodeName": "node-a", "devices": devices}}],
        "classes": [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                     "spec": {}}],
        "claims": claims, "allocated": [],
    }


def _consumed(out: dict[str, Any]) -> list[str]:
    assert out["outcome"] == "ok", out
    return [c[0]["consumedCapacity"]["bandwidth"] for c in out["claims"]]


def test_fractional_range_rounds_in_thousandths_when_the_gate_is_on() -> None:
    assert _consumed(answer(_case(["600m", "1.1"], STEPS, gates=ON), "1.37.2")) == ["750m", "1250m"]
    # off (1.37's default) and before 1.37: whole units, 1 and 2
    assert _consumed(answer(_case(["600m", "1.1"], STEPS), "1.37.2")) == ["1", "2"]
    assert _consumed(answer(_case(["600m", "1.1"], STEPS), "1.36.3")) == ["1", "2"]


def test_a_request_of_no_whole_thousandths_in_int64_aborts() -> None:
    out = answer(_case(["100Ei"], {"validRange": {"min": "1", "step": "1"}}, "200Ei", gates=ON), "1.37.2")
    assert out == {"outcome": "error", "message": (
        'claim default/c0, request gpu: checking capacity for device gpu.example.com/gpus/gpu-0: capacity '
        '"bandwidth": capacity request cannot be represented in the device\'s range arithmetic: request '
        "9223372036854775807 is not a representable milli value")}


def test_a_negative_request_aborts_from_137_and_the_all_list_names_the_device_alone() -> None:
    assert _consumed(answer(_case(["-1"], None), "1.36.3")) == ["-1"]
    assert answer(_case(["-1"], None), "1.37.2")["message"] == (
        'claim default/c0, request gpu: checking capacity for device gpu.example.com/gpus/gpu-0: capacity '
        '"bandwidth": capacity value is negative')
    assert answer(_case(["-1"], None, mode="All"), "1.37.2")["message"] == (
        'claim default/c0, request gpu: checking capacity for device gpu-0: capacity "bandwidth": capacity '
        "value is negative")


def test_rounding_past_int64_aborts_from_137() -> None:
    rng = CapacityRequestPolicyRange(min=Quantity.from_int(0), step=Quantity.from_int(2))
    big = Quantity.from_int(2**63 - 1)
    assert _round_up_range(big, rng, CapacityRules()) == Quantity.from_int(2**63)  # 1.36: no check
    with pytest.raises(CapacityRequestError, match="up to the next step passes MaxInt64"):
        _round_up_range(big, rng, CapacityRules(step_format=True, strict=True))


def test_the_gate_needs_consumable_capacity_and_1_37() -> None:
    with pytest.raises(InvalidInputError, match=r"DRAFractionalCapacityRange is enabled, but depends on features "
                                                r"that are disabled: \[DRAConsumableCapacity\]; turn"):
        features_for("1.37", {"DRAFractionalCapacityRange": True, "DRAConsumableCapacity": False})
    with pytest.raises(InvalidInputError, match=r"not known to kube-scheduler 1\.36 \(it arrives in 1\.37\)"):
        features_for("1.36", ON)
    assert features_for("1.37", ON).generation.name == "incubating"
    assert not features_for("1.37").fractional_capacity_range


def _numa_case(request: str) -> dict[str, Any]:
    """Three GPUs in device order NUMA 0, 1, 0: those of NUMA 0 with a validRange of at least 1G (to which a
    negative request rounds up), gpu-1 without a policy; one claim of two GPUs under matchAttribute numaNode."""
    at_least = {"validRange": {"min": "1G"}}
    devices = [{"name": f"gpu-{i}", "attributes": {"resource.kubernetes.io/numaNode": {"int": numa}},
                "capacity": {"bandwidth": {"value": "10G", **({} if numa else {"requestPolicy": at_least})}}}
               for i, numa in enumerate((0, 1, 0))]
    case = _case([request], None)
    case["slices"][0]["spec"]["devices"] = devices
    spec = case["claims"][0]["spec"]["devices"]
    spec["requests"][0]["exactly"]["count"] = 2
    spec["constraints"] = [{"matchAttribute": "resource.kubernetes.io/numaNode"}]
    return case


def test_137_aborts_on_the_capacity_of_a_device_the_match_attribute_would_refuse() -> None:
    """With gpu-0 taken, the constraint holds NUMA 0; 1.37's scan still checks gpu-1's capacity (numalign's
    search, which visits only NUMA 0 devices there, keeps the devices whose check aborts on its way)."""
    assert answer(_numa_case("-1"), "1.37.2") == {"outcome": "error", "message": (
        'claim default/c0, request gpu: checking capacity for device gpu.example.com/gpus/gpu-1: capacity '
        '"bandwidth": capacity value is negative')}
    # before 1.37 nothing aborts: gpu-1 fails the constraint and the request gets gpu-2
    out = answer(_numa_case("-1"), "1.36.3")
    assert out["outcome"] == "ok", out
    assert [e["device"] for e in out["claims"][0]] == ["gpu-0", "gpu-2"]
    # a request every device can represent: no abort at 1.37 either
    out = answer(_numa_case("2G"), "1.37.2")
    assert out["outcome"] == "ok", out
    assert [e["device"] for e in out["claims"][0]] == ["gpu-0", "gpu-2"]
