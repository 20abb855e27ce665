"""The DRA manager: the claims this node holds and the pods reserving them (upstream's claim info
cache), changed only by reserving a pod's allocated claims after its admission and releasing a pod
when it is removed or replaced. No I/O: its snapshot is part of the NodeState a store commits.

    manager.reserve(pod, allocated)   # after the kubelet admitted pod: its claims hold their devices
    manager.release(pod.uid)          # the pod is gone: claims nobody reserves are deallocated
    manager.view(given)               # the DRA objects as the scheduler sees them now
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from numalign.k8s.dra.podclaims import generated_claim_name
from numalign.k8s.dra.types import DeviceRequestAllocationResult, DRAObjects, ResourceClaim, ResourceClaimSpec
from numalign.k8s.pod import Pod
from numalign.kubelet.dramanager.state import HeldClaim, PodReference, reconcile


class DRAManager:
    def __init__(self) -> None:
        self._held: dict[str, HeldClaim] = {}  # claim key -> the claim and its reservations
        # Grows with every change, so a view built from an earlier state is known to be stale.
        self.generation = 0

    # ---- the state ---------------------------------------------------------------------------------
    def snapshot(self) -> tuple[HeldClaim, ...]:
        """What the node's state keeps, by claim key."""
        return tuple(self._held[k] for k in sorted(self._held))

    def restore(self, claims: Iterable[HeldClaim]) -> None:
        self._held = {h.key: h for h in claims}
        self.generation += 1

    def reconcile(self, pods: Mapping[str, Pod]) -> list[str]:
        """Drop reservations by pods the node does not list (an interrupted admission or removal of a
        directory written before claims joined the pod record); one line per claim deallocated."""
        kept = {h.key: h for h in reconcile(self._held.values(), pods)}
        lines = [f"deallocated DRA claim {key}: no pod numalign admitted reserves it (an admission or removal "
                 "was interrupted)" for key in sorted(set(self._held) - set(kept))]
        if kept != self._held:
            self._held = kept
            self.generation += 1
        return lines

    def held(self) -> list[HeldClaim]:
        return [self._held[k] for k in sorted(self._held)]

    def claims_of(self, pod_uid: str) -> list[HeldClaim]:
        """The claims `pod_uid` reserves, by key."""
        return [h for h in self.held() if any(r.uid == pod_uid for r in h.reserved_for)]

    # ---- the life cycle ----------------------------------------------------------------------------
    def reserve(self, pod: Pod, allocated: Sequence[ResourceClaim]) -> None:
        """The admitted pod's claims, allocated, hold their devices and list the pod in reservedFor. A
        claim already held (shared by pods) keeps the devices it holds."""
        me = PodReference(pod.namespace, pod.name, pod.uid)
        for claim in allocated:
            held = self._held.get(claim.key)
            if held is None:
                # The spec is the user's object, given again with the pods that use it; only status is kept.
                self._held[claim.key] = HeldClaim(dataclasses.replace(claim, spec=ResourceClaimSpec(), source=""),
                                                  (me,))
            elif all(r.uid != pod.uid for r in held.reserved_for):
                self._held[claim.key] = dataclasses.replace(held, reserved_for=(*held.reserved_for, me))
        self.generation += 1

    def release(self, pod_uid: str) -> list[str]:
        """The pod is removed (or replaced): its reservations end, and a claim no pod reserves any more is
        deallocated (a template's claim is deleted with it). The keys deallocated, in order."""
        gone = []
        for key, held in list(self._held.items()):
            kept = tuple(r for r in held.reserved_for if r.uid != pod_uid)
            if kept == held.reserved_for:
                continue
            if kept:
                self._held[key] = dataclasses.replace(held, reserved_for=kept)
            else:
                del self._held[key]
                gone.append(key)
        self.generation += 1
        return sorted(gone)

    # ---- what others read --------------------------------------------------------------------------
    def view(self, given: DRAObjects) -> DRAObjects:
        """The DRA objects as the scheduler sees them now: `given` (the user's files) with every held
        claim allocated as recorded. A claim given with status.allocation keeps what it says (what the
        API server says stands); one given without it takes the recorded allocation; a held claim not
        given (a template's, or one the files no longer carry) is taken as recorded. A claim released
        here is seen as given: unallocated, or, for a template's, created again for its next pod."""
        claims = dict(given.claims)
        for key, held in self._held.items():
            claims[key] = _seen(claims.get(key), held)
        return DRAObjects(given.classes, claims, given.templates, given.slices)

    def seen(self, given: DRAObjects, keys: Iterable[str]) -> dict[str, ResourceClaim]:
        """What view(given) says of these claims only (after a reserve: the scheduler's view is updated
        one claim at a time instead of built again over every claim the node holds)."""
        out: dict[str, ResourceClaim] = {}
        for key in keys:
            held = self._held.get(key)
            if held is not None:
                out[key] = _seen(given.claims.get(key), held)
            elif key in given.claims:
                out[key] = given.claims[key]
        return out

    def container_devices(self, pod: Pod, container: str) -> list[tuple[HeldClaim, DeviceRequestAllocationResult]]:
        """The devices a container of an admitted pod uses, from the claims the pod reserves: those of
        the claims (or one request of a claim) its resources.claims names."""
        spec = next((c for c in pod.all_containers() if c.name == container), None)
        if spec is None:
            return []
        keys = {pc.name: f"{pod.namespace}/{pc.resource_claim_name or generated_claim_name(pod, pc)}"
                for pc in pod.resource_claims}
        out: list[tuple[HeldClaim, DeviceRequestAllocationResult]] = []
        for ref in spec.claims:
            held = self._held.get(keys.get(ref.name, ""))
            if held is None or all(r.uid != pod.uid for r in held.reserved_for) or held.claim.allocation is None:
                continue
            for r in held.claim.allocation.results:
                if (not ref.request or r.request == ref.request or r.request.startswith(ref.request + "/")) and \
                        all(r is not o for _, o in out):
                    out.append((held, r))
        return out


def _seen(given: ResourceClaim | None, held: HeldClaim) -> ResourceClaim:
    """A held claim as the scheduler sees it: as given when the files say how it is allocated, else with
    the recorded allocation; as recorded when the files do not carry it."""
    if given is None:
        return held.claim
    if given.allocation is None:
        return dataclasses.replace(given, allocation=held.claim.allocation, uid=given.uid or held.claim.uid)
    return given
