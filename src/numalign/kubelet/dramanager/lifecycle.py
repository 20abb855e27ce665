"""A pod's claims around its admission, the one implementation `admit`, `serve` and the simulated
cluster's kubelets share: allocate before the kubelet admits the pod (the scheduler's allocator, given
by the composition: kube-scheduler and the kubelet are separate programs, so this layer never imports
it), commit after an admission (the claims are reserved for the pod in the node's DRA manager, and so
written with the pod record), release when the pod is removed or replaced (Node.remove does).

    life = ClaimLifecycle(node.dra, objects, lambda view: NodeDRA(view, "node-a", version=...))
    outcome = life.allocate(pod)            # None: the pod uses no claim
    ...node.admit(pod)...
    life.commit(outcome)                    # only for an admitted pod whose claims were allocated
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Generic, NamedTuple, Protocol, TypeVar

from numalign.errors import NumalignError
from numalign.k8s.dra.types import DRAObjects, ResourceClaim
from numalign.k8s.pod import Pod
from numalign.kubelet.dramanager.manager import DRAManager


class Failure(Protocol):
    """Why the allocator could not allocate a pod's claims (scheduler.dra.api.AllocationFailure)."""

    def line(self) -> str: ...


class Outcome(Protocol):
    """A pod's claims as the scheduler's allocator answered (scheduler.dra.scheduling.PodClaims)."""

    @property
    def pod(self) -> Pod: ...

    @property
    def failure(self) -> Failure | None: ...

    def allocated_claims(self) -> tuple[ResourceClaim, ...]: ...

    def reasons(self) -> tuple[str, ...]:
        """Why the claims do not fit, where the allocator says only `cannot allocate all claims` and the
        ledger explains (() otherwise)."""
        ...


class Unallocatable(NamedTuple):
    """A pod whose claims could not be allocated: the allocator's line (or the claim or template missing
    from the input), and why, where the allocator says only `cannot allocate all claims`."""

    pod: Pod
    message: str
    why: tuple[str, ...] = ()


OutcomeT = TypeVar("OutcomeT", bound=Outcome)
OutcomeT_co = TypeVar("OutcomeT_co", bound=Outcome, covariant=True)


class Ledger(Protocol[OutcomeT_co]):
    """The scheduler's view of one node (scheduler.dra.scheduling.NodeDRA)."""

    @property
    def objects(self) -> DRAObjects: ...

    def allocate(self, pod: Pod, claims: Sequence[ResourceClaim] | None = None) -> OutcomeT_co | None: ...

    def update_claims(self, claims: Mapping[str, ResourceClaim]) -> None: ...


class ClaimLifecycle(Generic[OutcomeT]):
    def __init__(self, manager: DRAManager, given: DRAObjects,
                 ledger_for: Callable[[DRAObjects], Ledger[OutcomeT]]) -> None:
        """`given`: the DRA objects read from the user's files; `ledger_for(view)`: the scheduler's view of
        this node over `view` (the given objects with what the manager holds)."""
        self.manager = manager
        self.given = given
        self._ledger_for = ledger_for
        self._ledger: Ledger[OutcomeT] | None = None
        self._built_at = -1

    @property
    def ledger(self) -> Ledger[OutcomeT]:
        """The scheduler's view as the node holds its claims now (built again after any change)."""
        if self._ledger is None or self._built_at != self.manager.generation:
            self._ledger = self._ledger_for(self.manager.view(self.given))
            self._built_at = self.manager.generation
        return self._ledger

    def set_given(self, given: DRAObjects) -> None:
        """Other objects read (the agent's manifest directory changed)."""
        self.given = given
        self._ledger = None

    def holds(self, pod: Pod) -> bool:
        """Whether the pod reserves claims already (admitted earlier, restored after a restart)."""
        return bool(self.manager.claims_of(pod.uid))

    def allocate(self, pod: Pod) -> OutcomeT | None:
        """Before admission: the pod's claims allocated on this node; None when it uses none."""
        return self.ledger.allocate(pod)

    def commit(self, outcome: OutcomeT) -> None:
        """After admission: the admitted pod's claims are reserved for it (a failed allocation holds nothing)."""
        if outcome.failure is None:
            allocated = outcome.allocated_claims()
            current = self._ledger is not None and self._built_at == self.manager.generation
            self.manager.reserve(outcome.pod, allocated)
            if current and self._ledger is not None:
                # The view changes in these claims only: the n-th pod's commit costs its own claims, not
                # a view built again over the n-1 claims before it.
                self._ledger.update_claims(self.manager.seen(self.given, (c.key for c in allocated)))
                self._built_at = self.manager.generation

    def allocate_missing(self, pods: Sequence[Pod], skip: Collection[str] = ()) -> list[Unallocatable]:
        """For pods admitted without the scheduler (static pods): allocate and reserve, in admission order,
        the claims of each pod that reserves none yet (and is not in `skip`). The pods whose claims could
        not be allocated, with why (the allocator's line, or a claim or template missing from the input)."""
        failed: list[Unallocatable] = []
        for pod in pods:
            if not pod.resource_claims or pod.uid in skip or self.holds(pod):
                continue
            try:
                outcome = self.allocate(pod)
            except NumalignError as e:  # a claim or template missing from the input
                failed.append(Unallocatable(pod, str(e)))
                continue
            if outcome is None:
                continue
            if outcome.failure is not None:
                failed.append(Unallocatable(pod, _line(outcome.failure), outcome.reasons()))
                continue
            self.commit(outcome)
        return failed

    def release(self, pod_uid: str) -> list[str]:
        """The pod is gone: the claims deallocated because of it."""
        return self.manager.release(pod_uid)


def _line(failure: Failure) -> str:
    return failure.line()
