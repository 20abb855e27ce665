"""The provider side of implicit hints (core/implicit): who describes hints, and from which size.

Upstream providers list every NUMA mask that can hold a request (2^N - 1 masks). On machines with
at least `implicit_from_nodes` NUMA nodes numalign's providers describe the same hints as an
ImplicitHints (generators.py) and the policies' merge queries them; below it the explicit lists are
cheaper to build and merge than the implicit machinery is to set up (on 2 nodes a list has at most
3 hints), so providers keep upstream's lists there and the decision record shows them in full. Both
paths decide identically (tests/property/test_fast_admission.py); the size only picks the faster.

Each provider takes `implicit_from_nodes` as a constructor argument (0: always implicit; a huge
value: never). `get_topology_hints` / `get_pod_topology_hints` stay upstream's explicit lists (the
HintProvider protocol, replay and the vectors use them); providers that can answer implicitly also
offer `implicit_topology_hints` / `implicit_pod_topology_hints`, which the scopes prefer.

- generators.py: the CPU, device and memory hints as ImplicitHints (imported by the providers at
  call time: it builds on their modules, whose packages import the providers);
- cpu_queries.py: the CPU hints queried mask by mask (a reference for the generators' tests).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.k8s.pod import Container, Pod

# Providers describe hints implicitly on machines with at least this many NUMA nodes by default.
DEFAULT_IMPLICIT_FROM_NODES = 5

# One resource's hints from a provider that may describe them: upstream's list, or implicit.
ListOrImplicit = list[TopologyHint] | ImplicitHints


@runtime_checkable
class ImplicitHintProvider(Protocol):
    """A provider that can answer with ImplicitHints (same hints as get_*_hints, maybe implicit)."""

    def implicit_topology_hints(self, pod: Pod, container: Container) -> ProviderAnswer: ...

    def implicit_pod_topology_hints(self, pod: Pod) -> ProviderAnswer: ...
