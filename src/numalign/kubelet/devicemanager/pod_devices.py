"""Per-pod device bookkeeping (upstream devicemanager pod_devices.go), released ~v1.32-v1.35 form.

podDevices: pod UID -> container name -> resource -> (device ids per NUMA node, AllocateResponse).
A device without topology is listed under NUMA id -1; a device on several nodes under each of them.

Go iterates maps and sets in random order here. Where that order is visible (lists in checkpoints,
run options) we sort: resources and pods by name, device ids by `device_sort_key`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DeviceSpec, Mount

NODE_WITHOUT_TOPOLOGY = -1

_DIGITS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=8192)  # a node's device ids are few and sorted on every admission
def device_sort_key(device_id: str) -> tuple[tuple[int, int | str], ...]:
    """Natural order ("gpu2" before "gpu10"). Upstream's order is random; this is ours."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(device_id) if p)


def sorted_ids(ids: Iterable[str]) -> list[str]:
    return sorted(set(ids), key=device_sort_key)


# numa id -> device ids (checkpoint.DevicesPerNUMA)
DevicesPerNUMA = dict[int, list[str]]


def devices_of(per_numa: Mapping[int, list[str]]) -> set[str]:
    """DevicesPerNUMA.Devices(): every id, whatever node(s) it is listed under."""
    return {d for ids in per_numa.values() for d in ids}


@dataclass
class DeviceAllocateInfo:
    device_ids: DevicesPerNUMA
    alloc_resp: ContainerAllocateResponse | None
    # alloc_resp's protobuf bytes, as the checkpoint holds them: those read from it, or encoded once
    raw: bytes | None = None


@dataclass(frozen=True)
class RunContainerOptions:
    """What the CRI gets for a container's devices (upstream DeviceRunContainerOptions)."""

    envs: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    cdi_devices: tuple[str, ...] = ()


class PodDevices:
    """podUID -> container -> resource -> DeviceAllocateInfo."""

    def __init__(self) -> None:
        self.devs: dict[str, dict[str, dict[str, DeviceAllocateInfo]]] = {}

    def pods(self) -> set[str]:
        return set(self.devs)

    def has_pod(self, pod_uid: str) -> bool:
        return pod_uid in self.devs

    def insert(
        self,
        pod_uid: str,
        container: str,
        resource: str,
        devices: DevicesPerNUMA,
        resp: ContainerAllocateResponse | None,
        raw: bytes | None = None,
    ) -> None:
        self.devs.setdefault(pod_uid, {}).setdefault(container, {})[resource] = DeviceAllocateInfo(
            {n: list(ids) for n, ids in devices.items()}, resp, raw
        )

    def delete(self, pod_uids: Iterable[str]) -> None:
        for uid in pod_uids:
            self.devs.pop(uid, None)

    def delete_container(self, pod_uid: str, container: str) -> None:
        containers = self.devs.get(pod_uid)
        if containers is None:
            return
        containers.pop(container, None)
        if not containers:
            del self.devs[pod_uid]

    def delete_entry(self, pod_uid: str, container: str, resource: str) -> None:
        """Forget one (pod, container, resource) entry, and the container and pod left empty."""
        containers = self.devs.get(pod_uid)
        if containers is None or container not in containers:
            return
        containers[container].pop(resource, None)
        if not containers[container]:
            self.delete_container(pod_uid, container)

    def container_devices(self, pod_uid: str, container: str, resource: str) -> set[str] | None:
        """Device ids of (pod, container, resource); None when nothing is recorded (Go nil set)."""
        info = self.devs.get(pod_uid, {}).get(container, {}).get(resource)
        return None if info is None else devices_of(info.device_ids)

    def pod_devices(self, pod_uid: str, resource: str) -> set[str]:
        out: set[str] = set()
        for resources in self.devs.get(pod_uid, {}).values():
            info = resources.get(resource)
            if info is not None:
                out |= devices_of(info.device_ids)
        return out

    def add_container_allocated_resources(
        self, pod_uid: str, container: str, into: dict[str, set[str]]
    ) -> None:
        for resource, info in self.devs.get(pod_uid, {}).get(container, {}).items():
            into[resource] = into.get(resource, set()) | devices_of(info.device_ids)

    def remove_container_allocated_resources(
        self, pod_uid: str, container: str, into: dict[str, set[str]]
    ) -> None:
        for resource, info in self.devs.get(pod_uid, {}).get(container, {}).items():
            into[resource] = into.get(resource, set()) - devices_of(info.device_ids)

    def devices(self) -> dict[str, set[str]]:
        """All allocated ids by resource. A resource key exists even when its entries carry no
        AllocateResponse (their ids are then not counted), as upstream ~v1.32 does."""
        out: dict[str, set[str]] = {}
        for containers in self.devs.values():
            for resources in containers.values():
                for resource, info in resources.items():
                    bucket = out.setdefault(resource, set())
                    if info.alloc_resp is not None:
                        bucket |= devices_of(info.device_ids)
        return out

    def pod_and_container_for_device(self, resource: str, device_id: str) -> tuple[str, str] | None:
        for pod_uid in sorted(self.devs):
            for container in sorted(self.devs[pod_uid]):
                info = self.devs[pod_uid][container].get(resource)
                if info is not None and device_id in devices_of(info.device_ids):
                    return pod_uid, container
        return None

    def get_container_devices(self, pod_uid: str, container: str) -> dict[str, dict[str, Device]] | None:
        """getContainerDevices: per resource, each device with the NUMA nodes it is recorded under
        (topology None for node -1; health is not tracked here and reads Healthy)."""
        resources = self.devs.get(pod_uid, {}).get(container)
        if resources is None:
            return None
        out: dict[str, dict[str, Device]] = {}
        for resource in sorted(resources):
            per_numa = resources[resource].device_ids
            if not per_numa:
                continue
            nodes: dict[str, list[int]] = {}
            for node in sorted(per_numa):
                for d in per_numa[node]:
                    lst = nodes.setdefault(d, [])
                    if node != NODE_WITHOUT_TOPOLOGY:
                        lst.append(node)
            out[resource] = {d: Device(d, topology=tuple(nodes[d]) or None) for d in sorted_ids(nodes)}
        return out

    def holds_devices(self, pod_uid: str, container: str) -> bool:
        """get_container_devices would answer something (some resource lists the container's devices under a
        NUMA node), without building its Device records."""
        resources = self.devs.get(pod_uid, {}).get(container)
        if resources is None:
            return False
        for info in resources.values():  # noqa: SIM110 - any() over a generator is an object a call, compiled
            if info.device_ids:
                return True
        return False

    def container_device_ids(self, pod_uid: str, container: str) -> dict[str, set[str]] | None:
        """get_container_devices' device ids alone, per resource (the ids PodResources' ContainerDevices
        list), without a Device record per id; None when the container holds nothing."""
        resources = self.devs.get(pod_uid, {}).get(container)
        if resources is None:
            return None
        out: dict[str, set[str]] = {}
        for resource, info in resources.items():
            if info.device_ids:
                out[resource] = devices_of(info.device_ids)
        return out

    def entries(self) -> list[tuple[str, str, str, DeviceAllocateInfo]]:
        """(pod, container, resource, info) in sorted order."""
        return [
            (p, c, r, self.devs[p][c][r])
            for p in sorted(self.devs)
            for c in sorted(self.devs[p])
            for r in sorted(self.devs[p][c])
        ]

    def run_container_options(self, pod_uid: str, container: str) -> RunContainerOptions | None:
        """Merge the stored AllocateResponses of a container's resources.

        The first value seen for an env/annotation key, or a container path of a device/mount,
        wins (upstream logs the conflict and keeps the first). Resources are merged in name order.
        """
        resources = self.devs.get(pod_uid, {}).get(container)
        if resources is None:
            return None
        envs: dict[str, str] = {}
        annotations: dict[str, str] = {}
        devices: dict[str, DeviceSpec] = {}
        mounts: dict[str, Mount] = {}
        cdi: dict[str, None] = {}
        for resource in sorted(resources):
            resp = resources[resource].alloc_resp
            if resp is None:
                continue
            for k in sorted(resp.envs):
                envs.setdefault(k, resp.envs[k])
            for dev in resp.devices:
                devices.setdefault(dev.container_path, dev)
            for mount in resp.mounts:
                mounts.setdefault(mount.container_path, mount)
            for k in sorted(resp.annotations):
                annotations.setdefault(k, resp.annotations[k])
            for name in resp.cdi_devices:
                cdi.setdefault(name, None)
        return RunContainerOptions(
            envs=tuple(envs.items()),
            mounts=tuple(mounts.values()),
            devices=tuple(devices.values()),
            annotations=tuple(annotations.items()),
            cdi_devices=tuple(cdi),
        )
