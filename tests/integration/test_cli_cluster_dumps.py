"""A cluster rebuilt from kubectl dumps: nodes, their NodeResourceTopology objects (here numalign's own
export of the built-in GPU node) and the pods running now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from numalign.cli.main import main
from numalign.cluster.dumps import cluster_from_dumps
from numalign.cluster.examples import gpu_node
from numalign.cluster.model import example_config
from numalign.cluster.nrt_export import node_resource_topology
from numalign.kubelet.node import Node


def _node(name: str, capacity: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": labels or {}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _dumps(tmp_path: Path) -> tuple[Path, Path, Path]:
    cap = {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
    nodes = [_node("gpu-a", cap), _node("gpu-b", cap), _node("small", {"cpu": "8", "memory": "32Gi", "pods": "50"})]
    nrts = [node_resource_topology(Node(gpu_node(), example_config()), n).to_dict() for n in ("gpu-a", "gpu-b")]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy", "namespace": "ml"},
           "spec": {"nodeName": "gpu-a", "containers": [{"name": "c", "resources": {
               "limits": {"cpu": "20", "memory": "96Gi", "nvidia.com/gpu": "2"}}}]},
           "status": {"phase": "Running"}}
    done = {**pod, "metadata": {"name": "old", "namespace": "ml"}, "status": {"phase": "Succeeded"}}
    paths = tmp_path / "nodes.json", tmp_path / "nrts.json", tmp_path / "pods.json"
    for path, items in zip(paths, (nodes, nrts, [pod, done]), strict=True):
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    return paths


def test_cluster_from_dumps_rebuilds_numa_zones(tmp_path: Path) -> None:
    nodes, nrts, _ = _dumps(tmp_path)
    cluster = cluster_from_dumps(nodes, nrts)
    assert [(p.count, p.names) for p in cluster.pools] == [(2, ("gpu-a", "gpu-b")), (1, ("small",))]
    gpu, small = cluster.pools
    assert len(gpu.machine.numa_nodes) == 4 and len(gpu.machine.cpus) == 128
    assert {d.numa_nodes for d in gpu.machine.devices} == {(0,), (1,), (2,), (3,)}
    assert gpu.machine.numa_nodes[0].distances == (10, 11, 21, 21)
    cfg = gpu.config
    assert (cfg.topology_manager_policy, cfg.cpu_manager_policy, cfg.memory_manager_policy) == \
        ("single-numa-node", "static", "Static")
    assert len(cfg.reserved_cpus()) == 2
    # The rebuilt node exports the same zones as the original (the reservation lands on NUMA node 0).
    again = node_resource_topology(Node(gpu.machine, cfg), "gpu-a").to_dict()
    original = json.loads(nrts.read_text(encoding="utf-8"))["items"][0]
    assert again["zones"] == original["zones"]
    assert small.config.topology_manager_policy == "none" and len(small.machine.numa_nodes) == 1


def test_capacity_and_simulate_from_dumps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, nrts, pods = _dumps(tmp_path)
    train = tmp_path / "train.yaml"
    train.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: t}\nspec:\n  containers:\n  - name: c\n"
                     "    resources: {limits: {cpu: '20', memory: 96Gi, nvidia.com/gpu: '2'}}\n", encoding="utf-8")
    dumps = ["--nodes", str(nodes), "--nrts", str(nrts), "--pods-dump", str(pods)]
    assert main(["capacity", str(train), *dumps, "-o", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    # 4 per GPU node, one already running on gpu-a; the small node has no GPU.
    assert [(p["pool"], p["exact"], p["byRequests"]) for p in obj["runs"][0]["byPool"]] == [("pool-0", 7, 7),
                                                                                           ("pool-1", 0, 0)]
    assert main(["simulate", *dumps, "--generate", "30", "-j", "1", "--scheduler", "exact", "-o", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["preexisting"] == 1 and run["preexistingRejected"] == 0 and run["rejections"] == 0
    assert run["placed"] + run["unschedulable"] + run["failed"] == run["pods"] == 30


def test_dumps_that_are_not_what_they_claim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, _nrts, pods = _dumps(tmp_path)
    assert main(["simulate", "--nodes", str(pods), "-j", "1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pods.json: no Node objects: it holds 2 of other kinds (Pod: 2)" in err[0]
    assert main(["simulate", "--nodes", str(nodes), "--nrts", str(nodes), "-j", "1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "nodes.json: no NodeResourceTopology objects: it holds 3 of other kinds (Node: 3)" in err[0]
    yaml_dump = tmp_path / "nodes.yaml"
    yaml_dump.write_text("kind: List\nitems: []\n", encoding="utf-8")
    assert main(["capacity", "--nodes", str(yaml_dump)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nodes.yaml: no Node objects (an empty list)" in err[0]
    # an NRT without NUMA zones: the fault is named in the NRT dump, where it is
    sockets = tmp_path / "sockets.json"
    sockets.write_text(json.dumps({"kind": "List", "items": [{
        "apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology", "metadata": {"name": "gpu-b"},
        "zones": [{"name": "socket-0", "type": "Socket", "resources": []}]}]}), encoding="utf-8")
    assert main(["simulate", "--nodes", str(nodes), "--nrts", str(sockets), "-j", "1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sockets.json: items[0] (gpu-b): no NUMA zones (type Node, name node-N)" in err[0], err


def test_nrt_of_every_node_of_a_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, nrts, pods = _dumps(tmp_path)
    assert main(["nrt", "--nodes", str(nodes), "--nrts", str(nrts), "--pods-dump", str(pods), "-o", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["kind"] == "List" and [o["metadata"]["name"] for o in listed["items"]] == ["gpu-a", "gpu-b", "small"]
    original = json.loads(nrts.read_text(encoding="utf-8"))["items"]
    assert listed["items"][1]["zones"] == original[1]["zones"]  # gpu-b runs nothing: as exported

    def gpus(obj: dict[str, Any]) -> int:
        return sum(int(r["available"]) for z in obj["zones"] for r in z["resources"] if r["name"] == "nvidia.com/gpu")

    assert gpus(listed["items"][0]) == 6  # the running pod holds 2 of gpu-a's 8
    assert main(["nrt", "--cluster", "example", "--node-name", "gpu-3", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"]["name"] == "gpu-3"
    assert main(["nrt", "--cluster", "example", "--node-name", "nope"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--node-name 'nope': no such node in cluster example" in err[0]


def _pod_obj(name: str, node: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
                "limits": {"cpu": cpu, "memory": "4Gi"}}}]}, "status": {"phase": "Running"}}


def test_nrt_state_the_simulation_does_not_start_from_is_said(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The dump's NRT shows `late` on NUMA node 1 (NUMA node 0 was full when the kubelet admitted it;
    the pod that filled it is gone). Without --pods-dump the used CPUs would be ignored; with it, `late`
    is admitted again on an empty node and lands on NUMA node 0: both are said, one line each."""
    from numalign.k8s.manifest import pod_from_dict

    node = Node(gpu_node(), example_config())
    first = pod_from_dict(_pod_obj("first", "gpu-a", "30"))
    late = pod_from_dict(_pod_obj("late", "gpu-a", "8"))
    assert node.admit(first).result.admit and node.admit(late).result.admit
    node.remove(first.uid)
    cap = {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
    paths = tmp_path / "nodes.json", tmp_path / "nrts.json", tmp_path / "pods.json"
    items: tuple[list[Any], ...] = ([_node("gpu-a", cap)], [node_resource_topology(node, "gpu-a").to_dict()],
                                    [_pod_obj("late", "gpu-a", "8")])
    for path, objs in zip(paths, items, strict=True):
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}), encoding="utf-8")
    train = tmp_path / "t.yaml"
    train.write_text(json.dumps(_pod_obj("t", "", "2")), encoding="utf-8")
    assert main(["capacity", str(train), "--nodes", str(paths[0]), "--nrts", str(paths[1])]) == 0
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("note: ")]
    assert len(err) == 1 and "1 node(s) have resources in use in their NodeResourceTopology" in err[0]
    assert "gpu-a node-1: 8 cpu in use" in err[0] and "--pods-dump" in err[0]
    assert main(["capacity", str(train), "--nodes", str(paths[0]), "--nrts", str(paths[1]),
                 "--pods-dump", str(paths[2])]) == 0
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("note: ")]
    assert len(err) == 2 and "1 node(s) differ from their NodeResourceTopology" in err[0]
    assert "gpu-a node-0: 8 cpu in use here, 0 in its NodeResourceTopology" in err[1]
    # A dump whose state is reproduced (the NRT of `late` admitted first) says nothing.
    fresh = Node(gpu_node(), example_config())
    assert fresh.admit(late).result.admit
    paths[1].write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                    "items": [node_resource_topology(fresh, "gpu-a").to_dict()]}), encoding="utf-8")
    assert main(["capacity", str(train), "--nodes", str(paths[0]), "--nrts", str(paths[1]),
                 "--pods-dump", str(paths[2])]) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if not line.startswith("note: ")] == []
