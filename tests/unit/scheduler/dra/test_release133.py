"""Where kube-scheduler 1.33 (k8s.io/dynamic-resource-allocation v0.33.13) decides otherwise than 1.34, as
the conformance harness found against the real code (the dra-alloc area at 1.33, conformance/README.md),
and PreFilter's DRAPrioritizedList check, which every release's plugin makes before the allocator.

1.33: an admin-access request marks nothing and checks no mark, so it may take a device its own claim took
already; a device of an `All` request stays taken when the rest of the search fails (its mark, its place
in the claim's constraints); and Filter has no timeout, so only numalign's work bound stops a search."""

from __future__ import annotations

from typing import Any

import pytest
from support.dra_oracle import answer

from numalign.k8s.dra.cel import CELFeatures, compile_selector
from numalign.k8s.dra.read import dra_object_from_dict
from numalign.k8s.dra.types import DeviceClass, ResourceClaim, ResourceSlice
from numalign.scheduler.dra.api import AllocationFailure, AllocationResult, allocate_claims

ON_133 = {"DynamicResourceAllocation": True}
ROOT = "resource.kubernetes.io/pcieRoot"
GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}


def _gpus(roots: list[str]) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {ROOT: {"string": r}, "odd": {"bool": i % 2 == 1}}}
               for i, r in enumerate(roots)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "gpus"},
            "spec": {"driver": "gpu.example.com", "pool": {"name": "gpus", "generation": 1, "resourceSliceCount": 1},
                     "nodeName": "node-a", "devices": devices}}


def _claim(name: str, requests: list[dict[str, Any]], constraints: list[Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"devices": devices}}


def _case(claims: list[dict[str, Any]], roots: list[str], gates: dict[str, bool]) -> dict[str, Any]:
    return {"gate_overrides": gates, "node": {"name": "node-a", "labels": {}}, "slices": [_gpus(roots)],
            "classes": [GPU_CLASS], "claims": claims, "allocated": []}


def _devices(out: dict[str, Any]) -> list[list[str]]:
    assert out["outcome"] == "ok", out
    return [[e["device"] for e in claim] for claim in out["claims"]]


SUBREQUESTS_OFF = ("resource claim default/c0, request r1: has subrequests, but the DRAPrioritizedList feature "
                   "is disabled")


@pytest.mark.parametrize(("version", "gates"), [
    ("1.33", ON_133), ("1.34", {"DRAPrioritizedList": False}), ("1.36", {"DRAPrioritizedList": False})])
def test_prefilter_refuses_a_request_with_subrequests_while_prioritized_list_is_off(
        version: str, gates: dict[str, bool]) -> None:
    def requests(first_class: str) -> list[dict[str, Any]]:
        return [{"name": "r0", "exactly": {"deviceClassName": first_class}},
                {"name": "r1", "firstAvailable": [{"name": "s0", "deviceClassName": "gpu"}]}]

    out = answer(_case([_claim("c0", requests("gpu"))], ["a"], gates), version)
    # the pod is unschedulable (it waits for a change), not an allocator error
    assert out == {"outcome": "unschedulable", "message": SUBREQUESTS_OFF}
    # request by request: a missing class in an earlier request is what PreFilter names
    out = answer(_case([_claim("c0", requests("missing"))], ["a"], gates), version)
    assert out == {"outcome": "unschedulable", "message": "request r0: device class missing does not exist"}


def _admin_case(version: str) -> dict[str, Any]:
    requests = [{"name": "r0", "exactly": {"deviceClassName": "gpu"}},
                {"name": "r1", "exactly": {"deviceClassName": "gpu", "adminAccess": True}}]
    return _case([_claim("c0", requests)], ["a", "b"],
                 dict(ON_133, DRAAdminAccess=True) if version == "1.33" else {})


def test_133_admin_access_may_take_the_device_its_claim_took() -> None:
    assert _devices(answer(_admin_case("1.33"), "1.33")) == [["gpu-0", "gpu-0"]]


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
def test_from_134_admin_access_passes_over_a_device_its_claim_took(version: str) -> None:
    assert _devices(answer(_admin_case(version), version)) == [["gpu-0", "gpu-1"]]


def test_133_a_device_admin_access_took_stays_free_for_the_next_request() -> None:
    requests = [{"name": "r0", "exactly": {"deviceClassName": "gpu", "adminAccess": True}},
                {"name": "r1", "exactly": {"deviceClassName": "gpu"}}]
    case = _case([_claim("c0", requests)], ["a", "b"], dict(ON_133, DRAAdminAccess=True))
    assert _devices(answer(case, "1.33")) == [["gpu-0", "gpu-0"]]
    assert _devices(answer(dict(case, gate_overrides={}), "1.34")) == [["gpu-0", "gpu-1"]]


def _all_keeps_case(gates: dict[str, bool]) -> dict[str, Any]:
    """c-first: one odd GPU; c0: All GPUs under matchAttribute pcieRoot (a, a, b, b)."""
    odd = [{"cel": {"expression": 'device.attributes["gpu.example.com"].odd'}}]
    first = _claim("c-first", [{"name": "r0", "exactly": {"deviceClassName": "gpu", "selectors": odd}}])
    every = _claim("c0", [{"name": "r0", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}],
                   [{"matchAttribute": ROOT}])
    return _case([first, every], ["a", "a", "b", "b"], gates)


def test_133_keeps_an_all_request_device_after_the_rest_failed() -> None:
    # c-first on gpu-1: c0 takes gpu-0 and finds gpu-1 in use; gpu-0 stays taken, so with c-first on gpu-3
    # c0 finds gpu-0 in use at once
    assert answer(_all_keeps_case(ON_133), "1.33") == {"outcome": "unschedulable",
                                                       "message": "cannot allocate all claims"}


@pytest.mark.parametrize("version", ["1.34", "1.37"])
def test_from_134_an_all_request_gives_its_devices_back(version: str) -> None:
    # gpu-0 given back: with c-first on gpu-3, c0 takes gpu-0, gpu-1 and fails its constraint at gpu-2
    assert answer(_all_keeps_case({}), version) == {"outcome": "error", "message": (
        "claim default/c0, request r0: cannot add device gpu.example.com/gpus/gpu-2 because a claim constraint "
        "would not be satisfied")}


def _objects(case: dict[str, Any]) -> tuple[list[ResourceClaim], list[ResourceSlice], list[DeviceClass]]:
    def read(obj: dict[str, Any]) -> Any:
        return dra_object_from_dict(obj, "test")

    return ([read(c) for c in case["claims"]], [read(s) for s in case["slices"]],
            [read(c) for c in case["classes"]])


def test_133_has_no_filter_timeout() -> None:
    """The checks budget stands for 1.34+'s 10 s filter timeout; 1.33's Filter has none."""
    claims, slices, classes = _objects(_case([_claim("c0", [
        {"name": "r0", "exactly": {"deviceClassName": "gpu", "count": 2}}])], ["a", "b", "c"], {}))
    ok = allocate_claims(claims, slices, classes, node="node-a", version="1.33", gates=ON_133, budget=1)
    assert isinstance(ok, AllocationResult)
    assert [d.device for d in ok.devices] == ["gpu-0", "gpu-1"]
    stopped = allocate_claims(claims, slices, classes, node="node-a", version="1.34", budget=1)
    assert isinstance(stopped, AllocationFailure) and stopped.stopped_by == "checks"
    assert stopped.message == "timed out trying to allocate devices"


def test_133_only_the_work_bound_stops_a_search_and_says_so() -> None:
    claims, slices, classes = _objects(_case([_claim("c0", [  # three GPUs on three roots: a failing search
        {"name": "r0", "exactly": {"deviceClassName": "gpu", "count": 2}}], [{"matchAttribute": ROOT}])],
        ["a", "b", "c"], {}))
    stopped = allocate_claims(claims, slices, classes, node="node-a", version="1.33", gates=ON_133, budget=1,
                              work_bound=1)
    assert isinstance(stopped, AllocationFailure) and stopped.stopped_by == "work"
    assert "kube-scheduler 1.33 has no filter timeout" in stopped.detail


@pytest.mark.parametrize("expression", ['isSemver("v1.2", true)', 'semver("v1", true) == semver("1.0.0")'])
def test_133_a_new_object_has_no_semver_normalize_argument(expression: str) -> None:
    """The API server checks a new object in the previous minor's environment: at 1.33 the DRA package's own
    semver library (version 0); version 1, with the normalize argument, is the base environment's from 1.33."""
    new = compile_selector(expression, CELFeatures(minor=33), new_object=True)
    assert new.error is not None
    assert new.error.startswith("compilation failed: ERROR: <input>:1:")
    assert "found no matching overload for" in new.error
    for minor, new_object in ((33, False), (34, True)):  # stored at 1.33, new at 1.34: it compiles
        assert compile_selector(expression, CELFeatures(minor=minor), new_object=new_object).error is None
