"""`numalign admit -o json|yaml` validates against its published schema (docs/schemas/admit.schema.json):
the summary first, one key style (Kubernetes API camelCase), identical rejections folded with their count,
and --details keeping every pod whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from numalign.cli.main import main
from numalign.paths import DATA_DIR

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "docs" / "schemas" / "admit.schema.json").read_text())
DRA = Path(__file__).resolve().parents[2] / "data" / "dra"


def admit(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["admit", *args]) == 0
    out = capsys.readouterr().out
    doc: dict[str, Any] = yaml.safe_load(out) if "yaml" in args else json.loads(out)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    return doc


def snake_keys(value: Any, path: str = "") -> list[str]:
    """Field names with an underscore; data keys (resource names such as intel.com/sriov_netdevice) have a
    domain and are left out."""
    if isinstance(value, dict):
        return [f"{path}.{k}" for k in value if "_" in k and "/" not in k] + [
            bad for k, v in value.items() for bad in snake_keys(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [bad for v in value for bad in snake_keys(v, f"{path}[]")]
    return []


def test_the_schema_is_valid() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("args", [
    (),
    ("-o", "yaml"),
    (str(DRA / "claim-and-pod.yaml"), "--machine",
     "2s x 2n x 8c x 2t, 64Gi/node, dra:gpu.example.com=2/node{model=h100;capacity.memory=80Gi}",
     "--reserved-cpus", "0,32"),
    (str(DRA / "four-gpus.yaml"),),
], ids=["example", "yaml", "dra", "dra-misaligned"])
def test_every_document_validates_and_uses_one_key_style(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    doc = admit(capsys, *args, *([] if "yaml" in args else ["-o", "json"]))
    assert list(doc)[:2] == ["schemaVersion", "summary"]
    assert snake_keys(doc) == []
    assert doc["summary"]["pods"] == len(doc["pods"])


def test_identical_rejections_are_folded_with_their_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = list(yaml.safe_load_all((DATA_DIR / "example-pods.yaml").read_text(encoding="utf-8")))
    pods = []
    for i in range(3):
        for d in docs:
            pod = json.loads(json.dumps(d))
            pod["metadata"]["name"] += f"-{i}"
            pod["metadata"].pop("uid", None)
            pods.append(pod)
    f = tmp_path / "pods.yaml"
    f.write_text(yaml.safe_dump_all(pods), encoding="utf-8")
    doc = admit(capsys, str(f), "-o", "json")
    folded = [p for p in doc["pods"] if "sameAs" in p]
    assert folded and all(not p["result"]["admit"] and set(p) == {"pod", "podUID", "result", "sameAs"} for p in folded)
    firsts = {p["pod"]: p for p in doc["pods"] if "identicalRejections" in p}
    for name, first in firsts.items():
        assert first["identicalRejections"] == sum(1 for p in folded if p["sameAs"] == name)
        assert "answer" in first  # the first of its kind keeps its why and would-fit-if
    summary = doc["summary"]
    rejected = len(doc["pods"]) - summary["admitted"]
    assert summary["rejected"] == sum(r["pods"] for r in summary["rejectedBy"]) == rejected
    whole = admit(capsys, str(f), "-o", "json", "--details")
    assert not any("sameAs" in p for p in whole["pods"]) and whole["summary"] == summary
