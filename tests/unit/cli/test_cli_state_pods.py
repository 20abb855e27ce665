"""Pods of a state directory the kubelet wrote: named from a PodResources List by what they hold."""

from __future__ import annotations

from numalign.cli.options.nodeargs import EXAMPLE_CONFIG, state_pods
from numalign.cli.options.nodeargs import data_file as _data
from numalign.k8s.cpuset import parse_cpuset
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.manifest import pods_from_yaml
from numalign.kubelet.node import Node
from numalign.machine.examples import example

POD = """apiVersion: v1
kind: Pod
metadata: {name: db, namespace: shop}
spec:
  containers:
  - {name: main, resources: {limits: {cpu: "2", memory: 1Gi}}}
"""


def test_kubelet_only_pods_are_named_by_their_exclusive_cpus() -> None:
    config = config_from_yaml(_data(EXAMPLE_CONFIG).read_text(encoding="utf-8"))
    node = Node(example("dual-socket"), config)
    pod = pods_from_yaml(POD)[0]
    assert node.admit(pod).result.admit
    del node.pods[pod.uid]  # as a kubelet's directory: the checkpoints know the pod by UID only
    cpus = sorted(parse_cpuset(node.allocation(pod.uid, "main").to_dict()["cpus"]))
    anonymous = state_pods(node)
    assert anonymous[pod.uid]["name"] == f"uid {pod.uid} (in the kubelet's checkpoints only)"
    other = {"name": "web", "namespace": "shop", "containers": [{"name": "main", "cpu_ids": ["9", "10"]}]}
    mine = {"name": "db-7f9c", "namespace": "shop", "containers": [{"name": "main", "cpu_ids": [str(c) for c in cpus]}]}
    named = state_pods(node, {"pod_resources": [other, mine]})
    assert (named[pod.uid]["namespace"], named[pod.uid]["name"]) == ("shop", "db-7f9c")
    assert named[pod.uid]["allocations"]["main"]["exclusive_cpus"] is True


def test_a_container_of_another_name_is_no_match() -> None:
    config = config_from_yaml(_data(EXAMPLE_CONFIG).read_text(encoding="utf-8"))
    node = Node(example("dual-socket"), config)
    pod = pods_from_yaml(POD)[0]
    node.admit(pod)
    del node.pods[pod.uid]
    cpus = sorted(parse_cpuset(node.allocation(pod.uid, "main").to_dict()["cpus"]))
    listed = {"pod_resources": [{"name": "db", "namespace": "shop",
                                 "containers": [{"name": "sidecar", "cpu_ids": [str(c) for c in cpus]}]}]}
    assert state_pods(node, listed)[pod.uid]["namespace"] == "-"
