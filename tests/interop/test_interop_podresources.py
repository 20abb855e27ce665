"""The kubelet's own PodResources v1 client (k8s.io/kubernetes pkg/kubelet/apis/podresources.GetV1Client,
built from the published modules in interop/podres) against a real `numalign serve`: List, Get and
GetAllocatableResources decode to what `numalign pods -o json` says serve admitted."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from interop.peers import DATA, NODE, Serve, Stub, binary, pod
from numalign.k8s.cpuset import parse_cpuset
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.machine.examples import example

GPU = "example.com/gpu"


def podres(serve: Serve, *gets: str) -> dict[str, Any]:
    args = [str(binary("podres")), "-socket", str(serve.pr_socket)]
    for g in gets:
        args += ["-get", g]
    out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def nodes(entry: dict[str, Any]) -> list[int]:
    # proto3 JSON from the Go structs omits a zero ID: {} is NUMA node 0.
    return [n.get("ID", 0) for n in entry.get("topology", {}).get("nodes", [])]


def as_podresources(p: dict[str, Any]) -> dict[str, Any]:
    """A pod of `numalign pods -o json` in PodResources' shape: one device entry per device per NUMA node."""
    containers = []
    for name in p["containerOrder"]:
        a = p["allocations"].get(name, {})
        devices = sorted(
            (res, dev, node)
            for res, devs in a.get("devices", {}).items()
            for dev, numa in devs.items()
            for node in numa
        )
        containers.append({
            "name": name,
            "cpu_ids": sorted(parse_cpuset(a["cpus"])) if a.get("exclusiveCPUs") else [],
            "devices": devices,
            "memory": sorted((m["type"], m["size"], tuple(m["numaNodes"])) for m in a.get("memory", [])),
        })  # fmt: skip
    return {"name": p["name"], "namespace": p["namespace"], "containers": containers}


def decoded(p: dict[str, Any]) -> dict[str, Any]:
    """A pod as the Go client decoded it, in the same shape."""
    return {
        "name": p["name"],
        "namespace": p["namespace"],
        "containers": [
            {
                "name": c["name"],
                "cpu_ids": sorted(c.get("cpu_ids", [])),
                "devices": sorted(
                    (d["resource_name"], dev, node) for d in c.get("devices", []) for dev in d["device_ids"]
                    for node in nodes(d)
                ),
                "memory": sorted((m["memory_type"], m["size"], tuple(nodes(m))) for m in c.get("memory", [])),
            }
            for c in p["containers"]
        ],
    }  # fmt: skip


def test_kubelet_podresources_client_reads_what_serve_admitted(serve: Serve) -> None:
    stub = Stub(serve, "gpu0@0,gpu1@0,gpu2@1,gpu3@1")
    try:
        stub.wait_event("registered")
        serve.write_manifest("train.yaml", pod("train", "ml", f'cpu: "4", memory: 4Gi, {GPU}: "2"'))
        serve.write_manifest("web.yaml", pod("web", "default", 'cpu: "2", memory: 1Gi'))
        serve.write_manifest("besteffort.yaml", pod("idle", "default", ""))
        for name in ("train", "web", "idle"):
            serve.wait_pod(f"{name}-{NODE}")
        got = podres(serve, f"ml/train-{NODE}", f"default/web-{NODE}", "ml/absent")
    finally:
        stub.stop()

    pods = serve.pods()["pods"].values()
    want = sorted((as_podresources(p) for p in pods), key=lambda p: (p["namespace"], p["name"]))
    listed = sorted((decoded(p) for p in got["list"]), key=lambda p: (p["namespace"], p["name"]))
    assert listed == want
    train = next(p for p in want if p["name"] == f"train-{NODE}")
    assert len(train["containers"][0]["devices"]) == 2 and len(train["containers"][0]["cpu_ids"]) == 4

    # Get answers the same pod as List; an unknown pod is the kubelet's error text.
    by_name = {(p["namespace"], p["name"]): p for p in listed}
    train_get, web_get, absent = got["get"]
    assert decoded(train_get["pod"]) == by_name[("ml", f"train-{NODE}")]
    assert decoded(web_get["pod"]) == by_name[("default", f"web-{NODE}")]
    assert "pod absent in namespace ml not found" in absent["error"] and "pod" not in absent

    # Allocatable: every CPU but the reserved ones, each device on its NUMA node, memory per node.
    machine = example("dual-socket")
    config = config_from_yaml((DATA / "example-kubelet-config.yaml").read_text(encoding="utf-8"), "cfg")
    reserved = parse_cpuset(config.reserved_system_cpus)
    alloc = got["allocatable"]
    assert sorted(alloc["cpu_ids"]) == sorted(set(machine.online_cpus()) - reserved)
    assert sorted((d["resource_name"], i, tuple(nodes(d))) for d in alloc["devices"] for i in d["device_ids"]) == [
        (GPU, "gpu0", (0,)), (GPU, "gpu1", (0,)), (GPU, "gpu2", (1,)), (GPU, "gpu3", (1,)),
    ]  # fmt: skip
    assert {tuple(nodes(m)) for m in alloc["memory"] if m["memory_type"] == "memory"} == {
        (n,) for n in machine.numa_ids()
    }
