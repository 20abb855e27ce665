"""Effective pod requests and limits (component-helpers resource.PodRequests / PodLimits).

For each resource r:
    apps      = Σ app-container values
    sidecars  = running Σ of restartable init containers (restartPolicy Always), in spec order
    initPeak  = max over init containers of (sidecars so far + this init container's value)
    effective = max(apps + all sidecars, initPeak)      (+ pod overhead unless excluded)

A restartable init container also enters the peak with the sidecar sum so far, as upstream does;
that never exceeds apps + all sidecars, so it only matters for readers comparing with the code.

Upstream keeps zero-valued keys in its maps; we compute with the same maps and drop zero entries at
the end (spec §6.2: "zero or absent entries are simply absent"), which is what every caller wants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.resources import is_pod_level_resource

ResourceList = dict[str, Quantity]


def container_requests(container: Container) -> ResourceList:
    """The container's requests after API defaulting: a resource with a limit but no request
    requests its limit (SetDefaults_Pod). Manifests read by numalign are already defaulted; this
    makes hand-built Containers behave the same."""
    out = dict(container.requests)
    for name, limit in container.limits.items():
        out.setdefault(name, limit)
    return out


def container_limits(container: Container) -> ResourceList:
    return dict(container.limits)


def _add(into: ResourceList, values: Mapping[str, Quantity]) -> None:
    """addResourceList."""
    for name, quantity in values.items():
        into[name] = into[name] + quantity if name in into else quantity


def _max(into: ResourceList, values: Mapping[str, Quantity]) -> None:
    """maxResourceList: keep the larger value per name."""
    for name, quantity in values.items():
        if name not in into or quantity > into[name]:
            into[name] = quantity


def _aggregate(pod: Pod, values_of: Callable[[Container], Mapping[str, Quantity]]) -> ResourceList:
    """AggregateContainerRequests / AggregateContainerLimits (zero keys kept, like upstream)."""
    total: ResourceList = {}
    for container in pod.containers:
        _add(total, values_of(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in pod.init_containers:
        values = values_of(container)
        if container.is_sidecar:
            _add(total, values)
            _add(sidecars, values)
            candidate = dict(sidecars)
        else:
            candidate = dict(values)
            _add(candidate, sidecars)
        _max(init_peak, candidate)
    _max(total, init_peak)
    return total


def _non_zero(values: ResourceList) -> ResourceList:
    return {name: q for name, q in values.items() if not q.is_zero()}


def pod_requests(pod: Pod, exclude_overhead: bool = False) -> ResourceList:
    """resource.PodRequests: effective requests, pod overhead added unless excluded. A pod-level request
    (spec.resources, PodLevelResources) replaces the containers' value for the resources it may name
    (cpu, memory, hugepages); a kubelet with the gate off refuses such pods before any fit."""
    if not pod.init_containers and len(pod.containers) == 1 and not pod.overhead and pod.pod_requests is None:
        # Most pods: one app container, nothing else to aggregate: its requests are the pod's (what
        # _aggregate makes of them, without its copies and merges; every pod read is asked this).
        return _non_zero(container_requests(pod.containers[0]))
    total = _aggregate(pod, container_requests)
    for name, quantity in (pod.pod_requests or {}).items():
        if is_pod_level_resource(name):
            total[name] = quantity
    if not exclude_overhead:
        _add(total, pod.overhead)
    return _non_zero(total)


def pod_limits(pod: Pod, exclude_overhead: bool = False) -> ResourceList:
    """resource.PodLimits: effective limits. Overhead is added only to resources that have a
    limit (upstream: "Add overhead to non-zero limits"), since an absent limit means unlimited."""
    total = _aggregate(pod, container_limits)
    if not exclude_overhead:
        for name, quantity in pod.overhead.items():
            if name in total:
                total[name] = total[name] + quantity
    return _non_zero(total)


def sum_resources(lists: Iterable[Mapping[str, Quantity]]) -> ResourceList:
    """Σ of several resource lists, zero entries dropped."""
    total: ResourceList = {}
    for values in lists:
        _add(total, values)
    return _non_zero(total)
