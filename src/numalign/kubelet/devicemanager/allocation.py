"""devicesToAllocate (upstream devicemanager manager.go): which device ids a container gets.

Order of preference, as upstream: devices reusable from the pod's init containers; then, if the
aligned devices (on the merged hint's NUMA nodes) are more than needed, the plugin's preferred ones
among them, then the other aligned ones; otherwise all aligned devices, the plugin's preferred ones
among the rest, then unaligned, then devices without topology. Error messages are upstream's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from numalign.errors import AllocationError, PluginError
from numalign.kubelet.devicemanager.affinity import filter_by_affinity
from numalign.kubelet.devicemanager.pod_devices import sorted_ids

if TYPE_CHECKING:
    from numalign.kubelet.devicemanager.view import DeviceManagerView


@dataclass(frozen=True)
class AllocationRequest:
    pod_uid: str
    container_name: str
    resource: str
    required: int
    reusable: set[str]

    def __init__(self, pod_uid: str, container_name: str, resource: str, required: int, reusable: set[str]) -> None:
        # Written out: a dataclass's generated __init__ runs as interpreted Python in the compiled core
        # (one request per device resource per admission); these stores are native there.
        object.__setattr__(self, "pod_uid", pod_uid)
        object.__setattr__(self, "container_name", container_name)
        object.__setattr__(self, "resource", resource)
        object.__setattr__(self, "required", required)
        object.__setattr__(self, "reusable", reusable)


def _q(s: str) -> str:
    """Go's %q for the printable strings Kubernetes names are made of."""
    return json.dumps(s, ensure_ascii=False)


def _short(required: int, needed: int) -> AllocationError:
    return AllocationError(
        f"unexpectedly allocated less resources than required. Requested: {required}, Got: {required - needed}"
    )


def call_get_preferred_allocation(
    m: DeviceManagerView, resource: str, available: Iterable[str], must_include: Iterable[str], size: int
) -> list[str]:
    """callGetPreferredAllocationIfAvailable: [] unless the plugin offers it; the plugin's order."""
    info = m.endpoints.get(resource)
    if info is None:
        raise AllocationError(f"endpoint not found in cache for a registered resource: {resource}")
    # A restored endpoint has no options (Go nil): skip, as upstream does.
    if info.endpoint is None or not info.endpoint.options.get_preferred_allocation_available:
        return []
    try:
        if info.stopped:
            raise PluginError(f"endpoint {resource} has been stopped")
        answer = info.endpoint.get_preferred_allocation(sorted_ids(available), sorted_ids(must_include), size)
    except PluginError as e:
        raise AllocationError(f"device plugin GetPreferredAllocation rpc failed with err: {e}") from e
    return list(dict.fromkeys(answer))


def devices_to_allocate(m: DeviceManagerView, req: AllocationRequest) -> list[str] | None:
    """The ids to pass to the plugin's Allocate, or None when there is nothing to do."""
    resource, required = req.resource, req.required
    needed = required
    devices = m.pod_devices.container_devices(req.pod_uid, req.container_name, resource)
    if devices is not None:
        needed -= len(devices)
        # A pod's resources are not expected to change once admitted.
        if needed != 0:
            raise AllocationError(
                f"pod {_q(req.pod_uid)} container {_q(req.container_name)} changed request for resource "
                f"{_q(resource)} from {len(devices)} to {required}"
            )

    # Kubelet restart: a container the runtime reported running already has its devices.
    if not m.sources_ready() and (req.pod_uid, req.container_name) in m.running_containers:
        return None

    healthy = m.healthy.get(resource)
    # These fail mostly on node reboot, before the plugin has re-registered.
    if healthy is None:
        raise AllocationError(f"cannot allocate unregistered device {resource}")
    if not healthy:
        raise AllocationError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
    if devices is not None and not devices <= healthy:
        raise AllocationError(
            f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {resource}"
        )
    if needed == 0:
        return None

    allocated: list[str] = []
    taken: set[str] = set()

    def take(candidates: Iterable[str]) -> bool:
        """allocateRemainingFrom: True once nothing more is needed."""
        nonlocal needed
        # A new set, not the one in place: a caller may hold the previous one (a probe puts state back).
        bucket = m.allocated[resource] = set(m.allocated.get(resource, ()))
        for d in [c for c in candidates if c not in taken]:
            bucket.add(d)
            taken.add(d)
            allocated.append(d)
            needed -= 1
            if needed == 0:
                return True
        return False

    if take(sorted_ids(req.reusable)):
        return allocated

    available = m.healthy.get(resource, set()) - m.allocated.get(resource, set())
    if len(available) < needed:
        raise AllocationError(
            f"requested number of devices unavailable for {resource}. "
            f"Requested: {needed}, Available: {len(available)}"
        )

    hint = m.affinity.get_affinity(req.pod_uid, req.container_name)
    aligned, unaligned, no_affinity = filter_by_affinity(hint, m.all_devices.get(resource, {}), available)

    if needed < len(aligned):
        # Let the plugin choose among the aligned devices.
        aligned_set = set(aligned)
        preferred = call_get_preferred_allocation(m, resource, aligned_set | taken, taken, required)
        if take(d for d in preferred if d in aligned_set):
            return allocated
        if take(aligned):
            return allocated
        raise _short(required, needed)

    # Honour the alignment first, then let the plugin influence the rest.
    if take(aligned):
        return allocated
    preferred = call_get_preferred_allocation(m, resource, available | taken, taken, required)
    if take(d for d in preferred if d in available):
        return allocated
    if take(unaligned):
        return allocated
    if take(no_affinity):
        return allocated
    raise _short(required, needed)
