"""One verdict vocabulary (issue 28): `aligned`, `NOT aligned`, `unknown` and `nothing pinned` head the
text, are the JSON's `verdict` and head the report's line, for the kubelet's alignment and the DRA
devices' alike (report/verdict.py). Each verdict from a real input: NVIDIA's quickstart and a
Guaranteed GPU pod on a DGX H100 (tests/data/real-inputs/README.md), and the issue's four-GPU example."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from numalign.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "data"
NV = DATA / "real-inputs" / "dra"
DGX = str(NV / "dgx-h100-machine.yaml")
NO_PCI = "2s x 1n x 56c x 2t, 1Ti/node"  # the same CPUs without the PCI devices: GPUs' NUMA node unknown
SCHEMA = json.loads((DATA.parent.parent / "docs" / "schemas" / "admit.schema.json").read_text())
GPU = [str(NV / "deviceclass-gpu.nvidia.com.yaml"), str(NV / "dgx-h100-resourceslice.yaml")]

CASES = {
    # name: (inputs, machine, the pod, kubelet verdict, DRA verdict, the report's verdict)
    "aligned": ([*GPU, str(NV / "gpu2-guaranteed.yaml")], DGX, "gpu-test1/trainer", "aligned", "aligned",
                "aligned"),
    "unknown": ([*GPU, str(NV / "gpu2-guaranteed.yaml")], NO_PCI, "gpu-test1/trainer", "aligned", "unknown",
                "unknown"),
    "nothing pinned": ([*GPU, str(NV / "nv-v1-gpu-test1.yaml")], DGX, "gpu-test1/pod1", "nothing pinned",
                       "nothing pinned", "nothing pinned"),
    "NOT aligned": ([str(DATA / "dra" / "four-gpus.yaml")], "", "default/trainer", "aligned", "NOT aligned",
                    "NOT aligned"),
}


def _admit(capsys: pytest.CaptureFixture[str], files: list[str], machine: str, *extra: str) -> str:
    capsys.readouterr()
    main(["admit", *files, *(["--machine", machine] if machine else []), *extra])
    return capsys.readouterr().out


@pytest.mark.parametrize("case", list(CASES))
def test_text_json_and_report_say_the_same_verdict(case: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    files, machine, pod, kubelet, dra, joined = CASES[case]
    text = _admit(capsys, files, machine)
    block = text[text.index(f"pod {pod}: admitted"):].split("\n\n")[0]
    assert f"\n  alignment: {kubelet}: " in block
    assert f"\n  dra alignment: {dra}: " in block

    doc: dict[str, Any] = json.loads(_admit(capsys, files, machine, "-o", "json"))
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    record = next(p for p in doc["pods"] if p["pod"] == pod)
    assert (record["alignment"]["verdict"], record["alignment"]["aligned"]) == (kubelet, kubelet == "aligned")
    assert record["alignment"]["summary"].startswith(f"{kubelet}: ")
    assert (record["dra"]["alignment"]["verdict"], record["dra"]["alignment"]["aligned"]) == (dra, dra == "aligned")
    assert record["dra"]["alignment"]["summary"].startswith(f"{dra}: ")
    assert {c["verdict"] for c in record["dra"]["alignment"]["containers"]} == {dra}

    report = tmp_path / "r.html"
    _admit(capsys, files, machine, "--report", str(report))
    item = re.search(rf'<li class="(\w+)" data-pod="{re.escape(pod)}">(.*?)</li>', report.read_text())
    assert item is not None
    assert item.group(1) == ("misaligned" if joined == "NOT aligned" else "aligned")  # marked only then
    assert re.sub(r"^(&#9888; )?<b>[^<]*</b>: ", "", item.group(2)).startswith(
        f"{joined}: kubelet: {kubelet}: ")
    assert f"; DRA ({record['dra']['alignment']['devices'][0]['claim']}): {dra}: " in item.group(2)
