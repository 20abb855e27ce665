"""Reading DRA objects beside pods, as `kubectl apply -f` and `kubectl get -o json` give them, and the API
server's refusals in one line naming the file, the document and the object."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.dra.documents import pods_and_dra_from_yaml
from numalign.k8s.dra.podclaims import claims_for_pod
from numalign.k8s.dra.read import checked_as
from numalign.k8s.dra.types import ATTRIBUTE_NUMA_NODE, DeviceAttribute, DRAObjects
from numalign.k8s.manifest import pods_from_yaml
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "dra" / "four-gpus.yaml"

SLICE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
    "spec": {"driver": "gpu.example.com", "nodeName": "n", "pool": {"name": "p", "resourceSliceCount": 1},
             "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "h100"}}, "capacity": {}}]},
}


def _read(*objects: object) -> tuple[list[Pod], DRAObjects]:
    return pods_and_dra_from_yaml("\n---\n".join(json.dumps(o) for o in objects), "in.yaml")


def test_the_example_reads_slices_classes_claims_and_the_pod_from_one_file() -> None:
    pods, objects = pods_and_dra_from_yaml(EXAMPLE.read_text(), str(EXAMPLE))
    assert [p.name for p in pods] == ["trainer"]
    assert pods[0].resource_claims[0].resource_claim_name == "two-gpus"
    assert pods[0].containers[0].claims[0].name == "gpus"
    assert list(objects.classes) == ["h100"]
    assert list(objects.claims) == ["default/two-gpus"]
    gpus = objects.slices[0].devices
    assert [d.name for d in gpus] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert gpus[3].attributes[ATTRIBUTE_NUMA_NODE] == DeviceAttribute("int", (3,))
    assert gpus[3].capacity["memory"].value == Quantity.parse("40Gi")
    claim = objects.claims["default/two-gpus"]
    assert claim.spec.requests[0].exactly is not None
    assert claim.spec.requests[0].exactly.count == 2
    assert claim.spec.constraints[0].match_attribute == ATTRIBUTE_NUMA_NODE


def test_a_kubectl_get_list_dump_mixes_kinds() -> None:
    dump = {"apiVersion": "v1", "kind": "List", "items": [
        SLICE,
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ml"},
         "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu",
                                                                      "allocationMode": "All"}}]}},
         "status": {"allocation": {"devices": {"results": [
             {"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0"}]}}}},
    ]}
    pods, objects = pods_and_dra_from_yaml(json.dumps(dump), "dump.json")
    assert pods == []
    claim = objects.claims["ml/c"]
    assert claim.allocation is not None
    assert claim.allocation.results[0].device_id == ("gpu.example.com", "p", "gpu-0")
    assert claim.spec.requests[0].exactly is not None
    assert claim.spec.requests[0].exactly.allocation_mode == "All"


def test_list_type_attributes_read_as_lists() -> None:
    slice_ = json.loads(json.dumps(SLICE))
    slice_["spec"]["devices"][0]["attributes"] = {"resource.kubernetes.io/pcieRoot": {"strings": ["pci0", "pci1"]}}
    _, objects = _read(slice_)
    attr = objects.slices[0].devices[0].attributes["resource.kubernetes.io/pcieRoot"]
    assert attr.is_list and attr.values == ("pci0", "pci1")


def test_without_dra_reading_other_kinds_are_still_skipped_with_a_note() -> None:
    skipped: list[str] = []
    assert pods_from_yaml(json.dumps(SLICE), "in.yaml", skipped=skipped) == []
    assert skipped == ["in.yaml: document 1: ResourceSlice s skipped (no pod template)"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s["spec"]["devices"].append({"name": "gpu-0"}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[1].name: Duplicate value: '
         '"gpu-0"'),
        (lambda s: s["spec"].pop("nodeName"),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec: Invalid value: exactly one of '
         "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"),
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"x": {"int": 1, "string": "a"}}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[0].attributes[x]: '
         "Invalid value: exactly one value must be specified"),
        (lambda s: s["spec"]["pool"].pop("resourceSliceCount"),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.pool.resourceSliceCount: '
         "Required value"),
        # A version attribute is a semantic version (the API server's semverRe); numalign read any string
        # and a selector comparing it failed later with a CEL overload error.
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"driverVersion": {"version": "v535"}}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[0].attributes[driverVersion]'
         '.version: Invalid value: "v535": must be a string compatible with semver.org spec 2.0.0'),
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"cuda-version": {"int": 12}}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[0].attributes[cuda-version]'
         ': Invalid value: "cuda-version": a valid C identifier must start with alphabetic character or \'_\', '
         "followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', "
         "regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')"),
        (lambda s: s["spec"]["devices"][0]["capacity"].update({"a/b/c": {"value": "1"}}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[0].capacity[a/b/c]: '
         'Invalid value: "a/b/c": must be either a C identifier or a domain followed by a slash and a C identifier'),
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"Example_COM/x": {"int": 1}}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[0].attributes[Example_COM/x]'
         ': Invalid value: "Example_COM": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
         "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
         "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"x" * 33: {"int": 1}}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[0].attributes['
         + "x" * 33 + "]: Too long: may not be more than 32 bytes"),
    ],
)
def test_bad_slices_are_refused_as_the_api_server_does(change: object, expected: str) -> None:
    slice_ = json.loads(json.dumps(SLICE))
    change(slice_)  # type: ignore[operator]
    with pytest.raises(InvalidInputError) as err:
        _read(slice_)
    assert str(err.value) == expected


def _class(expression: str) -> dict[str, object]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def test_a_selector_that_does_not_compile_is_refused_with_the_compilers_text() -> None:
    with pytest.raises(InvalidInputError) as err:
        _read(_class('device.driver == "a" &&'))
    assert str(err.value) == (
        'in.yaml: document 1: DeviceClass.resource.k8s.io "gpu" is invalid: spec.selectors[0].cel.expression: '
        "Invalid value: \"device.driver == \\\"a\\\" &&\": compilation failed: ERROR: <input>:1:24: Syntax error: "
        "mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, "
        "NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
    )
    assert "\n" not in str(err.value)


def test_an_undeclared_reference_is_a_compile_error() -> None:
    with pytest.raises(InvalidInputError, match=r"compilation failed: ERROR: <input>:1:1: undeclared reference to "
                                                r"'gpu' \(in container ''\)"):
        _read(_class('gpu.model == "a"'))


def test_a_selector_over_the_cost_limit_is_forbidden() -> None:
    deep = "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, device.attributes.all(d, " \
           "a == b))))"
    with pytest.raises(InvalidInputError) as err:
        _read(_class(deep))
    assert str(err.value) == ('in.yaml: document 1: DeviceClass.resource.k8s.io "gpu" is invalid: '
                              "spec.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit")


def _claim(devices: dict[str, object], name: str = "c") -> dict[str, object]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": devices}}


@pytest.mark.parametrize(
    ("devices", "expected"),
    [
        ({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 0}}]},
         "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero"),
        ({"requests": [{"name": "r"}]},
         "spec.devices.requests[0]: Invalid value: exactly one of `exactly` or `firstAvailable` is required"),
        ({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"}}]},
         'spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some": supported values: "All", '
         '"ExactCount"'),
        ({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}],
          "constraints": [{"requests": ["x"], "matchAttribute": "a/b"}]},
         "spec.devices.constraints[0].requests[0]: Invalid value: \"x\": must be the name of a request in the claim "
         "or the name of a request and a subrequest separated by '/'"),
        ({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}],
          "constraints": [{"matchAttribute": "numaNode"}]},
         'spec.devices.constraints[0].matchAttribute: Invalid value: "numaNode": a fully qualified name must be a '
         "domain and a name separated by a slash"),
    ],
)
def test_bad_claims_are_refused(devices: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        _read(_claim(devices))
    assert str(err.value) == f'in.yaml: document 1: ResourceClaim.resource.k8s.io "c" is invalid: {expected}'


def test_defaults_exact_count_of_one() -> None:
    _, objects = _read(_claim({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}))
    request = objects.claims["default/c"].spec.requests[0].exactly
    assert request is not None
    assert (request.allocation_mode, request.count) == ("ExactCount", 1)


def test_older_api_versions_are_refused_with_the_fix() -> None:
    old = dict(SLICE, apiVersion="resource.k8s.io/v1alpha3")
    with pytest.raises(InvalidInputError, match=re.escape("apiVersion 'resource.k8s.io/v1alpha3' is not read; expected "
                                                          "resource.k8s.io/v1, resource.k8s.io/v1beta2 or "
                                                          "resource.k8s.io/v1beta1")):
        _read(old)


def test_v1beta1_request_fields_in_a_v1_claim_are_an_unknown_field() -> None:
    with pytest.raises(InvalidInputError) as err:
        _read(_claim({"requests": [{"name": "r", "deviceClassName": "gpu"}]}))
    assert str(err.value).startswith('in.yaml: document 1: ResourceClaim in version "v1" cannot be handled as a '
                                     'ResourceClaim: strict decoding error: unknown field '
                                     '"spec.devices.requests[0].deviceClassName"')


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
       "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}}


def test_a_template_claim_is_made_for_the_pod() -> None:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "ml"},
                "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}}
    pods, objects = _read(POD, template)
    claims = claims_for_pod(pods[0], objects)
    assert [c.key for c in claims] == ["ml/p-gpu"]
    assert claims[0].spec == objects.templates["ml/t"].spec


def test_a_missing_claim_names_the_pod_and_the_claim() -> None:
    pod = json.loads(json.dumps(POD))
    pod["spec"]["resourceClaims"][0] = {"name": "gpu", "resourceClaimName": "absent"}
    pods, objects = _read(pod)
    expected = "in.yaml: document 1: pod ml/p: resourceclaim 'absent' not found"
    with pytest.raises(InvalidInputError, match=re.escape(expected)):
        claims_for_pod(pods[0], objects)


def test_a_container_claim_must_name_a_pod_claim() -> None:
    pod = json.loads(json.dumps(POD))
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "other"}]
    with pytest.raises(InvalidInputError, match=r"resources.claims: Unsupported value: 'other': must be one of the "
                                                r"names in pod.spec.resourceClaims \(gpu\)"):
        _read(pod)


def test_a_pod_claim_names_exactly_one_source() -> None:
    pod = json.loads(json.dumps(POD))
    pod["spec"]["resourceClaims"][0]["resourceClaimName"] = "x"
    with pytest.raises(InvalidInputError, match="must specify one of: `resourceClaimName`, "
                                                "`resourceClaimTemplateName`"):
        _read(pod)


def test_attribute_and_capacity_names_the_api_server_takes_are_read() -> None:
    slice_ = json.loads(json.dumps(SLICE))
    slice_["spec"]["devices"][0]["attributes"].update({
        "example.com/MY_NAME": {"int": 1}, "_x9": {"bool": True}, "driverVersion": {"version": "1.2.3-rc.1+b.7"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}})
    slice_["spec"]["devices"][0]["capacity"] = {"memory": {"value": "8Gi"}, "gpu.example.com/cores": {"value": "4"}}
    _, objects = _read(slice_)
    device = objects.slices[0].devices[0]
    assert device.attributes["driverVersion"] == DeviceAttribute("version", ("1.2.3-rc.1+b.7",))
    assert set(device.capacity) == {"memory", "gpu.example.com/cores"}


def test_a_read_device_and_its_attributes_have_every_field_as_if_built_by_their_constructors() -> None:
    """The reader builds devices and attributes positionally (their __init__ is written out, k8s/dra/types.py):
    every field must hold what the constructor given it by name holds."""
    from dataclasses import fields

    from numalign.k8s.dra.types import Device

    _, objects = _read(SLICE)
    device = objects.slices[0].devices[0]
    by_name = {f.name: getattr(device, f.name) for f in fields(Device)}
    assert device == Device(**by_name) and hash(device.attributes["model"]) == hash(
        DeviceAttribute("string", ("h100",)))
    assert by_name["name"] == "gpu-0" and by_name["consumes_counters"] == () and by_name["all_nodes"] is False
    attribute = device.attributes["model"]
    assert (attribute.kind, attribute.values, attribute.is_list) == ("string", ("h100",), False)
    assert attribute == DeviceAttribute("string", ("h100",))


# Found by review: a taint effect the API server does not know and misspelled fields were read silently
# (a device tainted `Bogus` was then neither tolerated nor kept off; a `colour` field vanished).
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s["spec"]["devices"][0].update({"taints": [{"key": "k", "effect": "Bogus"}]}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[0].taints[0].effect: '
         'Unsupported value: "Bogus": supported values: "NoExecute", "NoSchedule", "None" '
         "(set one of them; None came with 1.35)"),
        (lambda s: s["spec"]["devices"][0].update({"taints": [{"key": "k"}]}),
         'in.yaml: document 1: ResourceSlice.resource.k8s.io "s" is invalid: spec.devices[0].taints[0].effect: '
         "Required value"),
        (lambda s: s["spec"]["devices"][0].update({"colour": "red"}),
         'in.yaml: document 1: ResourceSlice in version "v1" cannot be handled as a ResourceSlice: strict decoding '
         'error: unknown field "spec.devices[0].colour" (remove it or correct its spelling; expected one of '
         "allNodes, allowMultipleAllocations, attributes, bindingConditions, bindingFailureConditions, bindsToNode, "
         "capacity, consumesCounters, name, nodeAllocatableResourceMappings, nodeAllocatableResources, nodeName, "
         "nodeSelector, taints)"),
        (lambda s: s["spec"].update({"nodename": "n"}),
         'in.yaml: document 1: ResourceSlice in version "v1" cannot be handled as a ResourceSlice: strict decoding '
         'error: unknown field "spec.nodename" (remove it or correct its spelling; expected one of allNodes, devices, '
         "driver, nodeName, nodeSelector, partitionTypeAttribute, perDeviceNodeSelection, pool, sharedCounters, "
         "skipNodeOperations)"),
        (lambda s: s.update({"status": {}}),
         'in.yaml: document 1: ResourceSlice in version "v1" cannot be handled as a ResourceSlice: strict decoding '
         'error: unknown field "status" (remove it or correct its spelling; expected one of apiVersion, kind, '
         "metadata, spec)"),
        (lambda s: s["spec"]["devices"][0]["capacity"].update({"memory": {"value": "1Gi", "vaule": "2Gi"}}),
         'in.yaml: document 1: ResourceSlice in version "v1" cannot be handled as a ResourceSlice: strict decoding '
         'error: unknown field "spec.devices[0].capacity[memory].vaule" (remove it or correct its spelling; '
         "expected one of requestPolicy, value)"),
        (lambda s: s["spec"]["pool"].update({"generations": 1}),
         'in.yaml: document 1: ResourceSlice in version "v1" cannot be handled as a ResourceSlice: strict decoding '
         'error: unknown field "spec.pool.generations" (remove it or correct its spelling; expected one of '
         "generation, name, resourceSliceCount)"),
    ],
)
def test_slices_with_unknown_effects_or_fields_are_refused(change: object, expected: str) -> None:
    slice_ = json.loads(json.dumps(SLICE))
    change(slice_)  # type: ignore[operator]
    with pytest.raises(InvalidInputError) as err:
        _read(slice_)
    assert str(err.value) == expected


def test_a_v1beta1_basic_field_misspelled_is_named_under_basic() -> None:
    slice_ = {**SLICE, "apiVersion": "resource.k8s.io/v1beta1", "spec": {
        **SLICE["spec"], "devices": [{"name": "gpu-0", "basic": {"atributes": {}}}]}}  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match=r'unknown field "spec\.devices\[0\]\.basic\.atributes"'):
        _read(slice_)


def test_every_effect_the_api_server_takes_is_read_and_none_only_from_1_35() -> None:
    for effect in ("NoSchedule", "NoExecute", "None"):
        slice_ = json.loads(json.dumps(SLICE))
        slice_["spec"]["devices"][0]["taints"] = [{"key": "k", "value": "v", "effect": effect,
                                                  "timeAdded": "2026-01-01T00:00:00Z"}]
        _, objects = _read(slice_)
        assert objects.slices[0].devices[0].taints[0].effect == effect
    slice_["spec"]["devices"][0]["taints"][0]["effect"] = "None"
    with checked_as(34), pytest.raises(InvalidInputError, match='supported values: "NoExecute", "NoSchedule" '):
        _read(slice_)


def test_a_negative_capacity_is_read_as_the_api_server_stores_it() -> None:
    # The API server does not validate a capacity's value (validation.go checks only its requestPolicy
    # against it, 1.34-1.37), so kubectl apply stores -1: refusing it would refuse a real slice.
    slice_ = json.loads(json.dumps(SLICE))
    slice_["spec"]["devices"][0]["capacity"] = {"memory": {"value": "-1"}}
    _, objects = _read(slice_)
    assert objects.slices[0].devices[0].capacity["memory"].value == Quantity.parse("-1")


CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": "true"}}],
                  "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"anything": 1}}}]}}
CLAIM_SPEC = {"devices": {
    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
                                             "tolerations": [{"key": "k", "operator": "Exists"}]}},
                 {"name": "any", "firstAvailable": [{"name": "one", "deviceClassName": "gpu"}]}],
    "constraints": [{"requests": ["gpu"], "matchAttribute": "gpu.example.com/model"}],
    "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {}}}]}}


def _in_version(obj: Mapping[str, object], version: str) -> dict[str, Any]:
    """The object as a user writes it in `version`: v1beta1's requests are flat (no `exactly`)."""
    out: dict[str, Any] = json.loads(json.dumps(obj))
    out["apiVersion"] = f"resource.k8s.io/{version}"
    if version == "v1beta1":
        spec = out["spec"]
        devices = (spec["spec"] if out["kind"] == "ResourceClaimTemplate" else spec).get("devices")
        for r in (devices or {}).get("requests", []):
            r.update(r.pop("exactly", {}))
    return out


CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": CLAIM_SPEC,
         "status": {"allocation": {"devices": {"results": []}, "allocationTimestamp": "2026-01-01T00:00:00Z"},
                    "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
            "spec": {"metadata": {"labels": {"a": "b"}}, "spec": CLAIM_SPEC}}


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_classes_claims_and_templates_with_every_known_field_are_read(version: str) -> None:
    _, objects = _read(*(_in_version(o, version) for o in (CLASS, CLAIM, TEMPLATE)))
    assert (list(objects.classes), list(objects.claims), list(objects.templates)) == (
        ["gpu"], ["default/c"], ["default/t"])
    assert [r.name for r in objects.claims["default/c"].spec.requests] == ["gpu", "any"]


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
@pytest.mark.parametrize(("obj", "change", "field", "known"), [
    (CLASS, lambda o, v: o["spec"].update({"selector": []}), "spec.selector",
     "config, extendedResourceName, selectors"),
    (CLASS, lambda o, v: o["spec"]["selectors"][0]["cel"].update({"expresion": "true"}),
     "spec.selectors[0].cel.expresion", "expression"),
    (CLASS, lambda o, v: o["spec"]["config"][0]["opaque"].update({"drivr": "x"}), "spec.config[0].opaque.drivr",
     "driver, parameters"),
    (CLAIM, lambda o, v: o.update({"statuss": {}}), "statuss", "apiVersion, kind, metadata, spec, status"),
    (CLAIM, lambda o, v: o["spec"]["devices"]["constraints"][0].update({"matchAttributes": "x"}),
     "spec.devices.constraints[0].matchAttributes", "distinctAttribute, matchAttribute, requests"),
    (CLAIM, lambda o, v: o["spec"]["devices"]["requests"][1]["firstAvailable"][0].update({"adminAccess": True}),
     "spec.devices.requests[1].firstAvailable[0].adminAccess",
     "allocationMode, capacity, count, derivedAttributes, deviceClassName, name, selectors, tolerations"),
    (TEMPLATE, lambda o, v: o["spec"]["spec"]["devices"]["requests"][0].update({"colour": "red"}),
     "spec.spec.devices.requests[0].colour", "exactly, firstAvailable, name"),
    (TEMPLATE, lambda o, v: o["spec"]["spec"].update({"device": {}}), "spec.spec.device", "devices"),
])
def test_unknown_fields_in_classes_claims_and_templates_are_refused_in_every_version(
        version: str, obj: Mapping[str, object], change: object, field: str, known: str) -> None:
    written = _in_version(obj, version)
    change(written, version)  # type: ignore[operator]
    kind = written["kind"]
    if version == "v1beta1" and known == "exactly, firstAvailable, name":  # v1beta1's flat request
        known = ("adminAccess, allocationMode, capacity, count, derivedAttributes, deviceClassName, firstAvailable, "
                 "name, selectors, tolerations")
    with pytest.raises(InvalidInputError) as err:
        _read(written)
    assert str(err.value) == (
        f'in.yaml: document 1: {kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: '
        f'unknown field "{field}" (remove it or correct its spelling; expected one of {known})')


def test_a_v1beta1_request_misspelled_is_named_where_it_was_written() -> None:
    claim = _in_version(CLAIM, "v1beta1")
    claim["spec"]["devices"]["requests"][0]["tolerations"][0]["efect"] = "NoSchedule"
    with pytest.raises(InvalidInputError, match=r'in version "v1beta1" .* unknown field '
                                                r'"spec\.devices\.requests\[0\]\.tolerations\[0\]\.efect"'):
        _read(claim)


_NAME_IN = {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
_INVALID = 'in.yaml: document 1: ResourceClaim.resource.k8s.io "c" is invalid: status.allocation.nodeSelector'


def _allocated(selector: object) -> dict[str, Any]:
    claim = _claim({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]})
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0"}]}, "nodeSelector": selector}}
    return claim


@pytest.mark.parametrize(("selector", "expected"), [
    ({"nodeSelectorTerm": [{"matchFields": [_NAME_IN]}]},
     'in.yaml: document 1: ResourceClaim in version "v1" cannot be handled as a ResourceClaim: strict decoding '
     'error: unknown field "status.allocation.nodeSelector.nodeSelectorTerm" (remove it or correct its '
     'spelling; expected one of nodeSelectorTerms)'),
    ({"nodeSelectorTerms": [{"matchField": [_NAME_IN]}]},
     'in.yaml: document 1: ResourceClaim in version "v1" cannot be handled as a ResourceClaim: strict decoding '
     'error: unknown field "status.allocation.nodeSelector.nodeSelectorTerms[0].matchField" (remove it or '
     'correct its spelling; expected one of matchExpressions, matchFields)'),
    ({"nodeSelectorTerms": []},
     f"{_INVALID}.nodeSelectorTerms: Required value: must have at least one node selector term"),
    ({"nodeSelectorTerms": [{"matchFields": [{**_NAME_IN, "operator": "Foo"}]}]},
     f'{_INVALID}.nodeSelectorTerms[0].matchFields[0].operator: Unsupported value: "Foo": supported values: '
     '"In", "NotIn"'),
    ({"nodeSelectorTerms": [{"matchFields": [{**_NAME_IN, "key": "metadata.uid"}]}]},
     f'{_INVALID}.nodeSelectorTerms[0].matchFields[0].key: Unsupported value: "metadata.uid": supported values: '
     '"metadata.name" (select other nodes by label under matchExpressions)'),
    ({"nodeSelectorTerms": [{"matchFields": [{**_NAME_IN, "values": ["a", "b"]}]}]},
     f"{_INVALID}.nodeSelectorTerms[0].matchFields[0].values: Required value: must be only one value when "
     "`operator` is 'In' or 'NotIn' for node field selector (one term per node name)"),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Within", "values": ["r1"]}]}]},
     f'{_INVALID}.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Within": supported '
     'values: "DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"'),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Exists", "values": ["r1"]}]}]},
     f"{_INVALID}.nodeSelectorTerms[0].matchExpressions[0].values: Forbidden: may not be specified when "
     "`operator` is 'Exists' or 'DoesNotExist' (remove the values)"),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["x"]}]}]},
     f'{_INVALID}.nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "x": must be an integer'),
])
def test_an_allocations_node_selector_the_api_server_refuses_is_refused_not_matched_to_no_node(
        selector: object, expected: str) -> None:
    # read silently, each of these matched no node: `capacity` counted 0 copies, `simulate` placed none
    with pytest.raises(InvalidInputError) as err:
        _read(_allocated(selector))
    assert str(err.value) == expected


def test_a_valid_allocation_node_selector_and_a_slices_are_read() -> None:
    _pods, objects = _read(_allocated({"nodeSelectorTerms": [
        {"matchFields": [_NAME_IN]},
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]},
                              {"key": "gen", "operator": "Gt", "values": ["3"]},
                              {"key": "spare", "operator": "DoesNotExist"}]}]}))
    allocation = objects.claims["default/c"].allocation
    assert allocation is not None and allocation.node_selector is not None
    assert [len(t.match_fields) + len(t.match_expressions) for t in allocation.node_selector.terms] == [1, 3]
    fabric = json.loads(json.dumps(SLICE))
    del fabric["spec"]["nodeName"]
    fabric["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "NotIn", "values": ["r2"]}]}]}
    _pods, objects = _read(fabric)
    assert objects.slices[0].node_selector is not None
    fabric["spec"]["nodeSelector"] = {"nodeSelectorTerms": []}
    with pytest.raises(InvalidInputError, match=r"spec\.nodeSelector\.nodeSelectorTerms: Required value"):
        _read(fabric)
