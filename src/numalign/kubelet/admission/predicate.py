"""The kubelet's predicate admit handler (pkg/kubelet/lifecycle/predicate.go): GeneralPredicates'
resource fit of a pod against the node's allocatable and the pods admitted so far.

Theory of operation. scheduler.AdmissionCheck runs NodeResourcesFit's Fits with every failure kept:
the pods limit first ("Too many pods"), then cpu, memory, ephemeral-storage, then each scalar
resource (hugepages, extended resources). A resource fails when the pod requests some of it and more
than allocatable - requested(other pods) remains to be found. Extended resources the node does not
report are dropped from the pod first (removeMissingExtendedResources: a cluster-level resource or a
scheduler extender's). The kubelet answers with the FIRST failure only, as
reason OutOf<resource> (OutOfcpu, OutOfmemory, OutOfpods, OutOfnvidia.com/gpu) and message
"Node didn't have enough resource: cpu, requested: 500, used: 223750, capacity: 224000".

Scalar resources are a Go map there, so which of two failing scalars is reported first is random;
numalign takes them in name order.

Not modelled (pods carry none of it): node affinity and selectors, host ports, node name, NoExecute
taints, the OS label and field, SupplementalGroupsPolicy, and the critical-pod admission failure
handler (static pods and priority >= 2000000000 preempt lower pods instead of being rejected).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from numalign.core.decision import AdmitResult
from numalign.k8s.pod import Pod
from numalign.k8s.requests import pod_requests
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY, is_extended_resource_name
from numalign.kubelet.admission.allocatable import RESOURCE_PODS, amount

RESOURCE_EPHEMERAL_STORAGE: Final = "ephemeral-storage"
INSUFFICIENT_RESOURCE_PREFIX: Final = "OutOf"
PREDICATE_HANDLER: Final = "predicate"
_FIRST: Final = (RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_EPHEMERAL_STORAGE)


@dataclass(frozen=True)
class InsufficientResource:
    """lifecycle.InsufficientResourceError: what the pod asked for, what others use, the capacity."""

    resource: str
    requested: int
    used: int
    capacity: int

    @property
    def reason(self) -> str:
        """OutOfcpu, OutOfmemory, OutOfpods, OutOfephemeral-storage, OutOf<extended resource>."""
        return f"{INSUFFICIENT_RESOURCE_PREFIX}{self.resource}"

    @property
    def message(self) -> str:
        return (f"Node didn't have enough resource: {self.resource}, requested: {self.requested}, "
                f"used: {self.used}, capacity: {self.capacity}")

    @property
    def short(self) -> int:
        """GetInsufficientAmount: how much more would have to be free."""
        return self.requested - (self.capacity - self.used)

    def to_dict(self) -> dict[str, object]:
        return {"resource": self.resource, "requested": self.requested, "used": self.used,
                "capacity": self.capacity, "short": self.short}


def fit_requests(pod: Pod) -> dict[str, int]:
    """The pod's requests in the scheduler's units (PodRequests: init containers, sidecars, overhead,
    pod-level resources), zero requests left out. A fresh dict each call (callers may change it)."""
    return dict(held_requests(pod))


def held_requests(pod: Pod) -> Mapping[str, int]:
    """fit_requests, shared: memoised on the pod as compute_pod_qos is (a Pod is frozen), since
    admission asks for a pod's requests when it is admitted and again while it holds them."""
    memo = pod.memo.fit
    if memo is None:
        memo = {}
        for name, q in pod_requests(pod).items():
            value = amount(name, q)
            if value > 0:
                memo[name] = value
        pod.memo.fit = memo
    return memo


def requested_by(pods: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """NodeInfo.Requested: the sum of the admitted pods' requests."""
    total: dict[str, int] = {}
    for req in pods:
        for name, value in req.items():
            total[name] = total.get(name, 0) + value
    return total


def insufficient_resources(
    request: Mapping[str, int], allocatable: Mapping[str, int], requested: Mapping[str, int], pod_count: int
) -> list[InsufficientResource]:
    """noderesources.Fits with every failure, in the kubelet's order (pods, cpu, memory,
    ephemeral-storage, then scalar resources by name). `allocatable` holds "pods" (the allowed pod
    number); `requested` and `pod_count` describe the other pods admitted on the node."""
    out: list[InsufficientResource] = []
    allowed = allocatable.get(RESOURCE_PODS, 0)
    if pod_count + 1 > allowed:
        out.append(InsufficientResource(RESOURCE_PODS, 1, pod_count, allowed))
    # removeMissingExtendedResources: an extended resource the node does not report is not checked.
    wanted = {n: v for n, v in request.items()
              if n != RESOURCE_PODS and not (n not in allocatable and is_extended_resource_name(n))}
    names = [n for n in _FIRST if n in wanted] + sorted(n for n in wanted if n not in _FIRST)
    for name in names:
        value = wanted[name]
        cap = allocatable.get(name, 0)
        used = requested.get(name, 0)
        if value > 0 and value > cap - used:
            out.append(InsufficientResource(name, value, used, cap))
    return out


def predicate_admit(
    pod: Pod, allocatable: Mapping[str, int], requested: Mapping[str, int], pod_count: int
) -> AdmitResult:
    """The handler's answer: the first failure's reason and message (numalign.answer.why lists them all).
    `requested`: the other pods' summed requests (requested_by)."""
    request = held_requests(pod)
    if _fits(request, allocatable, requested, pod_count):
        return AdmitResult.admitted()
    first = insufficient_resources(request, allocatable, requested, pod_count)[0]
    return AdmitResult(False, first.reason, first.message)


def _fits(request: Mapping[str, int], allocatable: Mapping[str, int], requested: Mapping[str, int],
          pod_count: int) -> bool:
    """insufficient_resources found nothing: the same tests, without ordering the resources or building
    the failures (most pods fit; those that do not are looked at again in full)."""
    # (`in` and [], not .get: on a Mapping the compiled core calls .get by name)
    if pod_count + 1 > (allocatable[RESOURCE_PODS] if RESOURCE_PODS in allocatable else 0):  # noqa: SIM401
        return False
    for name, value in request.items():
        if name == RESOURCE_PODS:
            continue
        if name in allocatable:
            cap = allocatable[name]
        elif is_extended_resource_name(name):
            continue  # removeMissingExtendedResources
        else:
            cap = 0
        if value > 0 and value > cap - (requested[name] if name in requested else 0):  # noqa: SIM401
            return False
    return True
