"""Where `numalign plugin` gets its devices: a YAML list, or the PCI devices of a class/vendor in sysfs.

Each device carries its NUMA nodes (the TopologyInfo the kubelet sees) and a PCIe locality path (the
chain of PCI bridges above it) used to prefer devices under the same switch or root port.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numalign.errors import DiscoveryError, InvalidInputError
from numalign.k8s.deviceplugin import HEALTHY, UNHEALTHY, Device

log = logging.getLogger("numalign.deviceplugin.inventory")

_PCI_ADDRESS = re.compile(r"^([0-9a-fA-F]{4,}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_HEX = re.compile(r"^(0x)?[0-9a-fA-F]+$")


@dataclass(frozen=True, slots=True)
class PluginDevice:
    """A device as the plugin knows it: the wire Device plus its PCIe locality path (outermost first)."""

    device: Device
    pci_path: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.device.id


def _numa(value: Any, where: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    nodes: list[int] = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidInputError(
                f"{where}: numa must be a NUMA node id >= 0 or a list of them (omit it for no topology), got {value!r}"
            )
        nodes.append(v)
    return tuple(sorted(set(nodes)))


def pci_path_from_address(address: str) -> tuple[str, ...]:
    """Locality from the address alone (domain, then bus) when sysfs gives no bridge chain."""
    m = _PCI_ADDRESS.match(address)
    if not m:
        return ()
    domain, bus = m.group(1).lower(), m.group(2).lower()
    return (f"pci{domain}", f"{domain}:{bus}")


def load_yaml_devices(path: Path) -> list[PluginDevice]:
    """Read `path`: a list (or {devices: [...]}) of {id, numa, health, pci}.

    numa: an id, a list of ids, or absent/null for "no topology". health: Healthy (default) or
    Unhealthy. pci: an optional PCI address ("0000:3b:00.0") used for PCIe locality.
    """
    from numalign.adapters.textfiles import load_document

    data = load_document(path, "the device list", "a YAML list of devices like '- {id: gpu0, numa: 0}'")
    if isinstance(data, dict) and "devices" in data:
        data = data["devices"]
    if not isinstance(data, list):
        raise InvalidInputError(
            f"device list {str(path)!r}: expected a list of devices like '- {{id: gpu0, numa: 0}}', "
            f"got {type(data).__name__}"
        )
    out: list[PluginDevice] = []
    seen: set[str] = set()
    for i, item in enumerate(data):
        where = f"{path}: device #{i + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("id"), str | int) or item.get("id") == "":
            raise InvalidInputError(f"{where}: expected a mapping with a non-empty 'id', got {item!r}")
        unknown = set(item) - {"id", "numa", "health", "pci"}
        if unknown:
            raise InvalidInputError(
                f"{where}: unknown keys {sorted(unknown)}; allowed: id, numa, health, pci"
            )
        dev_id = str(item["id"])
        if dev_id in seen:
            raise InvalidInputError(f"{where}: device id {dev_id!r} is listed twice; ids must be unique")
        seen.add(dev_id)
        health = item.get("health", HEALTHY)
        if health not in (HEALTHY, UNHEALTHY):
            raise InvalidInputError(f"{where}: health must be {HEALTHY!r} or {UNHEALTHY!r}, got {health!r}")
        pci = item.get("pci")
        out.append(
            PluginDevice(
                Device(dev_id, health, _numa(item.get("numa"), where)),
                pci_path_from_address(str(pci)) if pci is not None else (),
            )
        )
    return out


def _norm_hex(value: str, what: str) -> str:
    if not _HEX.match(value):
        raise InvalidInputError(
            f"--{what} {value!r} is not hexadecimal; e.g. --pci-class 0x0302 --pci-vendor 0x10de"
        )
    return value.lower().removeprefix("0x")


def _read(path: Path) -> str:
    return path.read_text(encoding="ascii").strip()


def scan_pci_devices(
    pci_class: str, pci_vendor: str | None = None, sysfs_root: Path = Path("/sys")
) -> list[PluginDevice]:
    """PCI devices under <sysfs_root>/bus/pci/devices whose class starts with `pci_class` (hex, e.g.
    "0x0302" for 3D controllers, "0x0200" for Ethernet) and, if given, whose vendor is `pci_vendor`.

    The device id is the PCI address. numa_node -1 (no affinity reported) gives a device without
    topology. The PCIe locality path comes from the device's real sysfs path (its bridge chain).
    """
    want_class = _norm_hex(pci_class, "pci-class")
    want_vendor = _norm_hex(pci_vendor, "pci-vendor").zfill(4) if pci_vendor is not None else None
    base = sysfs_root / "bus" / "pci" / "devices"
    if not base.is_dir():
        raise DiscoveryError(
            f"no PCI devices directory at {str(base)!r}; is --sysfs-root {str(sysfs_root)!r} right?"
        )
    out: list[PluginDevice] = []
    for entry in sorted(base.iterdir()):
        try:
            dev_class = _read(entry / "class").lower().removeprefix("0x")
            vendor = _read(entry / "vendor").lower().removeprefix("0x")
        except (OSError, UnicodeDecodeError) as e:
            log.warning("skipping PCI device %s: %s", entry.name, e)
            continue
        if not dev_class.startswith(want_class) or (want_vendor is not None and vendor != want_vendor):
            continue
        numa: tuple[int, ...] | None = None
        try:
            node = int(_read(entry / "numa_node"))
            numa = (node,) if node >= 0 else None
        except (OSError, ValueError):
            numa = None
        out.append(PluginDevice(Device(entry.name, HEALTHY, numa), _pci_path(entry)))
    return out


def _pci_path(entry: Path) -> tuple[str, ...]:
    # /sys/bus/pci/devices/X -> ../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0: the components
    # from "pciDDDD:BB" down to the parent bridge are the device's PCIe locality.
    if entry.is_symlink():
        parts = Path(os.path.realpath(entry)).parts
        for i, part in enumerate(parts):
            if part.startswith("pci") and ":" in part:
                return tuple(parts[i:-1])
    return pci_path_from_address(entry.name)
