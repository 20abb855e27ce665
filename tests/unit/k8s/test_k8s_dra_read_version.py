"""DRA selectors are checked on read as the API server of the modelled release checks a new object
(issue 28): `includes` is in the DRA environment from 1.36, so a 1.35 API server refuses a class using it."""

from __future__ import annotations

from pathlib import Path

import pytest

from numalign.cli.main import main
from numalign.errors import InvalidInputError
from numalign.k8s.dra.read import checked_as, dra_object_from_dict
from numalign.k8s.dra.types import DeviceClass

SELECTOR = 'device.attributes["x.example.com"].tags.includes("a")'
CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "tagged"},
         "spec": {"selectors": [{"cel": {"expression": SELECTOR}}]}}


def test_the_release_decides_which_functions_a_selector_may_call() -> None:
    assert isinstance(dra_object_from_dict(CLASS, "f"), DeviceClass)  # the newest release by default
    with checked_as(36):
        assert isinstance(dra_object_from_dict(CLASS, "f"), DeviceClass)
    with checked_as(35), pytest.raises(InvalidInputError) as exc:
        dra_object_from_dict(CLASS, "f")
    assert str(exc.value).startswith('f: DeviceClass.resource.k8s.io "tagged" is invalid: spec.selectors[0].cel.'
                                     "expression: Invalid value: ")
    assert "undeclared reference to 'includes'" in str(exc.value)


def test_admit_checks_selectors_as_its_kubelet_versions_api_server(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(f"""\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: tagged}}
spec:
  selectors:
  - cel: {{expression: '{SELECTOR}'}}
---
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers: [{{name: main, image: x}}]
""")
    assert main(["admit", str(pods), "--kubelet-version", "1.36"]) in (0, 1)
    capsys.readouterr()
    assert main(["admit", str(pods), "--kubelet-version", "1.35"]) == 2
    err = capsys.readouterr().err
    assert "undeclared reference to 'includes'" in err and len(err.strip().splitlines()) == 1
