"""The claims a node holds, as values: upstream's ClaimInfoState (the kubelet's dra_manager_state
checkpoint) in the words of a ResourceClaim's status, which is where the API server keeps the same
facts: `allocation` (the devices) and `reservedFor` (the pods using the claim).

Rules the manager and every reader keep: a claim is held while at least one pod the node lists
reserves it; a claim no such pod reserves is deallocated (the resource claim controller clears its
status.allocation, and deletes a claim it generated from a template with its pod)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace

from numalign.k8s.dra.types import ResourceClaim


@dataclass(frozen=True)
class PodReference:
    """status.reservedFor[]: a ResourceClaimConsumerReference to a pod."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class HeldClaim:
    """A claim allocated on this node, with the pods that reserve it."""

    claim: ResourceClaim  # namespace, name, uid and allocation (the spec is the user's, given again)
    reserved_for: tuple[PodReference, ...]

    @property
    def key(self) -> str:
        return self.claim.key

    @property
    def devices(self) -> tuple[str, ...]:
        """Its devices as driver/pool/device."""
        results = self.claim.allocation.results if self.claim.allocation is not None else ()
        return tuple(f"{r.driver}/{r.pool}/{r.device}" for r in results)


def reconcile(claims: Iterable[HeldClaim], pods: Collection[str]) -> list[HeldClaim]:
    """Only reservations by pods in `pods` (the uids the node lists) stay; a claim none of them
    reserves is deallocated, so it is dropped."""
    out = []
    for held in claims:
        kept = tuple(r for r in held.reserved_for if r.uid in pods)
        if kept:
            out.append(held if kept == held.reserved_for else replace(held, reserved_for=kept))
    return out


def release(claims: Iterable[HeldClaim], uids: Collection[str]) -> list[HeldClaim]:
    """The pods `uids` are gone: their reservations end; a claim nobody reserves any more is deallocated."""
    out = []
    for held in claims:
        kept = tuple(r for r in held.reserved_for if r.uid not in uids)
        if kept:
            out.append(held if kept == held.reserved_for else replace(held, reserved_for=kept))
    return out
