"""DRA names are checked as the API server checks them (DNS subdomains and labels, driver and pool
rules), refused on read in one line with its text."""

from __future__ import annotations

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.dra.documents import pods_and_dra_from_yaml

SLICE = """apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {name}}}
spec:
  driver: {driver}
  nodeName: {node}
  pool: {{name: {pool}, generation: 1, resourceSliceCount: 1}}
  devices: [{{name: {device}}}]
"""
CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  devices:
    requests: [{{name: {request}, exactly: {{deviceClassName: {cls}}}}}]
"""
POD = """apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  resourceClaims: [{{name: {name}, resourceClaimName: {claim}}}]
  containers: [{{name: c, image: x}}]
"""
SUBDOMAIN = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
LABEL = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"
GOOD_SLICE = {"name": "s", "driver": "gpu.example.com", "node": "node-a", "pool": "node-a/gpus", "device": "gpu-0"}
GOOD_CLAIM = {"name": "c", "namespace": "ml", "request": "gpu", "cls": "gpu.example.com"}


def test_valid_names_are_read() -> None:
    _, objects = pods_and_dra_from_yaml(SLICE.format(**GOOD_SLICE) + "---\n" + CLAIM.format(**GOOD_CLAIM), "f.yaml")
    assert len(objects) == 2


@pytest.mark.parametrize(("field", "value", "path", "text"), [
    ("name", "GPUs", "metadata.name", SUBDOMAIN),
    ("driver", "Gpu_Driver", "spec.driver", SUBDOMAIN),
    ("driver", "d" * 64, "spec.driver", "must be no more than 63 characters"),
    ("pool", "node-a/Bad_Part", "spec.pool.name", SUBDOMAIN),
    ("node", "Node_A", "spec.nodeName", SUBDOMAIN),
    ("device", "gpu.0", "spec.devices[0].name", LABEL),
])
def test_a_slice_name_the_api_server_refuses_is_one_line(field: str, value: str, path: str, text: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        pods_and_dra_from_yaml(SLICE.format(**{**GOOD_SLICE, field: value}), "f.yaml")
    line = str(e.value)
    assert "\n" not in line
    assert f'is invalid: {path}: Invalid value: "{value}": {text}' in line, line


@pytest.mark.parametrize(("field", "value", "path", "text"), [
    ("name", "My_Claim", "metadata.name", SUBDOMAIN),
    ("namespace", "ml.team", "metadata.namespace", LABEL),
    ("request", "GPU", "spec.devices.requests[0].name", LABEL),
    ("cls", "Gpu", "spec.devices.requests[0].exactly.deviceClassName", SUBDOMAIN),
])
def test_a_claim_name_the_api_server_refuses_is_one_line(field: str, value: str, path: str, text: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        pods_and_dra_from_yaml(CLAIM.format(**{**GOOD_CLAIM, field: value}), "f.yaml")
    assert f'is invalid: {path}: Invalid value: "{value}": {text}' in str(e.value), str(e.value)


def test_the_label_text_is_upstreams_word_for_word() -> None:
    with pytest.raises(InvalidInputError) as e:
        pods_and_dra_from_yaml(CLAIM.format(**{**GOOD_CLAIM, "request": "A"}), "f.yaml")
    assert str(e.value).endswith(
        "\"A\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
        "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


@pytest.mark.parametrize(("name", "claim", "path", "text"), [
    ("GPU", "c", "spec.resourceClaims[0].name", LABEL),
    ("gpu", "My_Claim", "spec.resourceClaims[0].resourceClaimName", SUBDOMAIN),
])
def test_a_pods_claim_names_are_checked_too(name: str, claim: str, path: str, text: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        pods_and_dra_from_yaml(POD.format(name=name, claim=claim), "f.yaml")
    assert f"{path}: Invalid value: " in str(e.value) and text in str(e.value), str(e.value)
