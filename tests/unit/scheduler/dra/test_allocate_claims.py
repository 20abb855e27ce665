"""allocate_claims on the issue's example and on the bad input it names: each failure is upstream's text
in one line naming the file and the object."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.dra.documents import pods_and_dra_from_yaml
from numalign.k8s.dra.podclaims import claims_for_pod
from numalign.k8s.dra.types import DeviceConstraint, DRAObjects, ResourceClaim
from numalign.scheduler.dra import AllocationFailure, AllocationResult, allocate_claims, allocate_pod_claims
from numalign.scheduler.dra.features import SUPPORTED_VERSIONS, features_for

EXAMPLE = Path(__file__).resolve().parents[3] / "data" / "dra" / "four-gpus.yaml"
WHERE = f"{EXAMPLE}: document 3: ResourceClaim default/two-gpus"


def _example(text: str | None = None) -> tuple[ResourceClaim, DRAObjects]:
    pods, objects = pods_and_dra_from_yaml(text if text is not None else EXAMPLE.read_text(), str(EXAMPLE))
    return claims_for_pod(pods[0], objects)[0], objects


def test_the_example_gets_two_gpus_on_one_numa_node() -> None:
    claim, objects = _example()
    result = allocate_claims([claim], objects.slices, objects.classes)
    assert isinstance(result, AllocationResult)
    assert result.node == "node-a"
    assert result.implementation == "incubating"
    assert [(d.device, d.numa_node, d.pci_bus_id) for d in result.devices] == [
        ("gpu-1", 1, "0000:3d:00.0"), ("gpu-2", 1, "0000:63:00.0")]
    allocation = result.claims[0].allocated_claim().allocation
    assert allocation is not None
    assert [r.device_id for r in allocation.results] == [("gpu.example.com", "node-a", "gpu-1"),
                                                         ("gpu.example.com", "node-a", "gpu-2")]


def test_an_answer_and_the_objects_it_was_made_from_pickle_as_they_are() -> None:
    """simulate's --jobs and --dask send claims, slices and answers to other processes: compiled, the frozen
    models are pickled as constructor calls (a compiled class's field-by-field restore is refused)."""
    claim, objects = _example()
    result = allocate_claims([claim], objects.slices, objects.classes)
    assert isinstance(result, AllocationResult)
    sent = pickle.loads(pickle.dumps((result.claims, objects)))
    assert sent == (result.claims, objects)
    assert [d.numa_node for d in sent[0][0].devices] == [1, 1]


def test_an_allocated_claim_keeps_its_devices_and_holds_them_for_others() -> None:
    claim, objects = _example()
    first = allocate_claims([claim], objects.slices, objects.classes)
    assert isinstance(first, AllocationResult)
    held = first.claims[0].allocated_claim()
    kept = allocate_claims([held], objects.slices, objects.classes)
    assert isinstance(kept, AllocationResult)
    assert kept.claims[0].preallocated and [d.device for d in kept.devices] == ["gpu-1", "gpu-2"]
    assert kept.devices[0].numa_node == 1
    # A second claim like the first no longer finds two h100s on one NUMA node: gpu-0 is alone on node 0.
    other = dataclasses.replace(claim, name="again")
    refused = allocate_claims([other], objects.slices, objects.classes, allocated=[held])
    assert isinstance(refused, AllocationFailure)
    assert refused.line() == f"{WHERE}: cannot allocate all claims"


def test_every_version_allocates_the_example_with_its_own_implementation() -> None:
    claim, objects = _example()
    chosen = {}
    for version in SUPPORTED_VERSIONS:
        result = allocate_claims([claim], objects.slices, objects.classes, version=version)
        chosen[version] = result.implementation
        if version == "1.33":  # DynamicResourceAllocation is beta and off by default
            assert isinstance(result, AllocationFailure) and not result.unschedulable
        else:
            assert isinstance(result, AllocationResult)
            assert [d.device for d in result.devices] == ["gpu-1", "gpu-2"]
    assert chosen["1.34"] == "experimental"  # DRAResourceClaimDeviceStatus picked it (k/k #133967)
    assert chosen["1.35"] == chosen["1.36"] == chosen["1.37"] == "incubating"
    assert features_for("1.37", {"DRAListTypeAttributes": True}).implementation == "experimental"


def test_features_are_worked_out_once_per_version_and_gates_and_a_refused_gate_stays_refused() -> None:
    """Every Allocate asks features_for: the same version and gates (in any order) get the same frozen
    Features back; gates that kube-scheduler refuses are refused on every ask (never kept)."""
    gates = {"DRAListTypeAttributes": True, "DRAConsumableCapacity": False}
    first = features_for("1.37", gates)
    assert features_for("1.37", dict(reversed(gates.items()))) is first
    assert first.implementation == "experimental" and not first.consumable_capacity
    assert features_for("1.37") is not first and features_for("1.37").implementation == "incubating"
    assert features_for("1.36.3").minor == 36 and features_for("1.36.3").patch == 3
    for _ in range(2):
        with pytest.raises(InvalidInputError, match="DRAListTypeAttributes"):
            features_for("1.35", {"DRAListTypeAttributes": True, "DRANoSuchGate": True})


def test_a_claim_naming_a_missing_class_is_refused_as_the_scheduler_does() -> None:
    text = EXAMPLE.read_text().replace("deviceClassName: h100", "deviceClassName: h200")
    claim, objects = _example(text)
    result = allocate_claims([claim], objects.slices, objects.classes)
    assert isinstance(result, AllocationFailure) and result.unschedulable
    assert result.line() == f"{WHERE}: request gpus: device class h200 does not exist"


def test_a_selector_that_matches_nothing_is_refused_with_the_allocators_reason() -> None:
    text = EXAMPLE.read_text().replace('model == "h100"', 'model == "b200"')
    claim, objects = _example(text)
    result = allocate_claims([claim], objects.slices, objects.classes)
    assert isinstance(result, AllocationFailure) and result.unschedulable
    assert result.line() == f"{WHERE}: cannot allocate all claims"


def test_a_constraint_on_an_attribute_no_device_has() -> None:
    claim, objects = _example()
    odd = dataclasses.replace(claim, spec=dataclasses.replace(
        claim.spec, constraints=(DeviceConstraint(("gpus",), match_attribute="gpu.example.com/socket"),)))
    result = allocate_claims([odd], objects.slices, objects.classes)
    assert isinstance(result, AllocationFailure)
    assert result.line() == f"{WHERE}: cannot allocate all claims"


def test_a_runtime_cel_error_names_the_class_and_the_device() -> None:
    text = EXAMPLE.read_text().replace('device.attributes["gpu.example.com"].model == "h100"',
                                       'device.attributes["gpu.example.com"].memoryGB > 40')
    claim, objects = _example(text)
    result = allocate_claims([claim], objects.slices, objects.classes)
    assert isinstance(result, AllocationFailure) and not result.unschedulable
    assert result.line() == (
        f"{EXAMPLE}: document 2: DeviceClass h100: class h100: selector #0 on device gpu.example.com/node-a/gpu-0: "
        "CEL runtime error: no such key: memoryGB. consider using CEL optional chaining (.? followed by orValue()) "
        "or guarding the check with has() for optional fields")
    older = allocate_claims([claim], objects.slices, objects.classes, version="1.36")
    assert isinstance(older, AllocationFailure)
    assert older.message == "class h100: selector #0: CEL runtime error: no such key: memoryGB"


def test_duplicate_device_names_across_a_pools_slices_make_the_pool_invalid() -> None:
    _, objects = _example()
    doc = json.loads(json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "more"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
                 "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 2},
                 "devices": [{"name": "gpu-1"}]}}))
    first = EXAMPLE.read_text().replace("resourceSliceCount: 1", "resourceSliceCount: 2")
    claim, objects = _example(first + "\n---\n" + json.dumps(doc))
    result = allocate_claims([claim], objects.slices, objects.classes)
    assert isinstance(result, AllocationFailure) and result.unschedulable
    assert result.line() == f"{WHERE}: invalid resource pools were encountered"
    in_134 = allocate_claims([claim], objects.slices, objects.classes, version="1.34")
    assert isinstance(in_134, AllocationFailure) and not in_134.unschedulable  # fatal until 1.35
    assert in_134.message == "pool node-a is invalid: duplicate device name gpu-1"


@pytest.mark.parametrize("count", [3, 4])
def test_more_gpus_on_one_numa_node_than_any_has(count: int) -> None:
    text = EXAMPLE.read_text().replace("count: 2", f"count: {count}")
    claim, objects = _example(text)
    result = allocate_claims([claim], objects.slices, objects.classes)
    assert isinstance(result, AllocationFailure)
    assert result.message == "cannot allocate all claims"


def test_versions_are_parsed_as_every_kubelet_version_is() -> None:
    claim, objects = _example()
    patch = allocate_claims([claim], objects.slices, objects.classes, version="v1.36.1")
    assert isinstance(patch, AllocationResult) and patch.implementation == "incubating"
    with pytest.raises(InvalidInputError, match=r"kubelet version '1\.32' is not supported"):
        allocate_claims([claim], objects.slices, objects.classes, version="1.32")


def test_a_search_past_its_budget_ends_with_the_schedulers_timeout_text() -> None:
    """The bound counts device checks (deterministic); the answer is the scheduler's filter timeout, an
    error naming the node from 1.36, an unschedulable node before."""
    claim, objects = _example()
    result = allocate_claims([claim], objects.slices, objects.classes, budget=1)
    assert isinstance(result, AllocationFailure) and not result.unschedulable
    assert result.message == "node node-a: timed out trying to allocate devices"
    assert result.line() == (f"{WHERE}: numalign stopped the search after 1 device checks (its bound in place of "
                             "the scheduler's 10 s filter timeout): node node-a: timed out trying to allocate devices")
    older = allocate_claims([claim], objects.slices, objects.classes, budget=1, version="1.35")
    assert isinstance(older, AllocationFailure) and older.unschedulable
    assert older.message == "timed out trying to allocate devices"


def test_the_library_example_allocates_the_pods_claims() -> None:
    section = (Path(__file__).resolve().parents[4] / "docs" / "library.md").read_text().split(
        "## Allocating DRA claims", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    root = Path(__file__).resolve().parents[4]
    namespace: dict[str, object] = {}
    exec(compile(code.replace('Path("tests/', f'Path("{root}/tests/'), "library.md", "exec"), namespace)
    result = namespace["result"]
    assert isinstance(result, AllocationResult)
    assert [(d.device_id, d.numa_node) for d in result.devices] == [
        ("gpu.example.com/node-a/gpu-1", 1), ("gpu.example.com/node-a/gpu-2", 1)]


def test_allocate_pod_claims_holds_the_other_allocated_claims_devices() -> None:
    pods, objects = pods_and_dra_from_yaml(EXAMPLE.read_text(), str(EXAMPLE))
    first = allocate_pod_claims(pods[0], objects)
    assert isinstance(first, AllocationResult)
    held = first.claims[0].allocated_claim()
    objects.claims["default/other"] = dataclasses.replace(held, name="other")
    again = allocate_pod_claims(pods[0], objects)  # gpu-1 and gpu-2 are held by "other" now
    assert isinstance(again, AllocationFailure)
    assert again.message == "cannot allocate all claims"


@pytest.mark.parametrize(("version", "gate", "since"), [
    ("1.35", "DynamicResourceAllocation", 35), ("1.36", "DRAAdminAccess", 36), ("1.37", "DRAAdminAccess", 36),
    ("1.37", "DRAPrioritizedList", 37), ("1.37.2", "DRAResourceClaimDeviceStatus", 37)])
def test_a_gate_locked_to_its_default_is_refused_set_otherwise(version: str, gate: str, since: int) -> None:
    """GA gates locked to their default (kube_features.go's LockToDefault): kube-scheduler refuses to start
    with them set otherwise, in featuregate's words (the dra-alloc named case locked-gate, real 1.36/1.37)."""
    with pytest.raises(InvalidInputError) as refused:
        features_for(version, {gate: False})
    assert str(refused.value).startswith(f"cannot set feature gate {gate} to false, feature is locked to true "
                                         f"(GA since 1.{since}); remove the override")
    assert features_for(version, {gate: True}) is not None  # its default: taken
    assert features_for(f"1.{since - 1}", {gate: False}) is not None  # before it was locked: taken
