"""The ResourceSlices dra-driver-cpu and dra-driver-memory publish for a machine, so CPUs and memory
can be claimed through DRA next to a GPU with one `matchAttribute`.

dra-driver-cpu (kubernetes-sigs/dra-driver-cpu, driver `dra.cpu`; replaces the CPU manager, which then
runs policy none):
- `individual` mode: one device per allocatable CPU (reserved CPUs left out), named `cpudev000`
  upward; CPUs are taken in the order of their cores' lowest CPU id, SMT siblings one after the other,
  so that consecutive devices share a core. Attributes `dra.cpu/numaNodeID`, `socketID`, `smtEnabled`,
  `cacheL3ID`, `coreType`, `coreID`, `cpuID`; no capacity.
- `grouped` mode by `numanode` (`cpudevnuma000`...), `socket` (`cpudevsocket000`...) or `machine`
  (`cpudevmachine`): one device per group with capacity `dra.cpu/cpu` (its allocatable CPUs),
  `allowMultipleAllocations` (consumable capacity: several claims take CPUs from it), attributes
  `dra.cpu/numCPUs`, `smtEnabled` and, per group kind, `numaNodeID`, `socketID`.
- The driver's own words are accepted too (its config file's `cpuDeviceMode: individual|grouped` and
  `groupBy: numanode|socket|machine`, `grouped` alone meaning by NUMA node, its default), and its
  `reservedCPUs`. Its Helm chart installs the DeviceClass `dra.cpu` (`device.driver == "dra.cpu"`),
  published beside the slices (`cpu_device_class`).
- Devices on one NUMA node also carry `dra.net/numaNode` (the driver's "compatibility" attribute) and
  the standard `resource.kubernetes.io/numaNode` (KEP-6072's helper, as the driver's newer releases
  publish it), so a claim can match them with a GPU's numaNode.

dra-driver-memory (ffromani/dra-driver-memory, driver `dra.memory`): per NUMA node with memory, a
device `memory-<node>` with capacity `memory` (the node's memory, bytes) and, per hugepage size, a
device `hugepages-<2m|1g>-<node>` with capacity `pages`; all with `allowMultipleAllocations`, and
attributes `resource.kubernetes.io/numaNode`, `dra.cpu/numaNode`, `dra.net/numaNode`,
`dra.memory/numaNode`, `dra.memory/pageSize` (`4k`, `2m`, `1g`), `dra.memory/hugeTLB`. (Upstream
names devices with a random suffix; numalign uses the NUMA node id, so runs repeat.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.k8s.cpuset import parse_go_cpuset
from numalign.k8s.dra.read import dra_object_from_dict
from numalign.k8s.dra.types import ATTRIBUTE_NUMA_NODE, RESOURCE_SLICE_MAX_DEVICES, DeviceClass, ResourceSlice
from numalign.machine.topology import Machine

CPU_DRIVER: Final = "dra.cpu"
MEMORY_DRIVER: Final = "dra.memory"
CPU_MODES: Final = ("individual", "numanode", "socket", "machine")
# The driver's configuration words (driverConfig / its deprecated flags): cpuDeviceMode and groupBy.
CPU_DEVICE_MODES: Final = ("individual", "grouped")
CPU_GROUP_BY: Final = ("numanode", "socket", "machine")
CPU_DRIVER_SYNTAX: Final = ("cpu[=MODE] (MODE individual, grouped, numanode, socket or machine; or the driver's "
                            "settings, comma-separated: cpuDeviceMode=individual|grouped, groupBy=numanode|socket|"
                            "machine, reservedCPUs=CPUSET)")


def cpu_device_class() -> DeviceClass:
    """The DeviceClass dra-driver-cpu's Helm chart installs (templates/deviceclass.yaml)."""
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CPU_DRIVER},
           "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{CPU_DRIVER}"'}}]}}
    cls = dra_object_from_dict(obj, "dra-driver-cpu's Helm chart")
    assert isinstance(cls, DeviceClass)
    return cls


def parse_cpu_driver(settings: str, where: str) -> tuple[str, frozenset[int] | None]:
    """`--dra-driver cpu=SETTINGS`: the mode (one of CPU_MODES) and the driver's own reservedCPUs (None:
    not given). SETTINGS is a mode word (individual, grouped: by NUMA node, numanode, socket, machine) or
    the driver's settings, comma-separated; empty is numalign's default, individual."""
    values: dict[str, str] = {}
    last = ""
    for item in (settings.split(",") if settings else []):
        if last == "reservedCPUs" and re.fullmatch(r"\d+(-\d+)?", item):
            values[last] += "," + item  # a cpuset's own commas (reservedCPUs=0,32)
            continue
        key, sep, value = item.partition("=")
        last = key if sep else ""
        if not sep and item in CPU_DEVICE_MODES:
            key, value = "cpuDeviceMode", item
        elif not sep and item in CPU_GROUP_BY:  # numalign's shorthand: grouped by this
            key, value = "groupBy", item
        if key not in ("cpuDeviceMode", "groupBy", "reservedCPUs") or (key in values and values[key] != value):
            raise InvalidInputError(f"{where}: expected {CPU_DRIVER_SYNTAX}")
        values[key] = value
    mode = values.get("cpuDeviceMode", "grouped" if "groupBy" in values else "individual")
    group_by = values.get("groupBy", "numanode")
    if mode not in CPU_DEVICE_MODES:
        raise InvalidInputError(f"{where}: cpuDeviceMode {mode!r}; expected individual or grouped")
    if group_by not in CPU_GROUP_BY:
        raise InvalidInputError(f"{where}: groupBy {group_by!r}; expected one of {', '.join(CPU_GROUP_BY)}")
    if mode == "individual" and "groupBy" in values:
        raise InvalidInputError(f"{where}: groupBy applies to cpuDeviceMode grouped only (the driver ignores it in "
                                "individual mode); drop it or say cpuDeviceMode=grouped")
    reserved = None
    if "reservedCPUs" in values:
        try:
            reserved = parse_go_cpuset(values["reservedCPUs"])
        except ValueError as exc:
            raise InvalidInputError(f"{where}: reservedCPUs {values['reservedCPUs']!r}: {exc}; expected a cpuset "
                                    "such as 0-1") from None
    return ("individual" if mode == "individual" else group_by), reserved


def _numa_attrs(numa: int) -> dict[str, Any]:
    return {ATTRIBUTE_NUMA_NODE: {"int": numa}, "dra.net/numaNode": {"int": numa}}


def cpu_driver_devices(machine: Machine, mode: str, reserved: Iterable[int] = ()) -> list[dict[str, Any]]:
    """dra-driver-cpu's devices for `machine` in `mode` (individual, numanode, socket, machine)."""
    if mode not in CPU_MODES:
        raise InvalidInputError(f"dra-driver-cpu mode {mode!r}; expected one of {', '.join(CPU_MODES)}")
    held = set(reserved)
    infos = {c.id: c for c in machine.cpu_infos()}
    free = sorted(c for c in infos if c not in held)
    siblings: dict[int, list[int]] = {}
    for c in infos.values():
        siblings.setdefault(c.core, []).append(c.id)
    smt = any(len(v) > 1 for v in siblings.values())
    if mode == "individual":
        order: list[int] = []
        seen: set[int] = set()
        for cpu in free:  # a core's threads one after the other, cores by their first free CPU
            if cpu in seen:
                continue
            group = [cpu] + [s for s in sorted(siblings[infos[cpu].core]) if s != cpu and s not in held]
            order.extend(group)
            seen.update(group)
        rows: list[dict[str, Any]] = []
        for i, cpu in enumerate(order):
            info = infos[cpu]
            rows.append({"name": f"cpudev{i:03d}", "attributes": {
                "dra.cpu/numaNodeID": {"int": info.numa_node}, "dra.cpu/socketID": {"int": info.socket},
                "dra.cpu/smtEnabled": {"bool": smt}, "dra.cpu/cacheL3ID": {"int": info.uncore},
                "dra.cpu/coreType": {"string": "standard"}, "dra.cpu/coreID": {"int": info.core},
                "dra.cpu/cpuID": {"int": cpu}, **_numa_attrs(info.numa_node)}})
        return rows
    groups: dict[int, list[int]] = {}
    for cpu in free:
        key = infos[cpu].numa_node if mode == "numanode" else infos[cpu].socket if mode == "socket" else 0
        groups.setdefault(key, []).append(cpu)
    out: list[dict[str, Any]] = []
    for key, cpus in sorted(groups.items()):
        attrs: dict[str, Any] = {"dra.cpu/smtEnabled": {"bool": smt}, "dra.cpu/numCPUs": {"int": len(cpus)}}
        if mode == "numanode":
            name = f"cpudevnuma{key:03d}"
            attrs |= {"dra.cpu/numaNodeID": {"int": key}, "dra.cpu/socketID": {"int": infos[cpus[0]].socket},
                      **_numa_attrs(key)}
        elif mode == "socket":
            name = f"cpudevsocket{key:03d}"
            attrs["dra.cpu/socketID"] = {"int": key}
        else:
            name = "cpudevmachine"
        out.append({"name": name, "attributes": attrs, "capacity": {"dra.cpu/cpu": {"value": str(len(cpus))}},
                    "allowMultipleAllocations": True})
    return out


def memory_driver_devices(machine: Machine) -> list[dict[str, Any]]:
    """dra-driver-memory's devices: memory and each hugepage size, per NUMA node with memory."""
    out: list[dict[str, Any]] = []
    for n in machine.numa_nodes:
        if n.memory_bytes <= 0:
            continue
        attrs = {**_numa_attrs(n.id), "dra.cpu/numaNode": {"int": n.id}, "dra.memory/numaNode": {"int": n.id}}
        out.append({"name": f"memory-{n.id}", "allowMultipleAllocations": True,
                    "attributes": {**attrs, "dra.memory/pageSize": {"string": "4k"},
                                   "dra.memory/hugeTLB": {"bool": False}},
                    "capacity": {"memory": {"value": str(n.memory_bytes - n.hugepages_bytes())}}})
        for size, count in sorted(n.hugepages.items()):
            label = {2 << 20: "2m", 1 << 30: "1g"}.get(size, f"{size >> 10}k")
            out.append({"name": f"hugepages-{label}-{n.id}", "allowMultipleAllocations": True,
                        "attributes": {**attrs, "dra.memory/pageSize": {"string": label},
                                       "dra.memory/hugeTLB": {"bool": True}},
                        "capacity": {"pages": {"value": str(count)}}})
    return out


def driver_slices(machine: Machine, node: str, cpu_mode: str | None, memory: bool,
                  reserved_cpus: Iterable[int] = ()) -> list[ResourceSlice]:
    """The slices of the drivers asked for, published for `node` (a pool per driver named after it)."""
    out: list[ResourceSlice] = []
    wanted = [(CPU_DRIVER, cpu_driver_devices(machine, cpu_mode, reserved_cpus))] if cpu_mode else []
    if memory:
        wanted.append((MEMORY_DRIVER, memory_driver_devices(machine)))
    for driver, devices in wanted:
        chunks = [devices[i:i + RESOURCE_SLICE_MAX_DEVICES] for i in range(0, len(devices), RESOURCE_SLICE_MAX_DEVICES)]
        for i, chunk in enumerate(chunks):
            obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": f"{node}-{driver}-{i}"},
                   "spec": {"driver": driver, "nodeName": node, "devices": chunk,
                            "pool": {"name": node, "generation": 1, "resourceSliceCount": len(chunks)}}}
            parsed = dra_object_from_dict(obj, f"{driver} model for machine {machine.name}")
            assert isinstance(parsed, ResourceSlice)
            out.append(parsed)
    return out
