"""Pod QoS class (pkg/apis/core/v1/helper/qos GetPodQOS / ComputePodQOS).

The classic aggregate algorithm of 1.32–1.35 is used; the newest per-container form gives the same
class for every pod the API server accepts. Only cpu and memory count; extended resources and
hugepages never change the class. The gated pod-level-resources path is not modelled.

Requests are read after API defaulting (a limit without a request requests the limit), because the
kubelet only ever sees defaulted pods: `limits: {cpu: 2, memory: 1Gi}` alone is Guaranteed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, cast

from numalign.errors import InvalidInputError
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY


class QOSClass(StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"

    @classmethod
    def parse(cls, text: str, where: str = "status.qosClass") -> QOSClass:
        try:
            return cls(text)
        except ValueError:
            raise InvalidInputError(
                f"{where}: unknown QoS class {text!r}; expected one of "
                f"{', '.join(repr(c.value) for c in cls)} (case-sensitive), or leave it out to compute it"
            ) from None


# isSupportedQoSComputeResource
SUPPORTED_QOS_COMPUTE_RESOURCES: Final = frozenset({RESOURCE_CPU, RESOURCE_MEMORY})
_QOS_RESOURCES: Final = (RESOURCE_CPU, RESOURCE_MEMORY)


def get_pod_qos(pod: Pod) -> QOSClass:
    """GetPodQOS: the pod's status.qosClass when set, otherwise ComputePodQOS."""
    if pod.status_qos_class:
        return QOSClass.parse(pod.status_qos_class, where=f"{pod.key}: status.qosClass")
    return compute_pod_qos(pod)


def compute_pod_qos(pod: Pod) -> QOSClass:
    """ComputePodQOS over every container: init containers (sidecars included) and app containers.

    Memoised on the pod (Pod.memo): a Pod is frozen and every provider asks for its class several
    times per admission.
    """
    memo = pod.memo
    if memo.qos is None:
        memo.qos = _compute_pod_qos(pod)
    return cast(QOSClass, memo.qos)


def _compute_pod_qos(pod: Pod) -> QOSClass:
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    is_guaranteed = True
    if pod.has_pod_spec_resources:
        # PodLevelResources (on by default since 1.34): spec.resources alone decides the class.
        for name, quantity in (pod.pod_requests or {}).items():
            if name in SUPPORTED_QOS_COMPUTE_RESOURCES and quantity.sign() > 0:
                requests[name] = quantity
        for name, quantity in (pod.pod_limits or {}).items():
            if name in SUPPORTED_QOS_COMPUTE_RESOURCES and quantity.sign() > 0:
                limits[name] = quantity
        if pod.pod_limits and not set(limits).issuperset(SUPPORTED_QOS_COMPUTE_RESOURCES):
            is_guaranteed = False
    else:
        # Only cpu and memory count: looked up by name in each container (its requests after API
        # defaulting, as container_requests gives them, without building them all).
        for container in pod.init_containers + pod.containers:
            own, own_limits = container.requests, container.limits
            limits_found = 0
            for name in _QOS_RESOURCES:
                # (`in` and [], not .get: on a Mapping the compiled core calls .get by name)
                limit = own_limits[name] if name in own_limits else None  # noqa: SIM401
                asked = own[name] if name in own else limit  # noqa: SIM401 - a limit without a request requests the limit
                if asked is not None and asked.sign() > 0:
                    requests[name] = requests[name] + asked if name in requests else asked
                if limit is not None and limit.sign() > 0:
                    limits_found += 1
                    limits[name] = limits[name] + limit if name in limits else limit
            # Every container must limit both cpu and memory for the pod to be Guaranteed.
            if limits_found < len(_QOS_RESOURCES):
                is_guaranteed = False
    if not requests and not limits:
        return QOSClass.BEST_EFFORT
    if is_guaranteed:
        for name, request in requests.items():
            # (nanos compared as ints: Quantity's == is theirs, and != through the rich comparison is a
            # generic call in the compiled core)
            if name not in limits or limits[name].nanos != request.nanos:
                is_guaranteed = False
                break
    if is_guaranteed and len(requests) == len(limits):
        return QOSClass.GUARANTEED
    return QOSClass.BURSTABLE
