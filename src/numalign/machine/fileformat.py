"""The machine description file (JSON or YAML), documented in docs/machine-format.md. Pure: text and
dicts in, `Machine` out, and back; reading files is the adapters' job.

`machine_from_dict(machine_to_dict(m)) == m` for every machine (lossless round trip). numalign.machine/v2
(written since) spells its field names as every command's document does, Kubernetes API camelCase
(`numaNodes`, `memoryBytes`, `offlineCPUs`); numalign.machine/v1 files (snake_case: `numa_nodes`) are read
as before. The readers below are written with v1's names and look each one up in the file's own spelling
(`_Names`), so an error names the field as the file writes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.k8s.cpuset import format_cpuset, parse_cpuset
from numalign.limits import MAX_CPU_ID, MAX_NUMA_NODE_ID, MIN_NUMA_NODE_ID, quote
from numalign.machine.topology import CPU, HEALTHY, CadvisorCounts, Device, DRADevice, Machine, NUMANode
from numalign.validation import expect_int, expect_list, expect_mapping, expect_opt_int

FORMAT = "numalign.machine/v2"
FORMAT_V1 = "numalign.machine/v1"
EXPECTED_FILE = f"a machine file ({FORMAT}, as `numalign discover --output yaml` writes) or cadvisor MachineInfo JSON"

# v1's snake_case field names -> v2's (camelCase, acronyms upper case as `reservedSystemCPUs`; `numaNode`
# as answer/present/keys.py spells it in every other document). The other fields are one word in both.
_CAMEL: Final = {
    "numa_nodes": "numaNodes", "offline_cpus": "offlineCPUs", "dra_devices": "draDevices",
    "memory_bytes": "memoryBytes", "numa_node": "numaNode", "pci_address": "pciAddress",
    "memory_numa_nodes": "memoryNumaNodes", "pcie_root": "pcieRoot", "num_cpus": "numCPUs",
    "num_cores": "numCores", "num_sockets": "numSockets", "memory_capacity": "memoryCapacity",
    "num_physical_cores": "numPhysicalCores", "page_size": "pageSize", "num_pages": "numPages",
}
_SNAKE: Final = {v: k for k, v in _CAMEL.items()}


class _Names:
    """A field's name in the file's format: `n("numa_nodes")` is "numaNodes" in a v2 file."""

    def __init__(self, v2: bool) -> None:
        self.v2 = v2

    def __call__(self, key: str) -> str:
        return _CAMEL.get(key, key) if self.v2 else key

    def fields(self, value: Any, where: str, keys: Collection[str]) -> Mapping[str, Any]:
        """expect_mapping with the format's names; a field of the other format's spelling is named so."""
        allowed = {self(k) for k in keys}
        obj = expect_mapping(value, where)
        other = _CAMEL if self.v2 else _SNAKE  # the other format's spelling -> this one's
        for key in obj:
            if key not in allowed and key in other and other[key] in allowed:
                fmt, was = (FORMAT, FORMAT_V1) if self.v2 else (FORMAT_V1, FORMAT)
                raise InvalidInputError(
                    f"{where}: unknown key {quote(key)}: that is {was}'s spelling; this file is {fmt}, which spells "
                    f"it {quote(other[key])}; write it so (or set format: {was} and use {was}'s names throughout)")
        return expect_mapping(obj, where, allowed)

_TOP_KEYS = {"format", "name", "numa_nodes", "cpus", "offline_cpus", "devices", "cadvisor", "dra_devices"}
_CADVISOR_KEYS = {"num_cpus", "num_cores", "num_sockets", "distances", "memory_capacity", "num_physical_cores",
                  "hugepages"}
_NODE_KEYS = {"id", "cpus", "memory_bytes", "distances", "hugepages"}
_CPU_KEYS = {"id", "socket", "die", "core", "numa_node", "l3", "online"}
_DEVICE_KEYS = {"id", "resource", "numa_nodes", "pci_address", "vendor", "class", "health", "memory_numa_nodes"}
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DRA_DEVICE_KEYS = {"name", "driver", "numa_node", "pci_address", "pcie_root", "attributes", "capacity"}

_SIZE = re.compile(r"^\s*(\d+)\s*(B|kB|KB|KiB|Ki|MB|MiB|Mi|GB|GiB|Gi)?\s*$")
_SHIFT = {
    None: 0,
    "B": 0,
    "kB": 10,
    "KB": 10,
    "KiB": 10,
    "Ki": 10,
    "MB": 20,
    "MiB": 20,
    "Mi": 20,
    "GB": 30,
    "GiB": 30,
    "Gi": 30,
}


def machine_to_dict(m: Machine) -> dict[str, Any]:
    """The file form of a machine: plain JSON-able values, ids ascending."""
    out: dict[str, Any] = {"format": FORMAT, "name": m.name, "numaNodes": []}
    for n in m.numa_nodes:
        out["numaNodes"].append(
            {
                "id": n.id,
                "cpus": sorted(n.cpus),
                "memoryBytes": n.memory_bytes,
                "hugepages": {str(size): count for size, count in n.hugepages.items()},
                "distances": None if n.distances is None else list(n.distances),
            }
        )
    out["cpus"] = [
        {
            "id": c.id,
            "socket": c.socket,
            "die": c.die,
            "core": c.core,
            "numaNode": c.numa_node,
            "l3": c.l3,
            "online": c.online,
        }
        for c in sorted(m.cpus, key=lambda c: c.id)
    ]
    out["offlineCPUs"] = format_cpuset(m.offline_cpus)
    out["devices"] = [
        {
            "id": d.id,
            "resource": d.resource,
            "numaNodes": None if d.numa_nodes is None else list(d.numa_nodes),
            "pciAddress": d.pci_address,
            "vendor": d.vendor,
            "class": d.device_class,
            "health": d.health,
            **({"memoryNumaNodes": list(d.memory_numa_nodes)} if d.memory_numa_nodes else {}),
        }
        for d in m.devices
    ]
    if m.cadvisor is not None:  # only machines read from cadvisor (sysfs, MachineInfo) carry it
        c = m.cadvisor
        out["cadvisor"] = {"numCPUs": c.num_cpus, "numCores": c.num_cores, "numSockets": c.num_sockets,
                           "distances": {str(k): list(v) for k, v in sorted(c.distances.items())},
                           **({} if c.memory_capacity is None else {"memoryCapacity": c.memory_capacity}),
                           **({} if c.num_physical_cores is None else {"numPhysicalCores": c.num_physical_cores}),
                           **({} if c.hugepages is None else
                              {"hugepages": [{"pageSize": size, "numPages": n} for size, n in c.hugepages]})}
    if m.dra_devices:  # only when there are any, so files of machines without them stay as they were
        out["draDevices"] = [
            {"name": d.name, "driver": d.driver, "numaNode": d.numa_node, "pciAddress": d.pci_address,
             "pcieRoot": d.pcie_root, "attributes": dict(d.attributes), "capacity": dict(d.capacity)}
            for d in m.dra_devices
        ]
    return out


def _cadvisor(obj: Any, where: str, k: _Names) -> CadvisorCounts | None:
    if obj is None:
        return None
    c = k.fields(obj, where, _CADVISOR_KEYS)
    rows = expect_mapping(c.get("distances", {}), f"{where}.distances", None)
    distances = {}
    for key, row in rows.items():
        try:
            node = int(key)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}.distances: key {quote(key)} is not a NUMA node id") from None
        distances[node] = tuple(expect_int(x, f"{where}.distances.{key}[{j}]", minimum=0)
                                for j, x in enumerate(expect_list(row, f"{where}.distances.{key}")))
    num_cpus, num_cores, num_sockets = (expect_int(c.get(k(f), 0), f"{where}.{k(f)}", minimum=0)
                                        for f in ("num_cpus", "num_cores", "num_sockets"))
    capacity = c.get(k("memory_capacity"))
    physical = c.get(k("num_physical_cores"))
    hugepages = None
    size, pages = k("page_size"), k("num_pages")
    if c.get("hugepages") is not None:
        hugepages = tuple(
            (expect_int(k.fields(hp, f"{where}.hugepages[{j}]", {"page_size", "num_pages"}).get(size),
                        f"{where}.hugepages[{j}].{size}", minimum=0),
             expect_int(hp.get(pages, 0), f"{where}.hugepages[{j}].{pages}", minimum=0))
            for j, hp in enumerate(expect_list(c.get("hugepages"), f"{where}.hugepages")))
    return CadvisorCounts(num_cpus, num_cores, num_sockets, distances,
                          None if capacity is None else expect_int(capacity, f"{where}.{k('memory_capacity')}",
                                                                   minimum=0),
                          None if physical is None else expect_int(physical, f"{where}.{k('num_physical_cores')}",
                                                                   minimum=0),
                          hugepages)


def machine_from_dict(obj: Any, source: str) -> Machine:
    """Validate and build a machine; every error names `source`, the field, what was found and what
    was expected."""
    top = expect_mapping(obj, source)
    # Without `format`, the spelling of the NUMA node list says which (files written by hand may omit it).
    fmt = top.get("format", FORMAT if "numaNodes" in top else FORMAT_V1)
    if fmt not in (FORMAT, FORMAT_V1):
        raise InvalidInputError(f"{source}: format {quote(fmt)} is not supported; expected {FORMAT!r} (or the older "
                                f"{FORMAT_V1!r})")
    k = _Names(fmt == FORMAT)
    top = k.fields(top, source, _TOP_KEYS)
    name = top.get("name", source)
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{source}: name must be a non-empty string, got {quote(name)}")
    raw_nodes = expect_list(top.get(k("numa_nodes")), f"{source}: {k('numa_nodes')}", required=True)
    raw_cpus = expect_list(top.get("cpus"), f"{source}: cpus", required=True)
    cpus = tuple(_cpu(c, f"{source}: cpus[{i}]", k) for i, c in enumerate(raw_cpus))
    nodes = []
    for i, raw in enumerate(raw_nodes):
        where = f"{source}: {k('numa_nodes')}[{i}]"
        n = k.fields(raw, where, _NODE_KEYS)
        node_id = expect_int(n.get("id"), f"{where}.id", minimum=MIN_NUMA_NODE_ID, maximum=MAX_NUMA_NODE_ID)
        if "cpus" in n:
            node_cpus = _cpu_ids(n["cpus"], f"{where}.cpus")
        else:  # derived from the CPU list
            node_cpus = frozenset(c.id for c in cpus if c.online and c.numa_node == node_id)
        dist = n.get("distances")
        distances = (
            None
            if dist is None
            else tuple(
                expect_int(x, f"{where}.distances[{j}]")
                for j, x in enumerate(expect_list(dist, f"{where}.distances"))
            )
        )
        nodes.append(
            NUMANode(
                id=node_id,
                cpus=node_cpus,
                memory_bytes=expect_int(n.get(k("memory_bytes"), 0), f"{where}.{k('memory_bytes')}"),
                hugepages=_hugepages(n.get("hugepages", {}), f"{where}.hugepages"),
                distances=distances,
            )
        )
    offline = top.get(k("offline_cpus"), "")
    offline_ids = _cpu_ids(offline, f"{source}: {k('offline_cpus')}")
    devices = tuple(
        _device(d, f"{source}: devices[{i}]", k)
        for i, d in enumerate(expect_list(top.get("devices", []), f"{source}: devices"))
    )
    dra_devices = tuple(
        _dra_device(d, f"{source}: {k('dra_devices')}[{i}]", k)
        for i, d in enumerate(expect_list(top.get(k("dra_devices"), []), f"{source}: {k('dra_devices')}"))
    )
    try:
        return Machine(name=name, numa_nodes=tuple(nodes), cpus=cpus, devices=devices, offline_cpus=offline_ids,
                       cadvisor=_cadvisor(top.get("cadvisor"), f"{source}: cadvisor", k), dra_devices=dra_devices)
    except InvalidInputError as e:
        raise InvalidInputError(f"{source}: {e}") from None


def machine_to_text(m: Machine, fmt: str) -> str:
    """`fmt` is "json" or "yaml"."""
    data = machine_to_dict(m)
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if fmt == "yaml":
        import yaml

        return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100))
    raise InvalidInputError(f"unknown machine output format {quote(fmt)}; expected 'json' or 'yaml'")


def parse_machine_text(text: str, source: str) -> Any:
    """JSON or YAML text -> plain data (YAML is a superset of JSON, but JSON errors read better)."""
    from numalign.k8s.documents import parse_documents

    docs = [d for d in parse_documents(text, source, EXPECTED_FILE) if d is not None]
    if len(docs) > 1:
        raise InvalidInputError(f"{source}: {len(docs)} YAML documents; expected one ({EXPECTED_FILE}); remove the "
                                "extra '---' sections")
    return docs[0] if docs else None


# ---- field readers ------------------------------------------------------------------------------


def _cpu_ids(obj: Any, where: str) -> frozenset[int]:
    """A list of CPU ids, or cpuset text such as "0-3,8"."""
    if isinstance(obj, str):
        return parse_cpuset(obj, where)
    ids = [expect_int(x, f"{where}[{i}]", minimum=0, maximum=MAX_CPU_ID) for i, x in enumerate(expect_list(obj, where))]
    if len(set(ids)) != len(ids):
        raise InvalidInputError(f"{where}: CPU ids {ids} contain duplicates; expected unique ids")
    return frozenset(ids)


def page_size_bytes(key: Any, where: str) -> int:
    """A hugepage size: bytes as an integer or digits, or with a unit ("2Mi", "1GiB", "2048kB")."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    m = _SIZE.match(str(key))
    if not m:
        raise InvalidInputError(
            f"{where}: page size {quote(key)} not understood; expected bytes (2097152) or a size like 2Mi, 1Gi, 2048kB"
        )
    return int(m.group(1)) << _SHIFT[m.group(2)]


def _hugepages(obj: Any, where: str) -> dict[int, int]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise InvalidInputError(f"{where}: expected an object {{page size: total pages}}, got {quote(obj)}")
    out: dict[int, int] = {}
    for k, v in obj.items():
        size = page_size_bytes(k, f"{where} key {quote(k)}")
        if size in out:
            raise InvalidInputError(f"{where}: page size {size} bytes appears twice")
        out[size] = expect_int(v, f"{where}[{quote(k)}]")
    return out


def _cpu(obj: Any, where: str, k: _Names) -> CPU:
    c = k.fields(obj, where, _CPU_KEYS)
    numa_node = k("numa_node")
    for key in ("id", "socket", "core"):
        if key not in c:
            raise InvalidInputError(f"{where}: missing {quote(key)}; a CPU needs id, socket, core and {numa_node}")
    if numa_node not in c:
        raise InvalidInputError(f"{where}: missing {quote(numa_node)} (use null for a CPU no NUMA node lists)")
    online = c.get("online", True)
    if not isinstance(online, bool):
        raise InvalidInputError(f"{where}.online: expected true or false, got {quote(online)}")
    return CPU(
        id=expect_int(c["id"], f"{where}.id", minimum=0, maximum=MAX_CPU_ID),
        socket=expect_int(c["socket"], f"{where}.socket"),
        core=expect_int(c["core"], f"{where}.core"),
        numa_node=expect_opt_int(c[numa_node], f"{where}.{numa_node}", minimum=MIN_NUMA_NODE_ID,
                                  maximum=MAX_NUMA_NODE_ID),
        die=expect_int(c.get("die", 0), f"{where}.die"),
        l3=expect_opt_int(c.get("l3"), f"{where}.l3"),
        online=online,
    )


def _opt_str(obj: Any, where: str) -> str | None:
    if obj is None or isinstance(obj, str):
        return obj
    raise InvalidInputError(f"{where}: expected a string, got {quote(obj)}")


def _device(obj: Any, where: str, k: _Names) -> Device:
    d = k.fields(obj, where, _DEVICE_KEYS)
    dev_id = d.get("id")
    resource = d.get("resource")
    if not isinstance(dev_id, str) or not dev_id:
        raise InvalidInputError(f"{where}.id: expected a non-empty string, got {quote(dev_id)}")
    if not isinstance(resource, str) or "/" not in resource:
        raise InvalidInputError(
            f"{where}.resource: expected an extended resource name like 'nvidia.com/gpu', got {quote(resource)}"
        )
    numa_nodes, memory_numa_nodes = k("numa_nodes"), k("memory_numa_nodes")
    raw_nodes = d.get(numa_nodes)
    nodes = (
        None
        if raw_nodes is None
        else tuple(
            expect_int(x, f"{where}.{numa_nodes}[{i}]", minimum=MIN_NUMA_NODE_ID, maximum=MAX_NUMA_NODE_ID)
            for i, x in enumerate(expect_list(raw_nodes, f"{where}.{numa_nodes}"))
        )
    )
    health = d.get("health", HEALTHY)
    if not isinstance(health, str):
        raise InvalidInputError(f"{where}.health: expected a string such as 'Healthy', got {quote(health)}")
    memory_nodes = tuple(
        expect_int(x, f"{where}.{memory_numa_nodes}[{i}]", minimum=0, maximum=MAX_NUMA_NODE_ID)
        for i, x in enumerate(expect_list(d.get(memory_numa_nodes) or [], f"{where}.{memory_numa_nodes}"))
    )
    return Device(
        id=dev_id,
        resource=resource,
        numa_nodes=nodes,
        pci_address=_opt_str(d.get(k("pci_address")), f"{where}.{k('pci_address')}"),
        vendor=_opt_str(d.get("vendor"), f"{where}.vendor"),
        device_class=_opt_str(d.get("class"), f"{where}.class"),
        health=health,
        memory_numa_nodes=memory_nodes,
    )


def _dra_device(obj: Any, where: str, k: _Names) -> DRADevice:
    """A DRA device: its name and driver are checked as the API server checks a ResourceSlice's (when
    machine/dra.py publishes it); here only the shapes."""
    d = k.fields(obj, where, _DRA_DEVICE_KEYS)
    name, driver = d.get("name"), d.get("driver")
    if not isinstance(name, str) or len(name) > 63 or not _DNS_LABEL.fullmatch(name):
        raise InvalidInputError(f"{where}.name: expected a device name such as 'gpu-0' (a lowercase RFC 1123 label, "
                                f"as ResourceSlices need), got {quote(name)}")
    if not isinstance(driver, str) or "." not in driver:
        raise InvalidInputError(
            f"{where}.driver: expected a DRA driver name such as 'gpu.nvidia.com', got {quote(driver)}")
    attributes = d.get("attributes") or {}
    if not isinstance(attributes, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str | int | bool) for k, v in attributes.items()):
        raise InvalidInputError(f"{where}.attributes: expected a mapping of names to strings, integers or booleans "
                                f"such as {{model: h100}}, got {quote(attributes)}")
    capacity = d.get("capacity") or {}
    if not isinstance(capacity, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str | int) and not isinstance(v, bool) for k, v in capacity.items()):
        raise InvalidInputError(f"{where}.capacity: expected a mapping of names to quantities such as "
                                f"{{memory: 80Gi}}, got {quote(capacity)}")
    return DRADevice(
        name=name, driver=driver,
        numa_node=expect_opt_int(d.get(k("numa_node")), f"{where}.{k('numa_node')}", minimum=0,
                                 maximum=MAX_NUMA_NODE_ID),
        pci_address=_opt_str(d.get(k("pci_address")), f"{where}.{k('pci_address')}"),
        pcie_root=_opt_str(d.get(k("pcie_root")), f"{where}.{k('pcie_root')}"),
        attributes=dict(attributes), capacity={k: str(v) for k, v in capacity.items()},
    )
