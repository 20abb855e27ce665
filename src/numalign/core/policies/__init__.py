"""The four Topology Manager policies and their options."""

from __future__ import annotations

from numalign.core.numa import NUMAInfo
from numalign.core.policies.base import MergeResult, Policy, PolicyName, ScopeName, is_alignment_guaranteed
from numalign.core.policies.best_effort import BestEffortPolicy, RestrictedPolicy
from numalign.core.policies.none import NonePolicy
from numalign.core.policies.options import PolicyOptions
from numalign.core.policies.single_numa_node import SingleNUMANodePolicy
from numalign.errors import ConfigError

__all__ = [
    "BestEffortPolicy",
    "MergeResult",
    "NonePolicy",
    "Policy",
    "PolicyName",
    "PolicyOptions",
    "RestrictedPolicy",
    "ScopeName",
    "SingleNUMANodePolicy",
    "is_alignment_guaranteed",
    "make_policy",
]


def make_policy(name: str, numa: NUMAInfo, opts: PolicyOptions | None = None) -> Policy:
    """Build a policy by its kubelet name; unknown names get the kubelet's error text."""
    if name == PolicyName.NONE:
        return NonePolicy()
    if name == PolicyName.BEST_EFFORT:
        return BestEffortPolicy(numa, opts)
    if name == PolicyName.RESTRICTED:
        return RestrictedPolicy(numa, opts)
    if name == PolicyName.SINGLE_NUMA_NODE:
        return SingleNUMANodePolicy(numa, opts)
    raise ConfigError(f'unknown policy: "{name}"')
