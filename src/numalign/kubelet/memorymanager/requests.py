"""What the memory manager counts as a container's and a pod's request (bytes per resource).

Upstream getRequestedResources / getPodRequestedResources: only `memory` and `hugepages-*` keys of
`resources.requests`, each an exact int64 (Quantity.AsInt64).
"""

from __future__ import annotations

from numalign.errors import AllocationError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.requests import container_requests
from numalign.kubelet.memorymanager.state import is_memory_resource

ERR_NOT_INT64 = "[memorymanager] failed to represent quantity as int64"


def get_requested_resources(container: Container) -> dict[str, int]:
    """The container's memory and hugepage requests in bytes (after API defaulting: a limit without a
    request requests the limit); raises AllocationError (upstream's text) when a quantity is not a
    whole number of bytes that fits int64."""
    out: dict[str, int] = {}
    for name, quantity in container_requests(container).items():
        if not is_memory_resource(name):
            continue
        value = quantity.as_int64()
        if value is None or value < 0:
            raise AllocationError(
                f"{ERR_NOT_INT64} (container {container.name!r}, {name}: {quantity}); "
                "memory and hugepage requests must be whole numbers of bytes"
            )
        out[name] = value
    return out


def container_requested(pod: Pod, container: Container) -> dict[str, int]:
    """get_requested_resources of one of the pod's containers, memoised on the pod (Pod.memo, by container
    name: a Pod is frozen and its names are unique); the Static policy asks at the container's hints and
    again at its Allocate. A refusal (AllocationError) is not kept: it is raised again each time. Callers
    read the answer, never change it."""
    memo = pod.memo
    known = memo.memory
    if known is None:
        known = memo.memory = {}
    name = container.name
    if name in known:
        return known[name]
    got = known[name] = get_requested_resources(container)
    return got


def is_restartable(init_container: Container) -> bool:
    """podutil.IsRestartableInitContainer, for a container of pod.init_containers: a sidecar."""
    return init_container.restart_policy == "Always"


def get_pod_requested_resources(pod: Pod) -> dict[str, int]:
    """The pod's request with the sidecar rule: max(Σ apps + Σ sidecars, peak of each regular init
    container over the sidecars started before it), only for resources some app container names."""
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for ctn in pod.init_containers:
        for r, q in get_requested_resources(ctn).items():
            init_peak.setdefault(r, 0)
            if is_restartable(ctn):
                sidecars[r] = sidecars.get(r, 0) + q
            elif sidecars.get(r, 0) + q > init_peak[r]:
                init_peak[r] = sidecars.get(r, 0) + q
    apps: dict[str, int] = {}
    for ctn in pod.containers:
        for r, q in get_requested_resources(ctn).items():
            apps[r] = apps.get(r, 0) + q
    return {r: max(apps[r] + sidecars.get(r, 0), init_peak.get(r, 0)) for r in apps}
