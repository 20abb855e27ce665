"""NodeResourceTopology export: what the NFD topology-updater publishes, valid against the v1alpha2 CRD."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support.configs import static_node_config

from numalign.cluster.nrt import NodeResourceTopology
from numalign.cluster.nrt_export import node_resource_topology
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


def test_available_counts_what_nfd_watches_guaranteed_or_holding_a_device() -> None:
    """The issue's reproduction: a Burstable pod with a GPU and a Guaranteed pod of 500m CPU and 8Gi.
    NFD's isWatchable (v0.18) watches both: the GPU and the 8Gi the memory manager pinned are taken;
    the fractional pod's CPUs are the shared pool's and are not."""
    node = Node(example("dual-socket"), static_node_config(reserved="0,64"))
    empty = node_resource_topology(node, "n")
    burst = _pod("burst", "{cpu: '2', memory: 1Gi, nvidia.com/gpu: '1'}", "{cpu: '1', memory: 1Gi}")
    assert node.admit(burst).result.admit
    assert node.admit(_pod("frac", "{cpu: 500m, memory: 8Gi}")).result.admit
    nrt = node_resource_topology(node, "n")
    _validate(nrt.to_dict())
    assert nrt.zones != empty.zones
    burst_numa = next(iter(node.allocation(node_uid(node, "burst"), "c").devices["nvidia.com/gpu"].values()))
    assert burst_numa is not None
    assert _res(nrt, burst_numa[0], "nvidia.com/gpu") == (1, 1, 0)
    frac_blocks = node.allocation(node_uid(node, "frac"), "c").memory
    assert [b.size for b in frac_blocks] == [8 * GiB]
    frac_numa = frac_blocks[0].numa_nodes[0]
    _, alloc, avail = _res(nrt, frac_numa, "memory")
    assert alloc - avail == 8 * GiB
    assert [_res(nrt, i, "cpu") for i in range(4)] == [_res(empty, i, "cpu") for i in range(4)]
    # Guaranteed with integral CPUs and a GPU: CPUs, memory and the GPU are all subtracted.
    assert node.admit(_pod("g", "{cpu: '4', memory: 8Gi, nvidia.com/gpu: '1'}")).result.admit
    after = node_resource_topology(node, "n")
    g = node.allocation(node_uid(node, "g"), "c")
    gpu_numa = next(iter(g.devices["nvidia.com/gpu"].values()))
    assert gpu_numa is not None and len(g.cpus) == 4
    assert _res(after, gpu_numa[0], "cpu")[2] == _res(after, gpu_numa[0], "cpu")[1] - 4
    assert _res(after, gpu_numa[0], "nvidia.com/gpu")[2] == 0
    total = [sum(_res(after, i, "memory")[k] for i in range(4)) for k in (1, 2)]
    assert total[0] - total[1] == 16 * GiB
    # A Burstable pod without devices and a BestEffort pod are not watched: nothing changes but the
    # fingerprint, which covers every pod List reports.
    assert node.admit(_pod("web", "{cpu: '1', memory: 1Gi}", "{cpu: 100m, memory: 1Gi}")).result.admit
    later = node_resource_topology(node, "n")
    assert later.zones == after.zones
    assert later.attribute("nodeTopologyPodsFingerprint") != after.attribute("nodeTopologyPodsFingerprint")


def test_attributes_and_the_pod_set_fingerprint() -> None:
    node = Node(example("dual-socket"), static_node_config(reserved="0,64"))
    # No pod at all: the topology-updater publishes no fingerprint (it skips an empty List).
    assert [k for k, _ in node_resource_topology(node, "n").attributes] == [
        "topologyManagerPolicy", "topologyManagerScope"]
    for name in ("jaeger-dpgjk", "nginx-rt684", "envoy-g9m22"):
        pod = pods_from_yaml(f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: production}}
spec:
  containers:
  - {{name: c, image: x}}
""")[0]
        assert node.admit(pod).result.admit
    nrt = node_resource_topology(node, "n")
    # podfingerprint's own golden vector (testdata/compat-tiny-3pods-1ns) for these three pods.
    assert nrt.attributes == (("topologyManagerPolicy", "single-numa-node"), ("topologyManagerScope", "container"),
                              ("nodeTopologyPodsFingerprint", "pfp0v001607b76a0e9d3aeb4"))
    _validate(nrt.to_dict())


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
    old = {**nrt.to_dict(), "apiVersion": "topology.node.k8s.io/v1alpha1"}
    notes: list[str] = []
    assert NodeResourceTopology.from_dict(old, "x", notes.append) == nrt  # the same fields, read as v1alpha2
    assert len(notes) == 1 and "v1alpha1 read as topology.node.k8s.io/v1alpha2" in notes[0]
    bad = {**nrt.to_dict(), "apiVersion": "topology.node.k8s.io/v1beta9"}
    with pytest.raises(InvalidInputError, match=r"expected topology\.node\.k8s\.io/v1alpha2 or"):
        NodeResourceTopology.from_dict(bad, "x")


def test_one_rule_whether_the_qos_class_is_read_or_inferred() -> None:
    """The socket path infers the QoS class from what the kubelet gave a pod; reading it from the pod
    object (as NFD reads it from the API server) subtracts exactly the same amounts, for every shape
    of the built-in mix (Burstable, fractional and integral Guaranteed, GPUs, hugepages)."""
    from dataclasses import replace

    from numalign.cluster.examples import example_workload, gpu_node
    from numalign.cluster.model import example_config
    from numalign.cluster.nrt_export import export, is_watchable, node_pods

    node = Node(gpu_node(), example_config())
    admitted = 0
    for pod in (p for g in example_workload(3, count=60).groups for p in g.pods):
        admitted += node.admit(pod).result.admit
    assert admitted >= 10
    listed = node_pods(node)
    anonymous = [replace(p, pod=None) for p in listed]
    assert [is_watchable(p) for p in listed] == [is_watchable(p) for p in anonymous]
    assert {is_watchable(p) for p in listed} == {(False, False), (True, False), (True, True)}
    cpus = sorted(node.cpu.get_allocatable_cpus())
    memory = [(b.type, b.size, list(b.numa_affinity)) for b in node.memory.get_allocatable_memory()]
    devices = [(r, i, d.topology)
               for r, devs in node.devices.get_allocatable_devices().items() for i, d in devs.items()]
    with_objects = export(node.machine, "n", "single-numa-node", "container", cpus, memory, devices, listed)
    inferred = export(node.machine, "n", "single-numa-node", "container", cpus, memory, devices, anonymous)
    assert inferred.zones == with_objects.zones == node_resource_topology(node, "n").zones


def test_a_guaranteed_pod_holding_nothing_is_watched_and_adds_nothing() -> None:
    from dataclasses import replace

    from numalign.cluster.nrt_export import is_watchable, node_pods

    config = config_from_yaml("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                              "topologyManagerPolicy: best-effort\n")
    node = Node(example("dual-socket"), config)  # CPU manager none, memory manager None: nothing exclusive
    assert node.admit(_pod("g", "{cpu: '2', memory: 1Gi}")).result.admit
    [listed] = node_pods(node)
    assert is_watchable(listed) == (True, True)  # NFD watches it (Guaranteed, integral CPUs) ...
    assert is_watchable(replace(listed, pod=None)) == (False, False)  # ... the socket cannot tell ...
    nrt = node_resource_topology(node, "n")
    assert nrt.zones == node_resource_topology(Node(example("dual-socket"), config), "n").zones  # ... nothing held
