"""Do the devices a state directory's pods hold exist on the machine numalign was given?

The device checkpoint (kubelet_internal_checkpoint) names devices by the IDs their plugin reported:
NVIDIA's plugin reports GPU UUIDs, the SR-IOV plugin VF PCI addresses, others their own names. A
machine read from sysfs (or written by hand) names them by PCI address. When the two disagree, the
held devices match none of the machine's, nothing is subtracted from the free set, and every device
looks free: a pod "fits" on GPUs another pod holds. A real kubelet never sees this (its plugin
reports the same IDs it checkpointed), so the mismatch is a problem of the input, refused here with
the IDs on both sides and the way to describe the plugin's devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from numalign.errors import InvalidInputError
from numalign.kubelet.devicemanager.state import PodDevicesEntry
from numalign.machine.topology import Machine

_SHOWN = 4  # IDs quoted per side; the counts say how many there are


def held_devices(entries: Iterable[PodDevicesEntry]) -> dict[str, set[str]]:
    """resource -> device IDs held by the checkpoint's pod entries (any NUMA node)."""
    out: dict[str, set[str]] = {}
    for e in entries:
        ids = out.setdefault(e.resource_name, set())
        for per_numa in e.device_ids.values():
            ids.update(per_numa)
    return out


def unknown_held_devices(entries: Iterable[PodDevicesEntry], machine: Machine) -> dict[str, list[str]]:
    """resource -> held device IDs the machine does not describe (sorted), for resources the machine
    has devices of. A resource it has none of is served by a plugin it does not describe (a device
    plugin registered with `serve`): new pods get none of those devices here, so nothing held is
    given again, and the kubelet's own answer (admitted without them) stands."""
    known = {r: {d.id for d in devs} for r, devs in machine.devices_by_resource().items()}
    out: dict[str, list[str]] = {}
    for resource, ids in sorted(held_devices(entries).items()):
        if resource not in known:
            continue
        missing = sorted(ids - known[resource])
        if missing:
            out[resource] = missing
    return out


def check_device_identity(entries: Sequence[PodDevicesEntry], machine: Machine, source: str,
                          registered: Mapping[str, Sequence[str]] | None = None) -> None:
    """Raise InvalidInputError when `source` (the device checkpoint) holds devices `machine` lacks.
    `registered` (the checkpoint's RegisteredDevices: every device the plugin reported) is quoted so
    the user knows which IDs to describe."""
    unknown = unknown_held_devices(entries, machine)
    if not unknown:
        return
    by_resource = machine.devices_by_resource()
    parts = []
    for resource, missing in unknown.items():
        theirs = f"its {resource} devices are {_sample([d.id for d in by_resource[resource]])}"
        plugin = list((registered or {}).get(resource) or [])
        known = f"; the plugin reported {_sample(sorted(plugin))}" if plugin else ""
        parts.append(f"pods hold {resource} {_sample(missing)}, which machine {machine.name} does not have "
                     f"({theirs}{known})")
    first = next(iter(unknown))
    raise InvalidInputError(
        f"{source}: {'; '.join(parts)}; counted as free, devices in use would be given again. Expected the "
        "device IDs the device plugin reports (GPU UUIDs for NVIDIA's plugin, VF PCI addresses for SR-IOV), "
        f"each on its NUMA node; fix: pass --devices {first}=FILE (a list of {{id, numa}}, as `numalign "
        "plugin --devices` takes) or --devices FILE.json (a PodResources GetAllocatableResources capture), "
        "or take the node with `numalign snapshot`, which captures them"
    )


def _sample(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_SHOWN])
    return f"{shown} (of {len(ids)})" if len(ids) > _SHOWN else shown
