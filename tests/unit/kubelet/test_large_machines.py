"""Admission on 16- to 64-NUMA-node machines: refused above max-allowable-numa-nodes as the kubelet
does, and correctly aligned once the limit is raised (implicit hints, no 2^N walk; benchmarks/ times it)."""

from __future__ import annotations

import json
import tarfile
import tempfile
from functools import cache
from pathlib import Path

import pytest
from support.configs import static_node_config
from support.shared import hwloc_linux_dir

from numalign.adapters.sysfs import discover_sysfs_hwloc, find_sysfs_root
from numalign.answer.present.admit import record_text
from numalign.core.bitmask import bits_of
from numalign.errors import ConfigError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.node import Node
from numalign.kubelet.topologymanager.provider import ImplicitHintProvider
from numalign.machine.examples import example
from numalign.machine.topology import Machine

Q = Quantity.parse

RAISED = '"max-allowable-numa-nodes": "64"'
MACHINES = ["snc-16", "gb200", "numa-64", "hwloc:128ia64-17n4s2c", "hwloc:256ia64-64n2s2c"]


@cache
def machine(name: str) -> Machine:
    if name.startswith("hwloc:"):
        # These dumps link nodeN/cpuM to the node itself, so the kubelet's reading finds no CPU there
        # (test_kubelet_view_dumps.py); hwloc's reading gives the large real topologies wanted here.
        with tempfile.TemporaryDirectory(prefix="numalign-large-") as dest:
            with tarfile.open(hwloc_linux_dir() / f"{name[6:]}.tar.bz2") as tf:
                tf.extractall(dest, filter="data")
            return discover_sysfs_hwloc(find_sysfs_root(Path(dest)))
    return example(name)


def config(policy: str, scope: str = "container", options: str = RAISED) -> KubeletConfig:
    return static_node_config(policy, scope, options)


def guaranteed(uid: str, cpus: int, mem_gi: int, devices: dict[str, int] | None = None) -> Pod:
    limits = {"cpu": Q(str(cpus)), "memory": Q(f"{mem_gi}Gi")}
    limits.update({r: Q(str(n)) for r, n in (devices or {}).items()})
    app = Container("app", requests=dict(limits), limits=limits)
    return Pod(name=uid, uid=uid, containers=(app,))


def device_resource(m: Machine) -> str | None:
    with_nodes = sorted({d.resource for d in m.devices if d.numa_nodes})
    return with_nodes[0] if with_nodes else None


@pytest.mark.parametrize("name", MACHINES)
def test_more_than_eight_nodes_are_refused_unless_the_limit_is_raised(name: str) -> None:
    m = machine(name)
    assert len(m.numa_ids()) > 8
    with pytest.raises(ConfigError, match="max-allowable-numa-nodes"):
        Node(m, config("best-effort", options=""))
    # policy none never looks at the NUMA count, as upstream
    Node(m, config("none", options=""))


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
@pytest.mark.parametrize("name", MACHINES)
def test_guaranteed_pods_are_admitted_aligned_and_fast(name: str, policy: str) -> None:
    m = machine(name)
    node = Node(m, config(policy))
    res = device_resource(m)
    pod = guaranteed("p1", 4, 2, {res: 1} if res else None)
    rec = node.admit(pod)
    assert rec.result.admit, record_text(rec)
    merged = rec.decisions[0].merged
    assert merged is not None and merged.mask is not None and merged.preferred
    nodes = set(bits_of(merged.mask))
    alloc = node.allocation("p1", "app")
    assert len(alloc.cpus) == 4 and alloc.exclusive
    cpu_nodes = {m.cpu(c).numa_node for c in alloc.cpus}
    assert cpu_nodes <= nodes
    assert all(set(b.numa_nodes) <= nodes for b in alloc.memory)
    for devs in alloc.devices.values():
        for topo in devs.values():
            assert topo is not None and nodes & set(topo)
    # the record describes implicit lists instead of listing up to 2^64 masks, and is JSON
    text = json.dumps(rec.to_dict())
    assert '"implicit": true' in text and len(text) < 20_000


@pytest.mark.parametrize("name", MACHINES)
def test_filling_and_draining_keeps_every_cpu_accounted_for(name: str) -> None:
    m = machine(name)
    node = Node(m, config("best-effort", "pod"))
    assert isinstance(node.cpu, StaticPolicy)
    all_cpus = set(node.cpu.topology.details.cpus())
    admitted: list[str] = []
    taken: set[int] = set()
    for i in range(12):
        rec = node.admit(guaranteed(f"p{i}", 1 + (i * 7) % 24, 1 + i % 5))
        if rec.result.admit:
            admitted.append(f"p{i}")
            own = set(node.allocation(f"p{i}", "app").cpus)
            assert not own & taken
            taken |= own
    assert admitted
    assert taken | set(node.cpu.get_default_cpu_set()) == all_cpus
    for uid in admitted:
        node.remove(uid)
    assert set(node.cpu.get_default_cpu_set()) == all_cpus


def test_single_numa_node_rejects_what_no_node_holds_and_explains_it() -> None:
    node = Node(machine("numa-64"), config("single-numa-node"))
    # a numa-64 node has 16 CPUs: 20 cannot fit on one node
    rec = node.admit(guaranteed("big", 20, 1))
    assert not rec.result.admit
    assert rec.result.reason == "TopologyAffinityError"
    assert any("single NUMA node" in e or "do not agree" in e for e in rec.decisions[0].explanation)


def test_restricted_rejection_explains_implicit_lists_without_listing_them() -> None:
    node = Node(machine("gb200"), config("restricted"))
    # both providers answer implicitly where the machine is large
    assert isinstance(node.memory, ImplicitHintProvider) and isinstance(node.devices, ImplicitHintProvider)
    # 100 CPUs need both Grace nodes; memory and the GPU prefer one node: no common preferred mask
    rec = node.admit(guaranteed("x", 100, 1, {"nvidia.com/gpu": 1}))
    assert rec.result.reason == "TopologyAffinityError"
    why = " ".join(rec.decisions[0].explanation)
    assert "cpu/cpu prefers {0,1}" in why
    assert "memory/memory prefers masks of 1 node(s) within {0-33}" in why
    assert "any mask of nodes {0-33}" in record_text(rec)
    providers = {p["provider"]: p for p in rec.to_dict()["decisions"][0]["providers"]}
    doc = providers["memory"]["hints"]["memory"]
    assert doc["implicit"] is True and doc["nodes"] == list(range(34)) and doc["preferred_counts"] == [1]
