"""Conversions between device-plugin v1beta1 protobuf messages and numalign's plain dataclasses.

The device manager only sees numalign.kubelet.devicemanager.endpoint dataclasses; this module is the one
place that knows the wire shapes. A Device's topology keeps the protobuf distinction between "no
TopologyInfo" (None) and "TopologyInfo with no nodes" (()), because upstream's hint generation treats
the two differently.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.errors import PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DevicePluginOptions, DeviceSpec, Mount
from numalign.limits import quote

log = logging.getLogger("numalign.grpc.convert")

# Upstream documents a 63-character limit on Device.ID; longer IDs are refused rather than truncated.
MAX_DEVICE_ID_LENGTH = 63


def options_from_pb(msg: pb.DevicePluginOptions) -> DevicePluginOptions:
    return DevicePluginOptions(
        pre_start_required=msg.pre_start_required,
        get_preferred_allocation_available=msg.get_preferred_allocation_available,
    )


def options_to_pb(opts: DevicePluginOptions) -> pb.DevicePluginOptions:
    return pb.DevicePluginOptions(
        pre_start_required=opts.pre_start_required,
        get_preferred_allocation_available=opts.get_preferred_allocation_available,
    )


def device_from_pb(msg: pb.Device) -> Device:
    topology: tuple[int, ...] | None = None
    if msg.HasField("topology"):
        topology = tuple(node.ID for node in msg.topology.nodes)
    return Device(id=msg.ID, health=msg.health, topology=topology)


def device_to_pb(dev: Device) -> pb.Device:
    msg = pb.Device(ID=dev.id, health=dev.health)
    if dev.topology is not None:
        # SetInParent marks the field present even with zero nodes: "empty topology" is not "none".
        msg.topology.SetInParent()
        msg.topology.nodes.extend(pb.NUMANode(ID=n) for n in dev.topology)
    return msg


def devices_from_pb(resource: str, msgs: Iterable[pb.Device]) -> list[Device]:
    """Validate and convert one ListAndWatch snapshot; raise PluginError for a malformed one.

    A malformed snapshot (an empty ID, duplicate IDs, a negative NUMA id) is rejected whole: applying
    half of it would leave the device manager with an inventory the plugin never sent. The kubelet
    does not check these (duplicates silently collapse in its map), but none of them can describe real
    devices. IDs over the documented 63 characters are accepted with a warning, as the kubelet does.
    """
    devices: list[Device] = []
    seen: set[str] = set()
    for msg in msgs:
        dev = device_from_pb(msg)
        where = f"ListAndWatch from the device plugin for {quote(resource)}"
        if not dev.id:
            raise PluginError(f"{where}: a device has an empty ID; every device needs a unique ID")
        if len(dev.id) > MAX_DEVICE_ID_LENGTH:
            # The kubelet accepts these, so we do too; the limit is only documented.
            log.warning(
                "%s: device ID %r is %d characters long; the API documents at most %d",
                where,
                dev.id,
                len(dev.id),
                MAX_DEVICE_ID_LENGTH,
            )
        if dev.id in seen:
            raise PluginError(f"{where}: device ID {quote(dev.id)} is listed twice; IDs must be unique")
        if dev.topology is not None and any(n < 0 for n in dev.topology):
            raise PluginError(
                f"{where}: device {quote(dev.id)} has NUMA node ids {list(dev.topology)}; ids must be >= 0 "
                "(omit the topology for a device with no NUMA affinity)"
            )
        seen.add(dev.id)
        devices.append(dev)
    return devices


def allocate_response_from_pb(msg: pb.ContainerAllocateResponse) -> ContainerAllocateResponse:
    return ContainerAllocateResponse(
        envs=dict(msg.envs),
        mounts=tuple(
            Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in msg.mounts
        ),
        devices=tuple(
            DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in msg.devices
        ),
        annotations=dict(msg.annotations),
        cdi_devices=tuple(c.name for c in msg.cdi_devices),
    )


def allocate_response_to_pb(resp: ContainerAllocateResponse) -> pb.ContainerAllocateResponse:
    return pb.ContainerAllocateResponse(
        envs=dict(resp.envs),
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in resp.mounts
        ],
        devices=[
            pb.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in resp.devices
        ],
        annotations=dict(resp.annotations),
        cdi_devices=[pb.CDIDevice(name=n) for n in resp.cdi_devices],
    )


def ids(values: Sequence[str]) -> list[str]:
    return [str(v) for v in values]
