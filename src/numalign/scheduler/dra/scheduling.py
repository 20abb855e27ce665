"""One node's DRA ledger, as the scheduler keeps it when it places pods on that node: the slices the
node's drivers publish, the classes, the claims (with what they hold), and each pod's claims allocated
by the structured allocator when the pod comes (DynamicResources PreFilter and Filter, then Reserve).

    dra = NodeDRA(objects, node="node-a", version=node.kubelet_version)
    outcome = dra.allocate(pod)         # None: the pod uses no claim

A claim already allocated (status.allocation, or by an earlier pod: a shared claim) keeps its devices.
The ledger only reads: what an admitted pod's claims hold is the node's DRA manager's to keep
(kubelet/dramanager: reserve after admission, release with the pod), and the ledger is the view of
that state (DRAManager.view), built again when it changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from numalign.k8s.dra.podclaims import claims_for_pod
from numalign.k8s.dra.types import DeviceClass, DRAObjects, ResourceClaim, ResourceSlice
from numalign.k8s.pod import Pod
from numalign.k8s.version import KubeletVersion
from numalign.scheduler.dra.allocator import AllocatedState
from numalign.scheduler.dra.api import (
    CANNOT_ALLOCATE,
    AllocatedDevice,
    AllocationFailure,
    AllocationResult,
    allocate_claims,
)
from numalign.scheduler.dra.explain import Explanation, explain
from numalign.scheduler.dra.features import DEFAULT_VERSION, features_for
from numalign.scheduler.dra.pools import NodeInfo


@dataclass(frozen=True)
class PodClaims:
    """A pod's claims on this node and their allocation (or why there is none)."""

    pod: Pod
    claims: tuple[ResourceClaim, ...]
    result: AllocationResult | AllocationFailure
    # Why the claims do not fit, when the allocator says only `cannot allocate all claims` and the
    # ledger was asked to explain (NodeDRA.explain_failures); scheduler/dra/explain.py.
    explanation: Explanation | None = None

    @property
    def failure(self) -> AllocationFailure | None:
        return self.result if isinstance(self.result, AllocationFailure) else None

    def reasons(self) -> tuple[str, ...]:
        """Why the claims do not fit (the explanation's reasons; () when there is none)."""
        return self.explanation.reasons if self.explanation is not None else ()

    @property
    def devices(self) -> tuple[AllocatedDevice, ...]:
        return () if isinstance(self.result, AllocationFailure) else self.result.devices

    def allocated_claims(self) -> tuple[ResourceClaim, ...]:
        """The pod's claims with their allocation, as the scheduler writes them to status (none on failure)."""
        return () if isinstance(self.result, AllocationFailure) else tuple(c.allocated_claim()
                                                                            for c in self.result.claims)

    def pod_claim_names(self) -> dict[str, str]:
        """pod claim name (spec.resourceClaims[].name) -> the ResourceClaim's namespace/name."""
        return {pc.name: c.key for pc, c in zip(self.pod.resource_claims, self.claims, strict=True)}

    def container_devices(self, container: str) -> tuple[AllocatedDevice, ...]:
        """The devices a container uses: those of the claims (or one request of a claim) in its
        resources.claims."""
        spec = next((c for c in self.pod.all_containers() if c.name == container), None)
        if spec is None:
            return ()
        names = self.pod_claim_names()
        out: list[AllocatedDevice] = []
        for ref in spec.claims:
            key = names.get(ref.name)
            for d in self.devices:
                if d.claim == key and (not ref.request or d.request == ref.request
                                       or d.request.startswith(ref.request + "/")) and all(d is not o for o in out):
                    out.append(d)
        return tuple(out)


@dataclass
class NodeDRA:
    """The DRA objects that matter on one node, and the claims allocated there."""

    objects: DRAObjects
    node: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    version: str | KubeletVersion = DEFAULT_VERSION
    gates: Mapping[str, bool] | None = None
    extra_slices: Sequence[ResourceSlice] = ()  # published by the machine (its DRA devices, driver models)
    # An unschedulable pod's outcome carries why (scheduler/dra/explain.py): admit shows it; what-if
    # runs, which only ask whether the claims fit, leave it off.
    explain_failures: bool = False
    # What the allocated claims hold, built on the first allocation (a what-if asks this view many times).
    _state: AllocatedState | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # The field's default, set again: mypyc's compiled dataclass (scripts/setup) leaves an init=False
        # field unset, and reading it raised AttributeError.
        self._state = None

    @property
    def slices(self) -> list[ResourceSlice]:
        return [*self.objects.slices, *self.extra_slices]

    @property
    def classes(self) -> dict[str, DeviceClass]:
        return self.objects.classes

    def claims_of(self, pod: Pod) -> list[ResourceClaim]:
        return claims_for_pod(pod, self.objects)

    def allocate(self, pod: Pod, claims: Sequence[ResourceClaim] | None = None) -> PodClaims | None:
        """The pod's claims allocated on this node, as the scheduler would when it picks this node;
        None when the pod uses no claim. `claims`: other claims in their place (what-if runs)."""
        if not pod.resource_claims:
            return None
        mine = list(claims) if claims is not None else self.claims_of(pod)
        state = self._ledger()
        # The pod's own claims count as the pod gives them (a what-if may give one without its allocation).
        lifted = [c.key for c in mine if state.has_claim(c.key)]
        for key in lifted:
            state.remove_claim(key)
        try:
            result = allocate_claims(mine, self.slices, self.objects.classes, node=self.node,
                                     node_labels=self.node_labels, allocated=state, version=self.version,
                                     gates=self.gates)
            why = None
            if self.explain_failures and isinstance(result, AllocationFailure) and result.message == CANNOT_ALLOCATE:
                why = explain(mine, self.slices, self.objects.classes, NodeInfo(self.node, dict(self.node_labels)),
                              state, features_for(self.version, self.gates))
        finally:
            for key in lifted:
                state.add_claim(self.objects.claims[key])
        return PodClaims(pod, tuple(mine), result, why)

    def update_claims(self, claims: Mapping[str, ResourceClaim]) -> None:
        """These claims are now as given (the node's DRA manager reserved them): the view and what the
        allocated claims hold change in them only."""
        state = self._state
        for key, claim in claims.items():
            self.objects.claims[key] = claim
            if state is not None:
                state.remove_claim(key)
                state.add_claim(claim)

    def _ledger(self) -> AllocatedState:
        if self._state is None:
            self._state = AllocatedState(c for c in self.objects.claims.values() if c.allocation is not None)
        return self._state

