"""The previews of open proposals: each changes a decision exactly as its PR says, on a small crafted
machine, and only when asked for (the same node without the preview decides as upstream does today)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from numalign.adapters.sysfs import load_machine
from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.kubeletconfig_read import config_from_dict
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.k8s.previews import parse_weights
from numalign.kubelet.node import Node
from numalign.kubelet.previews import NO_PREVIEWS, Previews
from numalign.kubelet.previews.cpu_numa_nodes import effective_machine
from numalign.kubelet.previews.numa_allocation import aggregate, utilisation_score
from numalign.machine.examples import example
from numalign.machine.topology import Device

# 2 NUMA nodes x 4 cores x 2 threads: node 0 = CPUs 0-3,8-11, node 1 = 4-7,12-15; CPU 0 reserved.
TWO_NODES = "1s x 2n x 4c x 2t, 8Gi/node"


def _config(**fields: Any) -> Any:
    return config_from_dict({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                             "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                             "topologyManagerPolicy": "single-numa-node", **fields}, "test")


def _pod(name: str, cpus: int, extra: dict[str, str] | None = None) -> Pod:
    limits = {"cpu": str(cpus), "memory": "256Mi", **(extra or {})}
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name},
                          "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}, name)


def _numa_of(node: Node, pod: Pod) -> set[int]:
    cpus = node.allocation(pod.uid, "c").cpus
    return {c.numa_node for c in node.machine.cpus if c.id in cpus and c.numa_node is not None}


def _after_draining_node0(previews: Previews) -> Node:
    """Node 1 holds one 2-CPU pod, node 0 nothing: the lowest-id tie-break and the scores disagree."""
    node = Node(load_machine(TWO_NODES), _config(), previews=previews)
    # On the empty node both single nodes score 1 (a tie for every strategy): node 0, filled whole.
    filler = _pod("filler", 7)
    assert node.admit(filler).result.admit and _numa_of(node, filler) == {0}
    keep = _pod("on-node-1", 2)  # only node 1 has room now
    assert node.admit(keep).result.admit and _numa_of(node, keep) == {1}
    node.remove(filler.uid)
    return node


@pytest.mark.parametrize(("strategy", "expected"), [(None, {0}), ("none", {0}), ("most-allocated", {1}),
                                                    ("least-allocated", {0})])
def test_numa_allocation_strategy_breaks_the_tie_by_allocation(strategy: str | None, expected: set[int]) -> None:
    # Both single nodes fit a 2-CPU pod: upstream takes node 0 (lowest id). Node 1 scores 2*100/8 = 25,
    # node 0 scores max(1, 0) = 1: most-allocated packs onto node 1, least-allocated spreads to node 0.
    previews = Previews.parse([f"numa-allocation-strategy={strategy}"]) if strategy else NO_PREVIEWS
    node = _after_draining_node0(previews)
    pod = _pod("new", 2)
    assert node.admit(pod).result.admit
    assert _numa_of(node, pod) == expected


def test_least_allocated_spreads_on_an_empty_node() -> None:
    plain = Node(load_machine(TWO_NODES), _config())
    spread = Node(load_machine(TWO_NODES), _config(), previews=Previews.parse(["numa-allocation-strategy="
                                                                               "least-allocated"]))
    got: dict[str, list[set[int]]] = {"plain": [], "spread": []}
    for i in range(3):
        for name, node in (("plain", plain), ("spread", spread)):
            pod = _pod(f"p{i}", 2)
            assert node.admit(pod).result.admit
            got[name].append(_numa_of(node, pod))
    assert got["plain"] == [{0}, {0}, {0}]
    # The first pod ties (both score 1): node 0. Then node 0 scores 2*100/7 = 28 > 1, so node 1; then
    # node 1 scores 25 < 28, so node 1 again.
    assert got["spread"] == [{0}, {1}, {1}]


def test_scores_and_weights_follow_the_kep_formulas() -> None:
    assert utilisation_score(0, 8) == 1 and utilisation_score(2, 7) == 28 and utilisation_score(3, 0) == 0
    assert parse_weights(" cpu=3, memory=1,,nvidia.com/gpu=6 ,", "w") == {"cpu": 3, "memory": 1, "nvidia.com/gpu": 6}
    for bad in ("cpu", "=3", "cpu=x", "cpu=101", "cpu=-1"):
        with pytest.raises(InvalidInputError):
            parse_weights(bad, "w")
    from numalign.kubelet.previews.numa_allocation import _Scored

    perm = [_Scored(1, True, 60), _Scored(1, True, 20), _Scored(None, True, 90), _Scored(1, True, 0)]
    names = ["cpu", "memory", "x", "y"]
    assert aggregate(perm, names, {}) == 40  # (60 + 20) / 2: nil masks and unscored hints take no part
    assert aggregate(perm, names, {"cpu": 3}) == 50  # (3*60 + 20) / 4
    assert aggregate(perm, names, {"cpu": 0, "memory": 0}) == 0  # nothing contributes: unscored


def test_previews_refuse_what_they_do_not_know() -> None:
    for spec, words in (("nope", "no preview named 'nope'"), ("numa-allocation-strategy=packed", "not a value"),
                        ("numa-score-weights=cpu=3", "weights only act with")):
        with pytest.raises(InvalidInputError, match=words):
            Previews.parse([spec])
    assert Previews.parse(["numa-allocation-strategy"]).values == {"numa-allocation-strategy": "most-allocated"}
    assert not Previews.parse(["numa-allocation-strategy=none"])


@pytest.mark.parametrize("spec", ["numa-allocation-strategy=" + "x" * 100_000, "y" * 100_000,
                                  "numa-allocation-strategy=most-allocated", "numa-score-weights=cpu=" + "9" * 100_000])
def test_a_huge_preview_value_is_named_once_and_cut(spec: str) -> None:
    """A 100,000-character --preview value was echoed twice in full (200 kB of error line)."""
    specs = [spec] if "weights" not in spec else ["numa-allocation-strategy=most-allocated", spec]
    if spec == "numa-allocation-strategy=most-allocated":
        assert Previews.parse(specs)
        return
    with pytest.raises(InvalidInputError) as caught:
        Previews.parse(specs)
    message = str(caught.value)
    assert len(message) < 600 and "(100000 characters)" in message and message.count("x" * 50) <= 1


def _gb200_with_hbm_gpus() -> Any:
    """The built-in GB200 node with its GPUs reported on HBM (CPU-less) NUMA nodes, as
    dra-driver-nvidia-gpu#1242 describes; the distance rows say which CPU node each HBM node hangs off."""
    m = example("gb200")
    rows = {n.id: list(n.distances or ()) for n in m.numa_nodes}
    rows[2][1], rows[1][2] = 20, 20  # HBM node 2 hangs off node 1
    rows[10][0], rows[0][10] = 20, 20  # HBM node 10 off node 0
    nodes = tuple(dataclasses.replace(n, distances=tuple(rows[n.id])) for n in m.numa_nodes)
    gpus = (Device("gpu-a", "nvidia.com/gpu", (2,)), Device("gpu-b", "nvidia.com/gpu", (10,)))
    return dataclasses.replace(m, numa_nodes=nodes, devices=gpus)


def test_restrict_to_cpu_numa_nodes_projects_devices_onto_the_nearest_cpu_node() -> None:
    m = _gb200_with_hbm_gpus()
    seen = effective_machine(m)
    assert seen.numa_ids() == [0, 1] and seen.numa_nodes[0].distances == (10, 40)
    assert {d.id: d.numa_nodes for d in seen.devices} == {"gpu-a": (1,), "gpu-b": (0,)}
    assert effective_machine(example("dual-socket")) == example("dual-socket")  # every node has CPUs


def test_restrict_to_cpu_numa_nodes_changes_the_decision() -> None:
    m = _gb200_with_hbm_gpus()
    config = _config(topologyManagerPolicy="restricted", reservedSystemCPUs="0-1")
    # Upstream: 34 NUMA nodes, over the default max-allowable-numa-nodes of 8, so the kubelet refuses to start.
    with pytest.raises(ConfigError, match="more than 8 NUMA Nodes"):
        Node(m, config)
    node = Node(m, config, previews=Previews.parse(["restrict-to-cpu-numa-nodes"]))
    assert len(node.numa.nodes) == 2
    pod = _pod("gpu", 4, {"nvidia.com/gpu": "1"})
    rec = node.admit(pod)
    assert rec.result.admit
    # The GPU projected onto node 0 (gpu-b, HBM node 10) is the preferred single-node hint, lowest id.
    assert rec.allocations["c"].devices == {"nvidia.com/gpu": {"gpu-b": (0,)}}
    assert _numa_of(node, pod) == {0}


def test_nodes_of_one_machine_share_the_effective_machine_and_its_cpu_topology() -> None:
    # A simulated pool's nodes share one Machine; with memory-only nodes dropped they must still share
    # one effective Machine, so the CPU topology and its hint tables are built once, not per node.
    m = example("gb200")
    pv = Previews.parse(["restrict-to-cpu-numa-nodes"])
    cfg = _config()
    a, b = Node(m, cfg, previews=pv), Node(m, cfg, previews=pv)
    assert len(a.machine.numa_nodes) < len(m.numa_nodes)
    assert a.machine is b.machine and a.cpu.topology is b.cpu.topology
    assert effective_machine(m) is effective_machine(m)
