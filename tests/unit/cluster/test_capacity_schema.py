"""`numalign capacity -o json|yaml` validates against its published schema (docs/schemas/capacity.schema.json):
schemaVersion 1, the summary first, one key style (camelCase), the pools as `simulate` lists them, and the
totals the text's table ends with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.schemas import snake_keys, validate

from numalign.cli.main import main

DATA_MAPS = frozenset({"limitedBy", "why", "previews", "topologyManagerPolicyOptions", "cpuManagerPolicyOptions"})


def capacity(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["capacity", *args]) == 0
    out = capsys.readouterr().out
    doc: dict[str, Any] = yaml.safe_load(out) if "yaml" in args else json.loads(out)
    validate("capacity", doc)
    assert list(doc)[:2] == ["schemaVersion", "summary"] and snake_keys(doc, data_maps=DATA_MAPS) == []
    return doc


def test_one_run_names_its_totals_first(capsys: pytest.CaptureFixture[str]) -> None:
    doc = capacity(capsys, "-o", "json")
    (run,) = doc["runs"]
    assert doc["summary"]["runs"] == [{k: v for k, v in run.items() if k != "byPool"}]
    assert (run["exact"], run["byRequests"]) == (sum(p["exact"] for p in run["byPool"]),
                                                 sum(p["byRequests"] for p in run["byPool"]))
    assert [p["name"] for p in doc["pools"]] == [p["pool"] for p in run["byPool"]]
    assert all(sum(p["limitedBy"].values()) == p["nodes"] for p in run["byPool"])
    assert "previews" not in run  # each pool kept its own


def test_axes_and_a_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 40, "selector": {}, "template": {"metadata": {}, "spec": {"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}]}}}}), encoding="utf-8")
    doc = capacity(capsys, str(deploy), "--kubelet-version", "1.36", "--preview-axis", "",
                   "--preview-axis", "numa-allocation-strategy=least-allocated", "-o", "yaml")
    assert doc["summary"]["workloadPods"] == 40
    assert [r["previews"] for r in doc["summary"]["runs"]] == [{}, {"numa-allocation-strategy": "least-allocated"}]
    assert all(r["workloadFits"] == (r["exact"] >= 40) for r in doc["summary"]["runs"])


def test_pools_that_say_the_same_are_folded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dump splits nodes by labels, which the document does not show: 40 racks are one pool's
    settings once, the others `sameAs` it, while the counts stay per pool."""
    nodes = [{"kind": "Node", "apiVersion": "v1", "metadata": {"name": f"n{i}", "labels": {"rack": f"r{i}"}},
              "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                         "allocatable": {"cpu": "63", "memory": "250Gi", "pods": "110"}}} for i in range(40)]
    dump = tmp_path / "nodes.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}), encoding="utf-8")
    doc = capacity(capsys, "--nodes", str(dump), "-o", "json")
    first, *rest = doc["pools"]
    assert first["identicalPools"] == 39 and "kubeletConfig" in first
    assert rest == [{"name": f"pool-{i}", "nodes": 1, "sameAs": "pool-0"} for i in range(1, 40)]
    (run,) = doc["runs"]
    assert [p["pool"] for p in run["byPool"]] == [p["name"] for p in doc["pools"]]
    assert len({p["exact"] for p in run["byPool"]}) == 1  # the same nodes, the same count


def test_claims_that_stop_the_count_say_why_in_json_and_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    dra = Path(__file__).resolve().parents[2] / "data" / "dra"
    args = ["--cluster", str(dra / "cluster" / "cluster.yaml"), str(dra / "claim-and-pod.yaml")]
    for form in ("json", "yaml"):
        (run,) = capacity(capsys, *args, "-o", form)["runs"]
        by_pool = {p["pool"]: p for p in run["byPool"]}
        assert by_pool["gpu"]["limitedBy"] == {"cannot allocate all claims": 3}
        assert by_pool["gpu"]["why"] == {
            "claim gpus (template default/two-gpus), request gpus: needs 2 device(s), 0 usable: 8 on the node, "
            "class h100 selector #0 matched 8, 8 held by other claims": 3}
        assert list(by_pool["cpu"]["why"]) == [
            "claim gpus (template default/two-gpus), request gpus: no device on the node to try (no ResourceSlice "
            "for this node publishes one)"]
    assert all("why" not in p for p in capacity(capsys, "-o", "json")["runs"][0]["byPool"])  # no DRA: no key
