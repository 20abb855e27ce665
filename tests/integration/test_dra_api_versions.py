"""NVIDIA's DRA quickstart as published (resource.k8s.io/v1beta1 and v1) and the same objects in every
served version give the same devices in `admit` and `simulate` (issue 28): the API server converts
v1beta1 and v1beta2 to v1, and so does numalign's reader (tests/data/real-inputs/README.md names the
sources)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from numalign.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "data"
NV = DATA / "real-inputs" / "dra"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*args, "-o", "json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def _admit_claims(capsys: pytest.CaptureFixture[str], *files: Path) -> dict[str, Any]:
    doc = _run(capsys, "admit", str(NV / "deviceclass-gpu.nvidia.com.yaml"), *map(str, files),
               "--machine", str(NV / "dgx-h100-machine.yaml"))
    return {p["pod"]: p["dra"]["claims"] for p in doc["pods"]}


def _as_v1beta1(obj: dict[str, Any]) -> dict[str, Any]:
    """A v1 object written as v1beta1 (devices under `basic`, request fields flat)."""
    obj = json.loads(json.dumps(obj)) | {"apiVersion": "resource.k8s.io/v1beta1"}
    if obj["kind"] == "ResourceSlice":
        obj["spec"]["devices"] = [{"name": d.pop("name"), "basic": d} for d in obj["spec"]["devices"]]
    if obj["kind"] == "ResourceClaimTemplate":
        for request in obj["spec"]["spec"]["devices"]["requests"]:
            request.update(request.pop("exactly"))
    return obj


def _write(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_nvidias_v1beta1_quickstart_gets_the_devices_of_its_v1_twin(capsys: pytest.CaptureFixture[str]) -> None:
    slices = NV / "dgx-h100-resourceslice.yaml"
    v1 = _admit_claims(capsys, slices, NV / "nv-v1-gpu-test1.yaml")
    assert v1 == {"gpu-test1/pod1": {"gpu-test1/pod1-gpu": ["gpu.nvidia.com/dgx-h100-01/gpu-0"]},
                  "gpu-test1/pod2": {"gpu-test1/pod2-gpu": ["gpu.nvidia.com/dgx-h100-01/gpu-1"]}}
    assert _admit_claims(capsys, slices, NV / "nv-v1beta1-gpu-test1.yaml") == v1


@pytest.mark.parametrize("version", ["resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"])
def test_the_slice_class_and_template_in_each_version(version: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    expected = _admit_claims(capsys, NV / "dgx-h100-resourceslice.yaml", NV / "nv-v1-gpu-test1.yaml")
    docs = [*yaml.safe_load(NV.joinpath("dgx-h100-resourceslice.yaml").read_text())["items"],
            yaml.safe_load(NV.joinpath("deviceclass-gpu.nvidia.com.yaml").read_text()),
            *[d for d in yaml.safe_load_all(NV.joinpath("nv-v1-gpu-test1.yaml").read_text()) if d]]
    converted = [(_as_v1beta1(d) if version.endswith("v1beta1") else d | {"apiVersion": version})
                 if d["apiVersion"].startswith("resource.k8s.io/") else d for d in docs]
    assert _admit_claims(capsys, _write(tmp_path / "all.yaml", converted)) == expected


def test_simulate_reads_a_v1beta1_workload_as_its_v1_twin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = str(DATA / "dra" / "cluster" / "cluster.yaml")
    workload = DATA / "dra" / "cluster" / "workload.yaml"
    v1 = _run(capsys, "simulate", "--cluster", cluster, str(workload), "--scheduler", "exact")["runs"][0]["dra"]
    docs = [_as_v1beta1(d) if d["apiVersion"].startswith("resource.k8s.io/") else d
            for d in yaml.safe_load_all(workload.read_text()) if d]
    assert any(d["apiVersion"] == "resource.k8s.io/v1beta1" for d in docs)
    beta = _run(capsys, "simulate", "--cluster", cluster, str(_write(tmp_path / "w.yaml", docs)),
                "--scheduler", "exact")["runs"][0]["dra"]
    assert beta == v1
    assert (v1["pods"], v1["placed"]) == (16, 12)
