"""`numalign capacity` with a claim the pod names (resourceClaimName): one ResourceClaim, allocated once,
shared by every copy, which can run only on the nodes its allocation reaches. Real inputs: NVIDIA's
DeviceClass and a DGX H100's ResourceSlices and machine (tests/data/real-inputs/dra), the claim written in
the shape of the NVIDIA quickstart's shared-claim example (two pods naming one ResourceClaim)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.schemas import validate

from numalign.cli.main import main

NV = Path(__file__).resolve().parents[1] / "data" / "real-inputs" / "dra"
NOT_AVAILABLE = "resourceclaim not available on the node"

CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"namespace": "gpu-test3", "name": "single-gpu"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "gpu-test3", "name": "pod"},
       "spec": {"containers": [{"name": "ctr", "image": "ubuntu:22.04", "resources": {
           "requests": {"cpu": "16", "memory": "64Gi"}, "limits": {"cpu": "16", "memory": "64Gi"},
           "claims": [{"name": "shared-gpu"}]}}],
           "resourceClaims": [{"name": "shared-gpu", "resourceClaimName": "single-gpu"}]}}


def _cluster(tmp_path: Path) -> Path:
    f = tmp_path / "cluster.yaml"
    f.write_text(yaml.safe_dump({"kind": "Cluster", "name": "dgx", "pools": [{
        "name": "dgx", "count": 3, "machine": str(NV / "dgx-h100-machine.yaml"),
        "resourceSlices": str(NV / "dgx-h100-resourceslice.yaml")}]}), encoding="utf-8")
    return f


def _pod_file(tmp_path: Path, *docs: dict[str, Any],
              real: tuple[str, ...] = ("deviceclass-gpu.nvidia.com.yaml",)) -> Path:
    f = tmp_path / "pod.yaml"
    parts = [*((NV / r).read_text() for r in real), *([yaml.safe_dump_all(docs)] if docs else [])]
    f.write_text("\n---\n".join(parts), encoding="utf-8")
    return f


def _capacity(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[list[str], dict[str, Any]]:
    capsys.readouterr()
    assert main(["capacity", *args]) == 0
    text = capsys.readouterr().out.splitlines()
    assert main(["capacity", *args, "-o", "json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    validate("capacity", doc)
    return text, doc


def _row(text: list[str], pool: str) -> list[str]:
    """The pool's row of the counts' table (after its FIT header)."""
    head = next(i for i, line in enumerate(text) if "FIT (NUMA-EXACT)" in line)
    return next(line for line in text[head:] if line.startswith(f"{pool} ")).split(None, 5)


def test_a_named_claim_is_allocated_once_and_pins_every_copy_to_its_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, doc = _capacity(capsys, "--cluster", str(_cluster(tmp_path)), str(_pod_file(tmp_path, CLAIM, POD)))
    # One node's copies: 222 allocatable CPUs (2 reserved of 224) / 16 = 13; the other two nodes are not
    # reached by the allocation of a node-local GPU (before: 13 on each node, 39, one claim counted thrice).
    (pool,) = doc["runs"][0]["byPool"]
    assert (pool["exact"], pool["byRequests"]) == (13, 39)
    assert pool["limitedBy"] == {"Insufficient cpu": 1, NOT_AVAILABLE: 2}
    assert doc["runs"][0]["sharedClaims"] == [{
        "claim": "gpu-test3/single-gpu", "allocated": "firstCopy", "node": "dgx-0",
        "devices": ["gpu.nvidia.com/dgx-h100-01/gpu-0"], "everyNode": False, "nodes": ["dgx-0"]}]
    assert _row(text, "dgx")[3:5] == ["13", "39"]
    assert ("  shared claim gpu-test3/single-gpu: allocated once, for the first copy, on dgx-0 "
            "(gpu.nvidia.com/dgx-h100-01/gpu-0); pins every copy to 1 node: dgx-0") in text


def test_a_template_claim_stays_each_copys_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": CLAIM["metadata"],
                "spec": {"spec": CLAIM["spec"]}}
    pod = yaml.safe_load(json.dumps(POD))
    pod["spec"]["resourceClaims"] = [{"name": "shared-gpu", "resourceClaimTemplateName": "single-gpu"}]
    _text, doc = _capacity(capsys, "--cluster", str(_cluster(tmp_path)), str(_pod_file(tmp_path, template, pod)))
    (pool,) = doc["runs"][0]["byPool"]
    # 8 GPUs a node, one per copy, on each of the 3 nodes
    assert (pool["exact"], pool["limitedBy"]) == (24, {"cannot allocate all claims": 3})
    assert "sharedClaims" not in doc["runs"][0]


@pytest.mark.parametrize(("node", "exact", "limited"), [
    ("dgx-2", 13, {"Insufficient cpu": 1, NOT_AVAILABLE: 2}),
    ("gone-node", 0, {NOT_AVAILABLE: 3}),
])
def test_an_allocated_claim_in_the_input_pins_the_copies_where_its_node_selector_says(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], node: str, exact: int, limited: dict[str, int]) -> None:
    claim = {**CLAIM, "status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dgx-h100-01",
                                 "device": "gpu-5"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}
    text, doc = _capacity(capsys, "--cluster", str(_cluster(tmp_path)), str(_pod_file(tmp_path, claim, POD)))
    (pool,) = doc["runs"][0]["byPool"]
    assert (pool["exact"], pool["limitedBy"]) == (exact, limited)
    (shared,) = doc["runs"][0]["sharedClaims"]
    assert (shared["allocated"], shared["devices"], shared["nodes"]) == (
        "input", ["gpu.nvidia.com/dgx-h100-01/gpu-5"], [node] if exact else [])
    where = "pins every copy to 1 node: dgx-2" if exact else "its node selector reaches no node of the cluster"
    assert any(line.startswith("  shared claim gpu-test3/single-gpu: allocated in the input (status.allocation)")
               and where in line for line in text)


def test_a_network_attached_claim_reaches_every_node_its_slice_selects(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "fabric.yaml").write_text(yaml.safe_dump({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric"},
        "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                 "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "rack", "operator": "In", "values": ["r1"]}]}]},
                 "devices": [{"name": f"fgpu-{i}", "attributes": {"type": {"string": "gpu"}}} for i in range(2)]}}),
        encoding="utf-8")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"kind": "Cluster", "name": "fabric", "pools": [
        {"name": "rack1", "count": 3, "machine": "dual-socket", "labels": {"rack": "r1"},
         "resourceSlices": "fabric.yaml"},
        {"name": "rack2", "count": 2, "machine": "dual-socket", "labels": {"rack": "r2"},
         "resourceSlices": "fabric.yaml"}]}), encoding="utf-8")
    pod = yaml.safe_load(json.dumps(POD))
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4", "memory": "8Gi"},
                                                 "limits": {"cpu": "4", "memory": "8Gi"},
                                                 "claims": [{"name": "shared-gpu"}]}
    text, doc = _capacity(capsys, "--cluster", str(cluster), str(_pod_file(tmp_path, CLAIM, pod)))
    by_pool = {p["pool"]: p for p in doc["runs"][0]["byPool"]}
    # rack1's 3 nodes share the one fabric GPU: 126 CPUs / 4 = 31 copies each; rack2 is not selected
    assert (by_pool["rack1"]["exact"], by_pool["rack1"]["limitedBy"]) == (93, {"Insufficient cpu": 3})
    assert (by_pool["rack2"]["exact"], by_pool["rack2"]["limitedBy"]) == (0, {NOT_AVAILABLE: 2})
    (shared,) = doc["runs"][0]["sharedClaims"]
    assert (shared["node"], shared["devices"], shared["everyNode"], shared["nodes"]) == (
        "rack1-0", ["gpu.nvidia.com/fabric/fgpu-0"], False, ["rack1-0", "rack1-1", "rack1-2"])
    assert any(line.endswith("pins every copy to 3 nodes: rack1-0, rack1-1, rack1-2") for line in text)


def test_a_named_claim_no_node_can_allocate_pins_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # gpu-plus-cpu-claim.yaml names its claim; the DGX nodes publish GPUs but no dra.cpu devices
    f = _pod_file(tmp_path, real=("deviceclass-gpu.nvidia.com.yaml", "deviceclass-dra.cpu.yaml",
                                  "gpu-plus-cpu-claim.yaml"))
    text, doc = _capacity(capsys, "--cluster", str(_cluster(tmp_path)), str(f))
    (pool,) = doc["runs"][0]["byPool"]
    assert (pool["exact"], pool["limitedBy"]) == (0, {"cannot allocate all claims": 3})
    assert doc["runs"][0]["sharedClaims"] == [{"claim": "default/gpus-and-cpus", "allocated": "none", "devices": [],
                                               "everyNode": False, "nodes": []}]
    assert ("  shared claim default/gpus-and-cpus: every copy shares it, but no node takes the first copy (the "
            "claim allocated and the copy admitted): nothing fits (LIMITED BY says why)") in text


def test_a_first_copy_the_kubelet_rejects_gives_the_claim_back_and_the_next_choice_takes_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from numalign.cluster.state import ClusterState

    machine, slices = str(NV / "dgx-h100-machine.yaml"), str(NV / "dgx-h100-resourceslice.yaml")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"kind": "Cluster", "name": "mix", "pools": [
        {"name": "strict", "count": 5, "machine": machine, "resourceSlices": slices,
         "kubelet": {"topologyManagerPolicy": "single-numa-node"}},
        {"name": "loose", "count": 1, "machine": machine, "resourceSlices": slices,
         "kubelet": {"topologyManagerPolicy": "none"}}]}), encoding="utf-8")
    pod = yaml.safe_load(json.dumps(POD))  # 120 CPUs: more than one NUMA node of a DGX H100 holds
    pod["spec"]["containers"][0]["resources"].update({"requests": {"cpu": "120", "memory": "8Gi"},
                                                      "limits": {"cpu": "120", "memory": "8Gi"}})
    first_copies: list[tuple[str, bool]] = []
    admit = ClusterState.admit

    def recording(self: ClusterState, i: int, p: Any, pv: Any) -> Any:
        rec = admit(self, i, p, pv)
        # the first copy's admissions up to the one admitted: the claim's pinning (counting comes after)
        if p.name == "pod-copy-0" and not any(admitted for _, admitted in first_copies):
            first_copies.append((self.nodes[i].name, bool(rec.result.admit)))
        return rec

    monkeypatch.setattr(ClusterState, "admit", recording)
    _text, doc = _capacity(capsys, "--cluster", str(cluster), str(_pod_file(tmp_path, CLAIM, pod)))
    # the scheduler's first choice is a strict node, whose kubelet refuses the copy (TopologyAffinityError);
    # nothing stays allocated there, every strict node (one state) is passed over, and loose-0 takes it
    assert first_copies[0][0].startswith("strict-") and first_copies[0][1] is False
    assert first_copies[-1] == ("loose-0", True)
    by_pool = {p["pool"]: p for p in doc["runs"][0]["byPool"]}
    assert (by_pool["loose"]["exact"], by_pool["strict"]["limitedBy"]) == (1, {NOT_AVAILABLE: 5})
    assert doc["runs"][0]["sharedClaims"][0]["node"] == "loose-0"


def test_a_first_copy_every_kubelet_rejects_pins_nothing_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"kind": "Cluster", "name": "strict", "pools": [{
        "name": "strict", "count": 2, "machine": str(NV / "dgx-h100-machine.yaml"),
        "resourceSlices": str(NV / "dgx-h100-resourceslice.yaml"),
        "kubelet": {"topologyManagerPolicy": "single-numa-node"}}]}), encoding="utf-8")
    pod = yaml.safe_load(json.dumps(POD))
    pod["spec"]["containers"][0]["resources"].update({"requests": {"cpu": "120", "memory": "8Gi"},
                                                      "limits": {"cpu": "120", "memory": "8Gi"}})
    text, doc = _capacity(capsys, "--cluster", str(cluster), str(_pod_file(tmp_path, CLAIM, pod)))
    (pool,) = doc["runs"][0]["byPool"]
    assert (pool["exact"], pool["limitedBy"]) == (0, {"TopologyAffinityError": 2})
    assert doc["runs"][0]["sharedClaims"][0]["allocated"] == "none"
    assert ("  shared claim gpu-test3/single-gpu: every copy shares it, but no node takes the first copy (the "
            "claim allocated and the copy admitted): nothing fits (LIMITED BY says why)") in text


def test_an_allocation_selecting_the_hostname_label_reaches_that_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # every kubelet labels its node kubernetes.io/hostname; a pool's labels cannot hold it (before: no node)
    claim = {**CLAIM, "status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dgx-h100-01",
                                 "device": "gpu-5"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["dgx-1"]}]}]}}}}
    _text, doc = _capacity(capsys, "--cluster", str(_cluster(tmp_path)), str(_pod_file(tmp_path, claim, POD)))
    (pool,) = doc["runs"][0]["byPool"]
    assert (pool["exact"], pool["limitedBy"]) == (13, {"Insufficient cpu": 1, NOT_AVAILABLE: 2})
    assert doc["runs"][0]["sharedClaims"][0]["nodes"] == ["dgx-1"]
