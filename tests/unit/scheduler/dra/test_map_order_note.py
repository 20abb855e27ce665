"""In 1.34 and 1.35 the scheduler ranges over a Go map of pools, so with two pools that could serve a request
the device it picks changes from one scheduling attempt to the next; the conformance harness sees both
answers from the real code (area dra-alloc, map_order). numalign searches the pools sorted and says so,
naming what another order gives, when it finds such an order (docs/dra.md, "Go map order")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from numalign.k8s.dra.read import dra_object_from_dict
from numalign.k8s.dra.types import DeviceClass, ResourceClaim, ResourceSlice
from numalign.scheduler.dra import AllocationFailure, AllocationResult, allocate_claims


def _slice(pool: str, device: str, model: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"node-a-{pool}"},
            "spec": {"driver": "gpu.example.com", "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                     "nodeName": "node-a",
                     "devices": [{"name": device, "attributes": {"model": {"string": model}}}]}}


CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}


def _claim(selector: str = "true") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "gpu", "namespace": "default", "uid": "uid-gpu"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "selectors": [{"cel": {"expression": selector}}]}}]}}}


SLICES = [_slice("pool-a", "gpu-0", "h100"), _slice("pool-b", "gpu-1", "h100")]


def _allocate(version: str, claim: dict[str, Any], slices: list[dict[str, Any]] = SLICES
              ) -> AllocationResult | AllocationFailure:
    return allocate_claims([_read(claim, ResourceClaim)], [_read(s, ResourceSlice) for s in slices],
                           [_read(CLASS, DeviceClass)], node="node-a", version=version)


def _read(obj: dict[str, Any], kind: type[Any]) -> Any:
    read = dra_object_from_dict(obj, "test")
    assert isinstance(read, kind)
    return read


@pytest.mark.parametrize("version", ["1.34.4", "1.35.4"])
def test_two_pools_that_could_serve_the_request_are_named_with_the_other_answer(version: str) -> None:
    result = _allocate(version, _claim())
    assert isinstance(result, AllocationResult)
    assert [d.device_id for d in result.devices] == ["gpu.example.com/pool-a/gpu-0"]  # sorted: pool-a first
    assert result.map_order.endswith("searches the node's resource pools in Go map order, which changes from one "
                                     "scheduling attempt to the next: with pool gpu.example.com/pool-b first it "
                                     "allocates gpu.example.com/pool-b/gpu-1")


@pytest.mark.parametrize("version", ["1.36.3", "1.37.2"])
def test_releases_that_sort_the_pools_say_nothing(version: str) -> None:
    result = _allocate(version, _claim())
    assert isinstance(result, AllocationResult) and result.map_order == ""


def test_when_only_one_pool_has_a_device_for_the_request_no_order_changes_the_answer() -> None:
    slices = [_slice("pool-a", "gpu-0", "h100"), _slice("pool-b", "gpu-1", "l4")]
    result = _allocate("1.34.4", _claim('device.attributes["gpu.example.com"].model == "h100"'), slices)
    assert isinstance(result, AllocationResult) and result.map_order == ""


def test_a_failure_that_another_order_avoids_is_named_too() -> None:
    # pool-b's two slices name the same device: invalid. 1.34 fails the allocation when its search reaches
    # an invalid pool, so the answer depends on whether pool-c (which can serve the claim) comes first.
    bad = [_slice("pool-b", "gpu-1", "h100"), _slice("pool-b", "gpu-1", "h100")]
    for i, s in enumerate(bad):
        s["metadata"]["name"] += f"-{i}"
        s["spec"]["pool"]["resourceSliceCount"] = 2
    slices = [*bad, _slice("pool-c", "gpu-2", "h100")]
    result = _allocate("1.34.4", _claim(), slices)
    assert isinstance(result, AllocationFailure)
    assert result.message == "pool pool-b is invalid: duplicate device name gpu-1"
    assert result.map_order.endswith("with pool gpu.example.com/pool-c first it allocates "
                                     "gpu.example.com/pool-c/gpu-2")


def test_admit_prints_the_note_in_text_and_json(tmp_path: Path) -> None:
    import yaml

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "default"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                    "containers": [{"name": "main", "image": "x", "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"}, "claims": [{"name": "gpu"}]}}]}}
    f = tmp_path / "pod.yaml"
    f.write_text(yaml.safe_dump_all([*SLICES, CLASS, _claim(), pod]))
    exe = [sys.executable, "-m", "numalign.cli.main", "admit", str(f), "--kubelet-version", "1.34.4",
           "--node-name", "node-a"]
    text = subprocess.run(exe, capture_output=True, text=True, timeout=120, check=False)
    assert text.returncode == 0, text.stderr
    assert ("  dra map order: the scheduler of this release (experimental allocator) searches the node's resource "
            "pools in Go map order") in text.stdout
    doc = json.loads(subprocess.run([*exe, "-o", "json"], capture_output=True, text=True, timeout=120,
                                    check=False).stdout)
    assert doc["pods"][0]["dra"]["mapOrder"].endswith("allocates gpu.example.com/pool-b/gpu-1")
