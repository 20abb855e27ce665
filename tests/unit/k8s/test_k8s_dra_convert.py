"""resource.k8s.io/v1beta1 and v1beta2 objects read as the API server converts them to v1: each input
form gives the same typed object as its v1 form. The expected v1 forms are what the API server's own
conversion (k8s.io/kubernetes 1.36.3 pkg/apis/resource/v1beta1, decoded and converted to v1) printed
for the same inputs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.dra.read import dra_object_from_dict

V1, V1BETA2, V1BETA1 = "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1"


def _claim(requests: list[dict[str, Any]], version: str, kind: str = "ResourceClaim",
           constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    spec: dict[str, Any] = {"devices": devices}
    if kind == "ResourceClaimTemplate":
        spec = {"spec": spec}
    return {"apiVersion": version, "kind": kind, "metadata": {"name": "c", "namespace": "ns"}, "spec": spec}


def _same(beta: dict[str, Any], v1: dict[str, Any]) -> None:
    assert dra_object_from_dict(beta, "in.yaml") == dra_object_from_dict(v1, "in.yaml")
    as_v1beta2 = copy.deepcopy(v1) | {"apiVersion": V1BETA2}  # v1beta2 has v1's fields
    assert dra_object_from_dict(as_v1beta2, "in.yaml") == dra_object_from_dict(v1, "in.yaml")


@pytest.mark.parametrize("kind", ["ResourceClaim", "ResourceClaimTemplate"])
def test_a_v1beta1_request_with_its_class_becomes_exactly_with_the_defaults(kind: str) -> None:
    _same(_claim([{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}], V1BETA1, kind),
          _claim([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                                              "count": 1}}], V1, kind))


def test_every_v1beta1_request_field_moves_under_exactly() -> None:
    fields = {"deviceClassName": "x", "count": 3, "adminAccess": True, "selectors": [{"cel": {"expression": "true"}}],
              "tolerations": [{"key": "k", "operator": "Exists"}], "capacity": {"requests": {"memory": "1Gi"}}}
    constraints = [{"requests": ["g"], "matchAttribute": "a.b/c"}]
    beta = _claim([{"name": "g", **fields}], V1BETA1, constraints=constraints)
    v1 = _claim([{"name": "g", "exactly": fields | {"allocationMode": "ExactCount"}}], V1, constraints=constraints)
    _same(beta, v1)
    request = dra_object_from_dict(beta, "in.yaml").spec.requests[0]  # type: ignore[union-attr]
    assert request.exactly is not None
    assert (request.exactly.count, request.exactly.admin_access, len(request.exactly.selectors)) == (3, True, 1)


def test_allocation_mode_all_keeps_no_count() -> None:
    _same(_claim([{"name": "g", "deviceClassName": "x", "allocationMode": "All"}], V1BETA1),
          _claim([{"name": "g", "exactly": {"deviceClassName": "x", "allocationMode": "All"}}], V1))


def test_first_available_is_the_same_in_both() -> None:
    subs = [{"name": "a", "deviceClassName": "x"}, {"name": "b", "deviceClassName": "y", "count": 2}]
    _same(_claim([{"name": "g", "firstAvailable": subs}], V1BETA1), _claim([{"name": "g", "firstAvailable": subs}], V1))


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        # a count without a class makes an `exactly` without one (not defaulted): the class is required
        ({"name": "g", "count": 2}, "spec.devices.requests[0].exactly.deviceClassName: Required value"),
        # an empty selector list is set (Go decodes it as a non-nil slice)
        ({"name": "g", "selectors": []}, "spec.devices.requests[0].exactly.deviceClassName: Required value"),
        # a class and subrequests make both `exactly` and `firstAvailable`
        ({"name": "g", "deviceClassName": "x", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]},
         "spec.devices.requests[0]: Invalid value: exactly one of `exactly` or `firstAvailable` is required"),
    ],
)
def test_a_converted_request_is_validated_with_v1_paths(request_: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        dra_object_from_dict(_claim([request_], V1BETA1), "in.yaml")
    assert str(err.value) == f'in.yaml: ResourceClaim.resource.k8s.io "c" is invalid: {expected}'


def _slice(devices: list[dict[str, Any]], version: str) -> dict[str, Any]:
    return {"apiVersion": version, "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "d.example.com", "nodeName": "n",
                     "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": devices,
                     "sharedCounters": [{"name": "cs", "counters": {"c": {"value": "4"}}}]}}


def test_a_v1beta1_device_takes_its_fields_from_basic() -> None:
    basic = {"attributes": {"resource.kubernetes.io/numaNode": {"int": 1}, "model": {"string": "h100"}},
             "capacity": {"memory": {"value": "80Gi"}},
             "consumesCounters": [{"counterSet": "cs", "counters": {"c": {"value": "1"}}}],
             "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}], "allowMultipleAllocations": True}
    beta = _slice([{"name": "d0", "basic": basic}, {"name": "d1"}], V1BETA1)
    _same(beta, _slice([{"name": "d0", **basic}, {"name": "d1"}], V1))
    device = dra_object_from_dict(beta, "in.yaml").devices[0]  # type: ignore[union-attr]
    assert str(device.capacity["memory"].value) == "80Gi"
    assert device.attributes["model"].values == ("h100",)


def test_a_v1beta1_device_class_is_read_as_is() -> None:
    spec = {"selectors": [{"cel": {"expression": "true"}}], "extendedResourceName": "example.com/gpu"}
    meta = {"name": "gpu"}
    _same({"apiVersion": V1BETA1, "kind": "DeviceClass", "metadata": meta, "spec": spec},
          {"apiVersion": V1, "kind": "DeviceClass", "metadata": meta, "spec": spec})


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (_slice([{"name": "d0", "attributes": {"m": {"int": 1}}}], V1BETA1),
         'ResourceSlice in version "v1beta1" cannot be handled as a ResourceSlice: strict decoding error: unknown '
         'field "spec.devices[0].attributes" (resource.k8s.io/v1\'s shape: set apiVersion resource.k8s.io/v1, or put '
         "it under `basic`)"),
        (_slice([{"name": "d0", "basic": {"attributes": {"m": {"int": 1}}}}], V1),
         'ResourceSlice in version "v1" cannot be handled as a ResourceSlice: strict decoding error: unknown field '
         '"spec.devices[0].basic" (resource.k8s.io/v1beta1\'s shape: set apiVersion resource.k8s.io/v1beta1, or move '
         "its fields up onto the device)"),
        (_claim([{"name": "g", "exactly": {"deviceClassName": "x"}}], V1BETA1, "ResourceClaimTemplate"),
         'ResourceClaimTemplate in version "v1beta1" cannot be handled as a ResourceClaimTemplate: strict decoding '
         'error: unknown field "spec.spec.devices.requests[0].exactly" (resource.k8s.io/v1\'s shape: set apiVersion '
         "resource.k8s.io/v1, or move its fields up onto the request)"),
        (_claim([{"name": "g", "deviceClassName": "x"}], V1BETA2),
         'ResourceClaim in version "v1beta2" cannot be handled as a ResourceClaim: strict decoding error: unknown '
         'field "spec.devices.requests[0].deviceClassName" (resource.k8s.io/v1beta1\'s shape: set apiVersion '
         "resource.k8s.io/v1beta1, or put it under `exactly`)"),
    ],
)
def test_a_field_of_the_other_shape_is_refused_as_strict_decoding_refuses_it(obj: dict[str, Any],
                                                                             expected: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        dra_object_from_dict(obj, "in.yaml")
    assert str(err.value) == f"in.yaml: {expected}"


def test_v1alpha3_is_refused_with_the_versions_read() -> None:
    with pytest.raises(InvalidInputError) as err:
        dra_object_from_dict(_slice([], "resource.k8s.io/v1alpha3"), "in.yaml")
    assert str(err.value) == (
        "in.yaml: ResourceSlice: apiVersion 'resource.k8s.io/v1alpha3' is not read; expected resource.k8s.io/v1, "
        "resource.k8s.io/v1beta2 or resource.k8s.io/v1beta1 (fetch it with `kubectl get ... -o yaml` from a 1.32+ "
        "cluster)")
