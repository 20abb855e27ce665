"""The Topology Manager's start-up checks (upstream NewManager), shared by every way numalign builds
a policy: a node, the agent, and `numalign replay`.

Upstream's order (topology_manager.go NewManager, 1.31+), errors included: policy none short-circuits
before anything is checked (its options are not even parsed); otherwise the policy options are parsed
(NewPolicyOptions), then the NUMA information is built (NewNUMAInfo, which with
prefer-closest-numa-nodes needs every node's distances, for single-numa-node too although that policy
never uses them), then machines with more NUMA nodes than max-allowable-numa-nodes are refused, then
the policy is chosen by name. A kubelet that fails any of these does not start; numalign raises
StartupError with the kubelet's text first and the fix after a semicolon.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from numalign.core.numa import NUMAInfo
from numalign.core.policies import NonePolicy, Policy, PolicyName, PolicyOptions, make_policy
from numalign.core.policies.options import Maturity
from numalign.errors import ConfigError


class StartupError(ConfigError):
    """The kubelet would not start: `kubelet_message` is its error text, `fix` what to change."""

    def __init__(self, kubelet_message: str, fix: str) -> None:
        super().__init__(f"{kubelet_message}; {fix}")
        self.kubelet_message = kubelet_message
        self.fix = fix

    def __reduce__(self) -> tuple[type[StartupError], tuple[str, str]]:
        # Raised in simulate's worker processes too: pickled back with both arguments.
        return (StartupError, (self.kubelet_message, self.fix))


@dataclass(frozen=True)
class StartedPolicy:
    policy: Policy
    opts: PolicyOptions


def start_policy(
    name: str,
    numa: NUMAInfo,
    options: Mapping[str, str] | None = None,
    gates: Mapping[str, bool] | None = None,
    maturity: Mapping[str, Maturity] | None = None,
) -> StartedPolicy:
    """Build the named policy as the kubelet's NewManager would, or raise the kubelet's start-up error.
    `maturity`: the kubelet version's option graduation (default: the newest release's, OPTION_MATURITY)."""
    if name == PolicyName.NONE:
        return StartedPolicy(NonePolicy(), PolicyOptions())
    opts = PolicyOptions.parse(options, gates, maturity)
    if opts.prefer_closest_numa and not numa.has_all_distances():
        raise StartupError(
            "cannot discover NUMA topology: error getting NUMA distances from cadvisor",
            "prefer-closest-numa-nodes needs a distance row for every NUMA node (under every policy but "
            "none); give the machine's distance matrix or drop the option",
        )
    if opts.prefer_closest_numa and (short := numa.short_rows()):
        node, length = short[0]
        raise StartupError(
            f"NUMA node {node}'s distance row has {length} entries, but the node ids reach {max(numa.nodes)}: the "
            "kubelet starts, then crashes (index out of range) at the first admission that compares NUMA masks",
            "the kubelet keeps each row as sysfs writes it (one entry per online node) and indexes it by node "
            "id, so sparse node ids reach past the row; drop prefer-closest-numa-nodes on this machine",
        )
    if len(numa.nodes) > opts.max_allowable_numa_nodes:
        raise StartupError(
            f"unsupported on machines with more than {opts.max_allowable_numa_nodes} NUMA Nodes",
            f"this machine has {len(numa.nodes)}; raise the limit with the topology manager policy option "
            f"max-allowable-numa-nodes={len(numa.nodes)} (topologyManagerPolicyOptions in the kubelet config; "
            f"on numalign's command line --policy-option max-allowable-numa-nodes={len(numa.nodes)})",
        )
    return StartedPolicy(make_policy(name, numa, opts), opts)


def refuse_node_minus_one(nodes: Sequence[int], topology_policy: str) -> None:
    """The kubelet starts on a machine holding NUMA node -1 (cadvisor's node for an unknown physical
    package id when sysfs has no node directory) under any Topology Manager policy but none, then
    panics at its first pod: its NUMA bitmask holds bits 0-63 only, NewBitMask(-1) fails, the error is
    ignored, and the merge (bitmask.And over DefaultAffinityMask()) dereferences the nil mask. Policy
    none never builds a mask: it runs, with the CPU manager (none or static) and the device manager.
    Called once every manager has started, so the kubelet's own start errors come first."""
    if -1 in nodes and topology_policy != PolicyName.NONE:
        raise StartupError(
            f"the kubelet starts on this machine (NUMA node -1), then panics at its first pod admission: topology "
            f"manager policy {topology_policy} merges hints from bitmask.NewBitMask(-1), which fails (bits 0-63), "
            "and the nil mask is dereferenced",
            "use topology manager policy none (topologyManagerPolicy: none, --topology-manager-policy none) on a "
            "machine without a NUMA node directory",
        )


def refuse_static_memory_on_node_minus_one(nodes: Sequence[int]) -> None:
    """The memory manager's Static policy on NUMA node -1: its NewManager checks pass (reservedMemory
    may name node -1), then the first Guaranteed pod's hints iterate NUMA masks over [-1]
    (GetTopologyHints, or getDefaultHint under policy none): the nil mask from NewBitMask(-1) panics.
    (Node -1 never has memory of its own, so the default machine state would also wrap around.)"""
    if -1 in nodes:
        raise StartupError(
            "the kubelet starts on this machine (NUMA node -1), then panics at its first Guaranteed pod's "
            "admission: the memory manager's Static policy builds NUMA masks over node -1 "
            "(bitmask.NewBitMask(-1) fails, and the nil mask is dereferenced)",
            "use memory manager policy None (memoryManagerPolicy: None, --memory-manager-policy None) on a "
            "machine without a NUMA node directory",
        )
