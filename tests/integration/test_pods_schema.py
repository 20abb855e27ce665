"""`numalign pods -o json|yaml` validates against its published schema (docs/schemas/pods.schema.json):
schemaVersion 1, the summary first, one key style (camelCase) over the agent's status file and the
state files, and the runtime's own names (environment variables, annotations) kept as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.schemas import snake_keys, validate

from numalign.adapters.textfiles import load_pods
from numalign.agent.status import write_status
from numalign.cli.main import main
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.paths import DATA_DIR

# maps keyed by data: pod UIDs, containers, resources, files, fault kinds, env names, annotation keys
DATA_MAPS = frozenset({"pods", "allocations", "devices", "manifests", "resources", "faults", "envs", "annotations",
                       "runtime", "byStatus", "claims", "hints", "options", "draUnallocatable"})


def pods(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["pods", *args]) == 0
    out = capsys.readouterr().out
    doc: dict[str, Any] = yaml.safe_load(out) if "yaml" in args else json.loads(out)
    validate("pods", doc)
    assert list(doc)[:2] == ["schemaVersion", "summary"]
    assert snake_keys(doc, data_maps=DATA_MAPS) == []
    return doc


def test_the_agents_status_in_one_key_style(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = config_from_yaml((DATA_DIR / "example-kubelet-config.yaml").read_text(encoding="utf-8"), "cfg")
    node = Node(example("dual-socket"), config)
    entries = {}
    for pod in load_pods(DATA_DIR / "example-pods.yaml"):
        rec = node.admit(pod)
        entries[pod.uid] = {
            "namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "file": "pods.yaml",
            "status": "admitted" if rec.result.admit else "rejected", "reason": rec.result.reason,
            "message": rec.result.message, "record": rec.to_dict(), "allocations": rec.to_dict()["allocations"],
            "container_order": [c.name for c in pod.all_containers()], "container_errors": {},
            "containers": "started" if rec.result.admit else None,
            "runtime": {c.name: {"envs": {"NVIDIA_VISIBLE_DEVICES": "0"}, "annotations": {"a_b": "c"},
                                 "mounts": [{"container_path": "/c", "host_path": "/h", "read_only": True}],
                                 "devices": [], "cdi_devices": []} for c in pod.all_containers()}
            if rec.result.admit else {}}
    state = tmp_path / "state"
    state.mkdir()
    write_status(state, {"pods": entries, "manifests": {"pods.yaml": {"status": "ok", "error": None,
                                                                      "pods": list(entries)}},
                         "resources": {}, "faults": {"state_write_error": 1}, "reserved_cpus": "0"})
    doc = pods(capsys, "--state-dir", str(state), "-o", "json")
    summary = doc["summary"]
    assert summary["pods"] == len(entries) and summary["processes"] == 0 and summary["invalidManifests"] == 0
    statuses = [e["status"] for e in entries.values()]
    assert summary["byStatus"] == {s: statuses.count(s) for s in sorted(set(statuses))} and "rejected" in statuses
    rejected = next(p for p in doc["pods"].values() if p["status"] == "rejected")
    assert rejected["record"]["podUID"] == rejected["uid"] and "containerOrder" in rejected
    admitted = next(p for p in doc["pods"].values() if p["status"] == "admitted")
    (runtime,) = list(admitted["runtime"].values())[:1]
    assert runtime["envs"] == {"NVIDIA_VISIBLE_DEVICES": "0"} and runtime["annotations"] == {"a_b": "c"}
    assert runtime["mounts"] == [{"containerPath": "/c", "hostPath": "/h", "readOnly": True}]
    assert doc["faults"] == {"state_write_error": 1}


def test_a_state_directory_of_admit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admit", "--state-dir", str(tmp_path / "state")]) == 0
    capsys.readouterr()
    doc = pods(capsys, "--state-dir", str(tmp_path / "state"), "-o", "yaml")
    assert doc["summary"]["byStatus"] == {"admitted": doc["summary"]["pods"]}
    assert all(a["exclusiveCPUs"] in (True, False) for p in doc["pods"].values() for a in p["allocations"].values())


def test_serves_dra_explanation_is_carried_on_the_pod_and_beside_the_faults(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Found by review: serve said why a pod's claims could not be allocated (draUnallocatable in its status
    # file), `pods -o json|yaml` dropped it.
    pod = next(iter(load_pods(DATA_DIR / "example-pods.yaml")))
    why = ["claim default/two-gpus, request gpus: class h100 selector #0 matched none of the 4 device(s)"]
    state = tmp_path / "state"
    state.mkdir()
    write_status(state, {
        "pods": {pod.uid: {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "file": "pods.yaml",
                           "status": "admitted", "reason": "", "message": "", "record": None, "allocations": {},
                           "container_order": [], "container_errors": {}, "containers": "started", "runtime": {}}},
        "manifests": {}, "resources": {}, "faults": {"dra_unallocatable": 1}, "reserved_cpus": "0",
        "draUnallocatable": {pod.uid: {"pod": f"{pod.namespace}/{pod.name}", "message": "cannot allocate all claims",
                                       "why": why}}})
    for fmt in ("json", "yaml"):
        doc = pods(capsys, "--state-dir", str(state), "-o", fmt)
        assert doc["pods"][pod.uid]["draUnallocatable"] == {"message": "cannot allocate all claims", "why": why}
        assert doc["draUnallocatable"] == {pod.uid: {"pod": f"{pod.namespace}/{pod.name}",
                                                     "message": "cannot allocate all claims", "why": why}}
        assert doc["faults"] == {"dra_unallocatable": 1}
