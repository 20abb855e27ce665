"""The fewest NUMA nodes a pod could use, and the alignment measures built on it."""

from __future__ import annotations

from numalign.cluster.examples import example_cluster, example_workload, gpu_node
from numalign.cluster.fewest import fewest_numa_nodes, needs, zone_allocatable
from numalign.cluster.model import example_config
from numalign.cluster.simulate import RunSpec, run_one
from numalign.k8s.manifest import pods_from_yaml
from numalign.kubelet.node import Node

ZONES = [{"cpu": 30, "memory": 100, "gpu": 2}, {"cpu": 32, "memory": 100, "gpu": 2},
         {"cpu": 32, "memory": 100, "gpu": 0}, {"cpu": 32, "memory": 100}]


def test_fewest_numa_nodes() -> None:
    assert fewest_numa_nodes(ZONES, {}) == 0
    assert fewest_numa_nodes(ZONES, {"cpu": 32}) == 1
    assert fewest_numa_nodes(ZONES, {"cpu": 33}) == 2
    assert fewest_numa_nodes(ZONES, {"gpu": 3, "cpu": 2}) == 2
    assert fewest_numa_nodes(ZONES, {"cpu": 100}) == 4
    assert fewest_numa_nodes(ZONES, {"cpu": 500}) == 4  # never more than the machine has
    assert fewest_numa_nodes(ZONES, {"example.com/nic": 1}) == 0  # a resource no zone reports binds nothing
    many = [{"cpu": 4}] * 16 + [{"cpu": 40}]
    assert fewest_numa_nodes(many, {"cpu": 44}) == 2  # greedy past 12 NUMA nodes


def test_needs_and_zones_of_an_empty_node() -> None:
    zones = zone_allocatable(Node(gpu_node(), example_config()))
    assert [z["cpu"] for z in zones] == [30, 32, 32, 32] and [z["nvidia.com/gpu"] for z in zones] == [2, 2, 2, 2]
    guaranteed, fractional, burstable = pods_from_yaml("""
apiVersion: v1
kind: Pod
metadata: {name: g}
spec: {containers: [{name: c, resources: {limits: {cpu: "40", memory: 1Gi, nvidia.com/gpu: "3"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: f}
spec: {containers: [{name: c, resources: {limits: {cpu: 1500m, memory: 1Gi}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b}
spec: {containers: [{name: c, resources: {requests: {cpu: "1"}, limits: {cpu: "2"}}}]}
""")
    assert needs(guaranteed) == {"cpu": 40, "memory": 1 << 30, "nvidia.com/gpu": 3}
    assert needs(fractional) == {"memory": 1 << 30}  # shared-pool CPUs are bound to no NUMA node
    assert needs(burstable) == {}
    assert fewest_numa_nodes(zones, needs(guaranteed)) == 2


def test_single_numa_node_places_everything_on_the_fewest_and_none_does_not() -> None:
    cluster, workload = example_cluster(), example_workload(3, count=120)
    aligned = run_one(cluster, workload, RunSpec("default"), 3).alignment
    loose = run_one(cluster, workload, RunSpec("default", "LeastAllocated",
                                               (("--topology-manager-policy", "none"),)), 3).alignment
    assert aligned.fewest_share == 1.0 and aligned.guaranteed > 0
    assert loose.fewest_share is not None and loose.fewest_share < 1.0 and loose.fewest < loose.guaranteed
    assert aligned.single_numa <= aligned.fewest
