"""Copies of an in-process Node to ask "what if" without touching the node (or its state files).

A copy shares nothing mutable with the original: providers, scope, pods and records are deep-copied;
metrics start empty; the copy never writes state files. Variants change what a kubelet restart with
another configuration would change, and keep every allocation already made (the kubelet keeps its
CPU, memory and device state files across such a restart):

* the Topology Manager's policy, scope or options: a new TopologyManager over the same providers;
* the CPU manager's full-pcpus-only option;
* node conditions and the pods limit (the eviction and predicate handlers).

Nodes whose device plugins are real processes (`numalign serve`) are not copied: their endpoints hold
live connections.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from numalign import metrics as m
from numalign.kubelet.admission.eviction import NodeCondition
from numalign.kubelet.admission.handlers import AdmitHandlers
from numalign.kubelet.cpumanager.options import validate_static_policy_options
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.node import Node
from numalign.kubelet.topologymanager.manager import TopologyManager


def _shared(node: Node) -> list[object]:
    """Immutable values a copy may share (and must: machines hold read-only mappings deepcopy refuses)."""
    from numalign.kubelet.devicemanager import endpoint

    machine = node.machine
    return [machine, *machine.numa_nodes, *machine.cpus, *machine.devices, node.config, node.numa,
            *node.pods.values(), *node.records.values(), getattr(endpoint, "_EMPTY", None)]


def node_copy(node: Node) -> Node:
    memo: dict[int, Any] = {id(node.metrics): m.Metrics()}
    for value in _shared(node):
        if value is not None:
            memo[id(value)] = value
    if node.store is not None:
        memo[id(node.store)] = node.store  # not copied: the copy gets none (below) and never writes
    lock = getattr(node.tm.scope, "_lock", None)
    if lock is not None:
        memo[id(lock)] = threading.Lock()
    twin = copy.deepcopy(node, memo)
    twin.store = None
    twin._tx = None
    return twin


def with_topology_manager(
    node: Node, policy: str | None = None, scope: str | None = None, options: Mapping[str, str] | None = None
) -> Node:
    """A copy whose Topology Manager runs another policy, scope or options (ConfigError when the kubelet
    would refuse to start with them)."""
    twin = node_copy(node)
    config = dataclasses.replace(
        node.config,
        topology_manager_policy=policy if policy is not None else node.config.topology_manager_policy,
        topology_manager_scope=scope if scope is not None else node.config.topology_manager_scope,
        topology_manager_policy_options=dict(options if options is not None
                                             else node.config.topology_manager_policy_options),
    )
    config.validate()
    tm = TopologyManager(twin.numa, config.topology_manager_policy, config.topology_manager_scope,
                         config.topology_manager_policy_options, config.feature_gates, twin.metrics)
    if isinstance(twin.cpu, StaticPolicy):
        topo = twin.cpu.topology
        validate_static_policy_options(twin.cpu.options, topo.num_sockets, topo.num_numa_nodes,
                                       config.topology_manager_policy)
    for provider in twin.tm.providers:
        tm.add_hint_provider(provider)
        if hasattr(provider, "affinity"):
            provider.affinity = tm
    twin.tm = tm
    twin.config = config
    return twin


def without_full_pcpus_only(node: Node) -> Node | None:
    """A copy whose static CPU manager policy drops full-pcpus-only (None when it is not set)."""
    if not isinstance(node.cpu, StaticPolicy) or not node.cpu.options.full_pcpus_only:
        return None
    twin = node_copy(node)
    assert isinstance(twin.cpu, StaticPolicy)
    relaxed = dataclasses.replace(node.cpu.options, full_pcpus_only=False)
    twin.cpu.options = relaxed
    twin.cpu._take = relaxed.take_options()  # the policy's cached form of its options
    opts = dict(node.config.cpu_manager_policy_options)
    opts.pop("full-pcpus-only", None)
    twin.config = dataclasses.replace(node.config, cpu_manager_policy_options=opts)
    return twin


def with_handlers(node: Node, conditions: Sequence[NodeCondition] | None = None, max_pods: int | None = None) -> Node:
    """A copy with other node conditions or another pods limit."""
    twin = node_copy(node)
    if max_pods is not None:
        twin.config = dataclasses.replace(node.config, max_pods=max_pods, pods_per_core=0)
    twin.handlers = AdmitHandlers(twin, node.handlers.conditions if conditions is None else conditions)
    return twin


def without_pods(node: Node, uids: Sequence[str]) -> Node:
    """A copy from which these pods were evicted (everything they held released)."""
    twin = node_copy(node)
    for uid in uids:
        twin.remove(uid)
    return twin
