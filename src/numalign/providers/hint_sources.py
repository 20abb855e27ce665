"""When providers describe their hints implicitly, and the provider side of that contract.

Upstream providers list every NUMA mask that can hold a request (2^N - 1 masks). The implicit
generators (providers/fast_hints.py) give the same hints as an ImplicitHints that the implicit merge
queries instead, with identical decisions. Below the threshold the explicit lists are cheaper to
build and merge than the implicit machinery is to set up (on 2 nodes a list has at most 3 hints), so
providers keep upstream's lists there and the decision record shows them in full.

`get_topology_hints` / `get_pod_topology_hints` stay upstream's explicit lists (the HintProvider
protocol, replay and the vectors use them); providers that can answer implicitly also offer
`topology_hint_sources` / `pod_topology_hint_sources`, which the scopes prefer.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from numalign.core.implicit_merge import ProviderSources
from numalign.k8s.pod import Container, Pod

# Providers describe hints implicitly on machines with at least this many NUMA nodes. Both paths
# decide identically (tests/property/test_fast_admission.py); this only chooses the faster one.
# Tests and benchmarks change it through set_implicit_threshold.
_threshold = [5]


def implicit_threshold() -> int:
    return _threshold[0]


def set_implicit_threshold(nodes: int) -> int:
    """Set the NUMA-node count from which hints are implicit (0: always; a huge value: never).
    Returns the previous value so callers can restore it."""
    old = _threshold[0]
    _threshold[0] = nodes
    return old


def use_implicit(numa_node_count: int) -> bool:
    return numa_node_count >= _threshold[0]


@runtime_checkable
class ImplicitHintProvider(Protocol):
    """A provider that can answer with ImplicitHints (same hints as get_*_hints, maybe described)."""

    def topology_hint_sources(self, pod: Pod, container: Container) -> ProviderSources: ...

    def pod_topology_hint_sources(self, pod: Pod) -> ProviderSources: ...
