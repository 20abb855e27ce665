"""The scheduler's view of resources: a node's allocatable (node status, as the kubelet reports it:
numalign.kubelet.admission.allocatable, shared with the kubelet's own predicate admit handler) and a pod's
requests (as kube-scheduler's NodeResourcesFit reads them).

Units are the scheduler's: cpu in millicores, every other resource in whole units (bytes, devices).

* Node allocatable (kubelet node status setters): capacity minus kubeReserved + systemReserved + the
  hard eviction threshold (with reservedSystemCPUs, the cpu reserved is that many CPUs, as the kubelet
  overrides the cpu of kubeReserved and systemReserved with it); memory also minus every hugepage pool
  (hugepages are their own resources); extended resources are the healthy devices per resource; pods
  is maxPods.
* Pod requests (resourcehelper.PodRequests): app containers and sidecars summed, the largest init
  container step taken if larger, pod overhead added. For scoring, cpu and memory use the non-zero
  defaults of containers that request none (100m, 200Mi: schedutil.DefaultMilliCPURequest,
  DefaultMemoryRequest), as NodeResourcesFit's scorers do; BalancedAllocation uses the real requests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.requests import container_requests, pod_requests
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY
from numalign.kubelet.admission.allocatable import RESOURCE_PODS, amount, node_allocatable

__all__ = ["DEFAULT_MAX_PODS", "RESOURCE_PODS", "amount", "node_allocatable", "non_zero_requests", "shape_key"]

DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
DEFAULT_MAX_PODS: Final = 110


def _with_default_requests(c: Container) -> Container:
    req = container_requests(c)
    if RESOURCE_CPU in req and RESOURCE_MEMORY in req:
        return c
    filled: dict[str, Quantity] = dict(req)
    filled.setdefault(RESOURCE_CPU, Quantity.from_milli(DEFAULT_MILLI_CPU_REQUEST))
    filled.setdefault(RESOURCE_MEMORY, Quantity.from_int(DEFAULT_MEMORY_REQUEST))
    return dataclasses.replace(c, requests=filled)


def non_zero_requests(pod: Pod) -> tuple[int, int]:
    """(milli-cpu, memory) with the scheduler's defaults for containers that request none."""
    filled = dataclasses.replace(
        pod,
        containers=tuple(_with_default_requests(c) for c in pod.containers),
        init_containers=tuple(_with_default_requests(c) for c in pod.init_containers),
    )
    req = pod_requests(filled)
    return (amount(RESOURCE_CPU, req.get(RESOURCE_CPU, Quantity(0))),
            amount(RESOURCE_MEMORY, req.get(RESOURCE_MEMORY, Quantity(0))))


def pod_shape(pod: Pod) -> tuple[object, ...]:
    """shape_key, memoised on the pod beside its frozen fields (as compute_pod_qos keeps the QoS class):
    the scheduler asks for it on every cycle, and Pod.with_identity hands it on to a pod's copies."""
    key = pod.memo.shape
    if key is None:
        key = pod.memo.shape = shape_key(pod)
    return key


def shape_key(pod: Pod) -> tuple[object, ...]:
    """Pods with equal keys are the same to every scheduler and kubelet decision modelled here."""

    def ctr(c: Container) -> tuple[object, ...]:
        return (c.name, c.restart_policy, _sorted(c.requests), _sorted(c.limits))

    return (
        tuple(ctr(c) for c in pod.init_containers),
        tuple(ctr(c) for c in pod.containers),
        _sorted(pod.overhead),
        pod.status_qos_class,
        None if pod.pod_requests is None else _sorted(pod.pod_requests),
        None if pod.pod_limits is None else _sorted(pod.pod_limits),
    )


def _sorted(values: Mapping[str, Quantity]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((k, v.nanos) for k, v in values.items()))
