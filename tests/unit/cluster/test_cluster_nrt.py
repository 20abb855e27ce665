"""NodeResourceTopology export: what the NFD topology-updater publishes, valid against the v1alpha2 CRD."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support.configs import static_node_config

from numalign.cluster.nrt import NodeResourceTopology, node_resource_topology
from numalign.errors import InvalidInputError
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.manifest import pods_from_yaml
from numalign.kubelet.node import Node
from numalign.machine.examples import example

SCHEMA = yaml.safe_load((Path(__file__).parent / "nrt_v1alpha2_openapi_schema.yaml").read_text(encoding="utf-8"))
GiB = 1 << 30


def _closed(schema: Any) -> Any:
    """The schema with unknown fields refused (the API server would prune them silently, which would
    hide a misspelt field): every object with declared properties takes only those."""
    s = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(s)
    return s


def _validate(obj: dict[str, Any]) -> None:
    jsonschema.validate(obj, SCHEMA)
    jsonschema.validate(obj, _closed(SCHEMA))


def _pod(name: str, limits: str, requests: str | None = None) -> Any:
    req = f"\n      requests: {requests}" if requests else ""
    text = f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: t}}
spec:
  containers:
  - name: c
    resources:
      limits: {limits}{req}
"""
    return pods_from_yaml(text)[0]


def _res(nrt: NodeResourceTopology, zone: int, name: str) -> tuple[int, int, int]:
    r = nrt.zones[zone].resource(name)
    assert r is not None, f"{name} missing in zone {zone}"
    return r.capacity, r.allocatable, r.available


def test_empty_node_zones_capacity_allocatable_costs_and_attributes() -> None:
    node = Node(example("dual-socket"), static_node_config(reserved="0,64"))
    nrt = node_resource_topology(node, "worker-1")
    obj = nrt.to_dict()
    _validate(obj)
    assert obj["apiVersion"] == "topology.node.k8s.io/v1alpha2"
    assert obj["metadata"] == {"name": "worker-1"}
    assert [z["name"] for z in obj["zones"]] == ["node-0", "node-1", "node-2", "node-3"]
    assert {z["type"] for z in obj["zones"]} == {"Node"}
    assert obj["zones"][0]["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 11},
                                        {"name": "node-2", "value": 21}, {"name": "node-3", "value": 21}]
    assert obj["attributes"] == [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                                 {"name": "topologyManagerScope", "value": "container"}]
    assert obj["topologyPolicies"] == ["SingleNUMANodeContainerLevel"]
    # CPUs 0 and 64 (reserved) are both on NUMA node 0: capacity counts them, allocatable does not.
    assert _res(nrt, 0, "cpu") == (32, 30, 30)
    assert _res(nrt, 1, "cpu") == (32, 32, 32)
    # Memory: capacity is the node's MemTotal; allocatable the memory manager's (less the reservation on 0).
    cap0, alloc0, avail0 = _res(nrt, 0, "memory")
    cap1, alloc1, _ = _res(nrt, 1, "memory")
    assert cap0 == cap1 == 256 * GiB
    assert alloc1 - alloc0 == 2148 * (1 << 20)
    assert avail0 == alloc0
    assert _res(nrt, 2, "hugepages-1Gi") == (16 * GiB, 16 * GiB, 16 * GiB)
    assert _res(nrt, 3, "nvidia.com/gpu") == (1, 1, 1)
    # Quantities are DecimalSI strings, as resource.NewQuantity(v, DecimalSI) prints them.
    assert obj["zones"][0]["resources"][0] == {"name": "cpu", "capacity": "32", "allocatable": "30", "available": "30"}


def test_available_counts_only_what_the_topology_updater_watches() -> None:
    node = Node(example("dual-socket"), static_node_config(reserved="0,64"))
    # Guaranteed, integral CPUs and a GPU: CPUs, memory and the GPU are subtracted.
    assert node.admit(_pod("g", "{cpu: '4', memory: 8Gi, nvidia.com/gpu: '1'}")).result.admit
    # Guaranteed with a fractional CPU and no device: not watched, nothing subtracted (its memory
    # is pinned by the memory manager all the same: the exporter's blind spot).
    assert node.admit(_pod("frac", "{cpu: 1500m, memory: 4Gi}")).result.admit
    # Burstable with a GPU: not Guaranteed, not watched; the GPU stays "available".
    burst = _pod("burst", "{cpu: '2', memory: 1Gi, nvidia.com/gpu: '1'}", "{cpu: '1', memory: 1Gi}")
    assert node.admit(burst).result.admit
    nrt = node_resource_topology(node, "n")
    _validate(nrt.to_dict())
    g = node.allocation(node_uid(node, "g"), "c")
    assert len(g.cpus) == 4
    gpu_numa = next(iter(g.devices["nvidia.com/gpu"].values()))
    assert gpu_numa is not None
    gpu_zone = gpu_numa[0]
    assert _res(nrt, gpu_zone, "nvidia.com/gpu") == (1, 1, 0)
    assert _res(nrt, gpu_zone, "cpu")[2] == _res(nrt, gpu_zone, "cpu")[1] - 4
    _, alloc, avail = _res(nrt, gpu_zone, "memory")
    assert avail == alloc - 8 * GiB
    # The Burstable pod's GPU is on another node and is still reported available there.
    burst_gpus = node.allocation(node_uid(node, "burst"), "c").devices["nvidia.com/gpu"]
    burst_numa = next(iter(burst_gpus.values()))
    assert burst_numa is not None
    assert _res(nrt, burst_numa[0], "nvidia.com/gpu") == (1, 1, 1)
    total_mem_avail = sum(_res(nrt, i, "memory")[2] for i in range(4))
    total_mem_alloc = sum(_res(nrt, i, "memory")[1] for i in range(4))
    assert total_mem_alloc - total_mem_avail == 8 * GiB


def node_uid(node: Node, name: str) -> str:
    return next(p.uid for p in node.pods.values() if p.name == name)


def test_none_policies_report_no_cpu_or_memory_allocatable() -> None:
    config = config_from_yaml("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                     "topologyManagerPolicy: best-effort\ntopologyManagerScope: pod\n")
    nrt = node_resource_topology(Node(example("dual-socket"), config), "n")
    _validate(nrt.to_dict())
    assert nrt.topology_policies == ("BestEffortPodLevel",)
    # Devices are allocatable, CPUs and memory are not (nonePolicy.GetAllocatableCPUs is empty).
    assert nrt.zones[0].resource("cpu") is None
    assert nrt.zones[0].resource("memory") is None
    assert _res(nrt, 0, "nvidia.com/gpu") == (1, 1, 1)


def test_round_trip_and_bad_objects() -> None:
    node = Node(example("epyc-nps4"), static_node_config(reserved="0"))
    nrt = node_resource_topology(node, "w")
    back = NodeResourceTopology.from_dict(nrt.to_dict(), "dump.json: items[0]")
    assert back == nrt
    with pytest.raises(InvalidInputError, match=r"dump.json: items\[0\]: expected a NodeResourceTopology"):
        NodeResourceTopology.from_dict({"kind": "Node"}, "dump.json: items[0]")
    bad = nrt.to_dict()
    bad["apiVersion"] = "topology.node.k8s.io/v1alpha1"
    with pytest.raises(InvalidInputError, match=r"expected topology\.node\.k8s\.io/v1alpha2"):
        NodeResourceTopology.from_dict(bad, "x")
