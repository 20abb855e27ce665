"""`numalign admit` says why a pod's claims cannot be allocated (issue 28): in text, with --details, in
JSON and in the --report page. The case is real: NVIDIA's driver publishes no
resource.kubernetes.io/numaNode on its GPUs (only pciBusID and pcieRoot), so a claim matching GPUs and
dra.cpu CPUs on that attribute cannot be allocated, whatever the counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from numalign.cli.main import main

NV = Path(__file__).resolve().parents[1] / "data" / "real-inputs" / "dra"
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "admit.schema.json").read_text())
WHY = ("claim default/gpus-and-cpus, matchAttribute resource.kubernetes.io/numaNode (constraint #0 over gpus, "
       "cpus): missing on gpu.nvidia.com/dgx-h100-01: gpu-0, gpu-1, gpu-2, gpu-3 and 4 more; no value is on enough "
       "usable devices (gpus needs 2, cpus needs 16): 0: gpus 0, cpus 110; 1: gpus 0, cpus 112")


def _admit(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    main(["admit", *(str(NV / f) for f in ("deviceclass-gpu.nvidia.com.yaml", "deviceclass-dra.cpu.yaml",
                                                 "dgx-h100-resourceslice.yaml", "gpu-plus-cpu-claim.yaml")),
                 "--machine", str(NV / "dgx-h100-machine.yaml"), "--dra-driver", "cpu", *extra])
    return capsys.readouterr().out


def test_text_names_the_constraint_and_the_devices_without_the_attribute(capsys: pytest.CaptureFixture[str]) -> None:
    out = _admit(capsys)
    verdict = next(i for i, line in enumerate(out.splitlines()) if line.startswith("pod default/aligned-trainer"))
    lines = out.splitlines()
    assert lines[verdict].endswith("ResourceClaim default/gpus-and-cpus: cannot allocate all claims")
    assert lines[verdict + 1].startswith(f"  why: {WHY[:120]}")
    assert "dra details" not in out


def test_details_give_every_request_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    out = _admit(capsys, "--details").splitlines()
    assert f"  why: {WHY}" in out
    assert [line for line in out if line.startswith("  dra details: ")] == [
        "  dra details: claim default/gpus-and-cpus, request gpus (class gpu.nvidia.com): needs 2: 230 on the node, "
        "class gpu.nvidia.com selector #0 matched 8, 8 usable",
        "  dra details: claim default/gpus-and-cpus, request cpus (class dra.cpu): needs 16: 230 on the node, class "
        "dra.cpu selector #0 matched 222, 222 usable"]


def test_json_carries_the_explanation_in_camel_case(capsys: pytest.CaptureFixture[str]) -> None:
    doc: dict[str, Any] = json.loads(_admit(capsys, "-o", "json"))
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    dra = doc["pods"][0]["dra"]
    assert (dra["schedulable"], dra["message"]) == (False, "cannot allocate all claims")
    why = dra["explanation"]
    assert why["reasons"] == [WHY]
    assert why["node"] == "dgx-h100-01"
    assert [(r["request"], r["need"], r["usable"], r["satisfied"]) for r in why["requests"]] == [
        ("gpus", 2, 8, True), ("cpus", 16, 222, True)]
    constraint = why["constraints"][0]
    assert (constraint["kind"], constraint["satisfied"], len(constraint["missingOn"])) == ("matchAttribute", False, 8)
    assert constraint["values"] == [{"value": "0", "devices": {"gpus": 0, "cpus": 110}},
                                    {"value": "1", "devices": {"gpus": 0, "cpus": 112}}]


def test_the_report_lists_the_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.html"
    _admit(capsys, "--report", str(report))
    html = report.read_text()
    assert "<li>why: claim default/gpus-and-cpus, matchAttribute resource.kubernetes.io/numaNode" in html
    assert "request cpus (class dra.cpu): needs 16: 230 on the node" in html


CLUSTER = Path(__file__).resolve().parents[1] / "data" / "dra" / "cluster"
SIMULATE_WHY = {
    "claim gpus (template default/two-gpus), request gpus: needs 2 device(s), 0 usable: 8 on the node, class h100 "
    "selector #0 matched 8, 8 held by other claims (on 3 node(s) of pool gpu)": 4,
    "claim gpus (template default/two-gpus), request gpus: no device on the node to try (no ResourceSlice for this "
    "node publishes one) (on 2 node(s) of pool cpu)": 4}


def test_simulate_says_why_in_text_json_and_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--cluster", str(CLUSTER / "cluster.yaml"), str(CLUSTER / "workload.yaml"),
            "--scheduler", "default"]
    capsys.readouterr()
    main([*args, "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    dra = doc["runs"][0]["dra"]
    assert dra["unschedulable"] == {"cannot allocate all claims": 4}  # the scheduler's reason, as before
    assert dra["why"] == SIMULATE_WHY
    report = tmp_path / "r.html"
    main([*args, "--report", str(report)])
    text = capsys.readouterr().out.splitlines()
    at = text.index("    4 pod(s): cannot allocate all claims")
    assert text[at + 1:at + 3] == [f"      why (DRA), {n} pod(s): {why}" for why, n in SIMULATE_WHY.items()]
    assert "why, 4 pod(s): claim gpus (template default/two-gpus), request gpus: needs 2 device(s)" in \
        report.read_text()


def test_the_summary_names_pods_of_different_claims_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two workloads of the same requests whose claims come from different templates are unschedulable for
    different reasons: the summary does not fold the second into the first as "more of its shape"."""
    def template(name: str, request: dict[str, Any]) -> str:
        return json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                           "metadata": {"namespace": "ml", "name": name},
                           "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}}})

    def pod(name: str, template_name: str) -> str:
        container = {"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}
        return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml", "name": name},
                           "spec": {"containers": [container],
                                    "resourceClaims": [{"name": "g", "resourceClaimTemplateName": template_name}]}})

    pods = tmp_path / "pods.yaml"
    pods.write_text("\n---\n".join([
        template("nine", {"deviceClassName": "gpu.nvidia.com", "count": 9}),
        template("a100", {"deviceClassName": "gpu.nvidia.com",
                          "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName"
                                                               ".startsWith('NVIDIA A100')"}}]}),
        *(pod(f"big-{i}", "nine") for i in range(2)), *(pod(f"a100-{i}", "a100") for i in range(2))]))
    capsys.readouterr()
    main(["admit", str(NV / "deviceclass-gpu.nvidia.com.yaml"), str(NV / "dgx-h100-resourceslice.yaml"), str(pods),
          "--machine", str(NV / "dgx-h100-machine.yaml")])
    summary = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  Unschedulable:"))
    assert summary == "  Unschedulable: 4 pods (ml/big-0 and 1 more of its shape, ml/a100-0 and 1 more of its shape)"
