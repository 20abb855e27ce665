"""The contract between the Topology Manager and its hint providers (upstream HintProvider), and its
implicit extension.

Upstream providers list every NUMA mask that can hold a request (2^N - 1 masks). On machines with at
least `implicit_from_nodes` NUMA nodes numalign's providers describe the same hints as an ImplicitHints
(each manager's implicit_hints.py) and the policies' merge queries them; below it the explicit lists are
cheaper to build and merge than the implicit machinery is to set up, so providers keep upstream's lists
there and the decision record shows them in full. Both paths decide identically
(tests/property/test_fast_admission.py); the size only picks the faster. `get_topology_hints` /
`get_pod_topology_hints` stay upstream's explicit lists (replay and the vectors use them); providers that
can answer implicitly also offer `implicit_topology_hints` / `implicit_pod_topology_hints`, which the
scopes prefer.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, TypeVar, runtime_checkable

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.errors import PluginError
from numalign.k8s.pod import Container, Pod


class AffinityStore(Protocol):
    """What providers read back at Allocate time: the merged hint stored for a container."""

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint: ...


@runtime_checkable
class HintProvider(Protocol):
    """A resource manager the Topology Manager coordinates (CPU, memory, devices).

    get_*_hints return None / {} for "no preference"; a resource mapped to None means "don't care",
    mapped to [] means "cannot be satisfied". `allocate` raises numalign.errors.AllocationError
    (with `reason` set for errors that carry a kubelet Type(), e.g. SMTAlignmentError).
    """

    name: str

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints: ...

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints: ...

    def allocate(self, pod: Pod, container: Container) -> None: ...

    def remove_container(self, pod_uid: str, container_name: str) -> None: ...


# Providers describe hints implicitly on machines with at least this many NUMA nodes by default.
DEFAULT_IMPLICIT_FROM_NODES = 5

# One resource's hints from a provider that may describe them: upstream's list, or implicit.
ListOrImplicit = list[TopologyHint] | ImplicitHints


@runtime_checkable
class ImplicitHintProvider(Protocol):
    """A provider that can answer with ImplicitHints (same hints as get_*_hints, maybe implicit)."""

    def implicit_topology_hints(self, pod: Pod, container: Container) -> ProviderAnswer: ...

    def implicit_pod_topology_hints(self, pod: Pod) -> ProviderAnswer: ...


class PluginCall(Protocol):
    """A call to a plugin that a provider's Allocate makes midway (the device manager's plugin Allocate):
    the provider yields it, its caller makes it (`make`) and sends the answer back, or throws the
    PluginError it raised."""

    def make(self) -> Any: ...


_R = TypeVar("_R")

# A provider's Allocate, or an admission, as the steps between its plugin calls (see PluginCall).
CallSteps = Generator[PluginCall, Any, _R]


@runtime_checkable
class SteppedProvider(Protocol):
    """A provider whose Allocate makes plugin calls (the device manager): `allocate_steps` yields each one
    where the kubelet makes it, so the admission can make it at once or pause there."""

    def allocate_steps(self, pod: Pod, container: Container) -> CallSteps[None]: ...


def make_calls_now(steps: CallSteps[_R]) -> _R:
    """Drive steps making each plugin call at once, as the kubelet does; a plugin's PluginError goes back
    into the steps, whose provider ends its Allocate there as upstream's does."""
    try:
        call = next(steps)
        while True:
            try:
                answer = call.make()
            except PluginError as e:
                call = steps.throw(e)
            else:
                call = steps.send(answer)
    except StopIteration as done:
        result: _R = done.value
        return result
