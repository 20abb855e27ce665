"""`numalign simulate -o json|yaml` validates against its published schema (docs/schemas/simulate.schema.json):
schemaVersion 2, the summary first, one key style (camelCase), pools nested as `capacity` nests them, and
the figures the text table shows."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from support.schemas import snake_keys, validate

from numalign.cli.main import main

# maps whose keys are data: reasons, resources, pools, versions, previews, options, NUMA ids
DATA_MAPS = frozenset({"kubeletRejections", "unschedulableReasons", "resources", "numaOccupancy", "kubeletVersions",
                       "previews", "topologyManagerPolicyOptions", "cpuManagerPolicyOptions", "numaNodes",
                       "unschedulable"})


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["simulate", *args]) == 0
    out = capsys.readouterr().out
    doc: dict[str, Any] = yaml.safe_load(out) if "yaml" in args else json.loads(out)
    validate("simulate", doc)
    return doc


@pytest.mark.parametrize("args", [
    ("--scheduler", "default", "--scheduler", "exact", "-o", "json"),
    ("--scheduler", "exact", "--policy", "restricted", "--policy", "single-numa-node", "--cpu-manager-policy-options",
     "full-pcpus-only=true", "-o", "yaml"),
], ids=["json", "yaml-sweep"])
def test_the_document_validates_summary_first_in_one_key_style(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    doc = simulate(capsys, *args)
    assert list(doc)[:2] == ["schemaVersion", "summary"] and doc["schemaVersion"] == 2
    assert snake_keys(doc, data_maps=DATA_MAPS) == []
    assert [s["label"] for s in doc["summary"]["runs"]] == [r["config"]["label"] for r in doc["runs"]]
    for line, run in zip(doc["summary"]["runs"], doc["runs"], strict=True):
        assert (line["placed"], line["unschedulable"], line["failed"], line["kubeletRejections"]) == (
            run["placed"], run["unschedulable"], run["failed"], sum(run["kubeletRejections"].values()))
        assert line["guaranteedOnOneNumaNode"] == run["alignment"]["share"]
        assert run["pods"] == run["placed"] + run["unschedulable"] + run["failed"] + run["deleted"]
    pool = doc["pools"][0]
    assert pool["kubeletConfig"]["topologyManagerPolicy"] == "single-numa-node" and "topologyManagerPolicy" not in pool


def test_the_document_reads_back_into_the_same_result(capsys: pytest.CaptureFixture[str]) -> None:
    from numalign.cluster.result import SimulationResult

    doc = simulate(capsys, "--scheduler", "nrt", "-o", "json")
    assert SimulationResult.from_dict(doc).to_dict() == doc
