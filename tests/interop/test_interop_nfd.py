"""NFD's nfd-topology-updater (sigs.k8s.io/node-feature-discovery, built from its published module in
interop/nfd) run -oneshot against a real `numalign serve`'s PodResources socket, with a loopback stand-in
for the API server (tests/interop/apiserver.py): the NodeResourceTopology it creates equals the one
`numalign nrt` prints for the same node in the pod-set fingerprint, the topology manager attributes and
the devices per zone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from interop.apiserver import running
from interop.peers import DATA, NODE, Serve, Stub, binary

GPU = "example.com/gpu"
CONFIG = DATA / "example-kubelet-config.yaml"


def manifest(name: str, namespace: str, limits: dict[str, str]) -> dict[str, Any]:
    # JSON is YAML: serve reads this as a manifest; the stand-in serves it as the API server stores it.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
    }


def as_stored(m: dict[str, Any]) -> dict[str, Any]:
    """The mirror pod as the API server holds it: the kubelet's `<name>-<node>` name, requests defaulted
    from limits (NFD reads the requests to tell a pod with exclusive CPUs)."""
    pod: dict[str, Any] = json.loads(json.dumps(m))
    pod["metadata"]["name"] = f"{m['metadata']['name']}-{NODE}"
    for c in pod["spec"]["containers"]:
        c["resources"]["requests"] = dict(c["resources"]["limits"])
    return pod


def comparable(nrt: dict[str, Any]) -> dict[str, Any]:
    """What both sides decide: zones (by name, resources by name) and attributes (by name)."""
    zones = {
        z["name"]: {
            "type": z["type"],
            "costs": sorted((c["name"], c["value"]) for c in z.get("costs") or []),
            "resources": {
                r["name"]: (r["capacity"], r["allocatable"], r["available"]) for r in z.get("resources") or []
            },
        }
        for z in nrt["zones"]
    }
    return {
        "name": nrt["metadata"]["name"],
        "zones": zones,
        "attributes": {a["name"]: a["value"] for a in nrt.get("attributes") or []},
    }


def test_nfd_topology_updater_publishes_the_nrt_numalign_nrt_prints(serve: Serve) -> None:
    pods = [
        manifest("train", "ml", {"cpu": "4", "memory": "4Gi", GPU: "2"}),
        manifest("web", "default", {"cpu": "2", "memory": "1Gi"}),
        manifest("burst", "default", {"cpu": "500m", "memory": "256Mi"}),  # no exclusive CPUs: NFD skips it
    ]
    stub = Stub(serve, "gpu0@0,gpu1@0,gpu2@1,gpu3@1")
    try:
        stub.wait_event("registered")
        for m in pods:
            serve.write_manifest(f"{m['metadata']['name']}.yaml", json.dumps(m))
        for m in pods:
            serve.wait_pod(f"{m['metadata']['name']}-{NODE}")

        stored = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in map(as_stored, pods)}
        with running(stored) as api:
            kubeconfig = api.kubeconfig(serve.root / "kubeconfig")
            run = subprocess.run(
                [str(binary("nfd-topology-updater")), "-oneshot", "-kubeconfig", str(kubeconfig),
                 "-podresources-socket", str(serve.pr_socket), "-kubelet-config-uri", f"file://{CONFIG}",
                 "-kubelet-state-dir", "", "-sleep-interval", "1s", "-metrics", "0", "-grpc-health", "0",
                 "-config", ""],
                env={**os.environ, "NODE_NAME": NODE}, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert run.returncode == 0, run.stderr
            assert list(api.nrts) == [NODE], (api.requests, run.stderr)
            published = api.nrts[NODE]
            unexpected = [r for r in api.requests if not r[1].startswith(("/api/v1/namespaces/", "/apis/topology"))]
            assert unexpected == []

        ours = subprocess.run(
            [sys.executable, "-m", "numalign.cli.main", "nrt", "--machine", "dual-socket", "--config", str(CONFIG),
             "--pod-resources-socket", str(serve.pr_socket), "--node-name", NODE, "-o", "json"],
            check=True, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        from_socket = json.loads(ours.stdout)
    finally:
        stub.stop()

    theirs, ours_ = comparable(published), comparable(from_socket)
    # The pod-set fingerprint and the topology manager attributes: equal.
    assert theirs["name"] == ours_["name"] == NODE
    assert theirs["attributes"] == ours_["attributes"]
    attrs = theirs["attributes"]
    assert attrs["topologyManagerPolicy"] == "single-numa-node" and attrs["topologyManagerScope"] == "container"
    assert attrs["nodeTopologyPodsFingerprint"].startswith("pfp0v")
    # Devices come from PodResources' allocatable and assignments on both sides: equal per zone. (CPU and
    # memory capacity and the costs NFD v0.17.3 reads from the host's own sysfs, not from the node serve
    # models, so they are not compared: docs/node-agent.md.)
    def gpus(nrt: dict[str, Any]) -> dict[str, Any]:
        return {z: zone["resources"][GPU] for z, zone in nrt["zones"].items() if GPU in zone["resources"]}

    # NFD's zones are the host's NUMA nodes; each one it has must carry numalign's figures for it.
    assert gpus(theirs) and all(gpus(ours_)[z] == v for z, v in gpus(theirs).items())
    assert gpus(ours_)["node-0"] == ("2", "2", "0")  # train holds both GPUs of node 0
