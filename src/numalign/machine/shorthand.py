"""A machine in a few words: `2s x 2n x 28c x 2t, 256Gi/node, nvidia.com/gpu=2/node`.

sockets x NUMA nodes per socket x cores per NUMA node x threads per core, then comma-separated: memory
per NUMA node (`256Gi/node`), hugepages per NUMA node (`hugepages-1Gi=16/node`), devices per NUMA node
(`nvidia.com/gpu=2/node`), DRA devices per NUMA node (`dra:gpu.example.com=2/node{model=h100;
capacity.memory=80Gi}`: a DRA driver's devices with their attributes and capacity) and a name
(`name=gpu-node`). The same fields as a YAML mapping (`sockets`, `numaNodesPerSocket`, `coresPerNumaNode`,
`threadsPerCore`, `memoryPerNumaNode`, `hugepagesPerNumaNode`, `devicesPerNumaNode`, `draDevicesPerNumaNode`,
`name`: camelCase as the machine file and cluster.yaml; the older snake_case names, `numa_nodes_per_socket`
..., are read too) make a machine file of a few lines.

The machine is laid out as Linux numbers real servers (machine/examples.py): first threads of every
core, socket by socket, then their SMT siblings; one L3 per NUMA node; SLIT distances 10 (local), 11
(same socket), 21 (other socket). Devices get PCI addresses, one bus per device, on their NUMA node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from numalign.errors import InvalidInputError
from numalign.machine.examples import CLASS_3D, CLASS_ETHERNET, NVIDIA, _cpu_nodes, _Layout
from numalign.machine.fileformat import page_size_bytes
from numalign.machine.topology import Device, DRADevice, Machine

EXPECTED = ('"2s x 2n x 28c x 2t, 256Gi/node, nvidia.com/gpu=2/node" (sockets x NUMA nodes per socket x cores '
            "per NUMA node x threads per core; memory, hugepages-SIZE=N and RESOURCE=N per NUMA node)")
_TOPOLOGY = re.compile(r"^\s*(\d+)\s*([sSnNcCtT])\s*$")
_PER_NODE = re.compile(r"^\s*([^=\s]+)\s*=\s*(\d+)\s*/\s*node\s*$")
_DRA_PER_NODE = re.compile(r"^\s*dra:([^=\s{]+)\s*=\s*(\d+)\s*/\s*node\s*(?:\{([^}]*)\})?\s*$")
_MEMORY = re.compile(r"^\s*(\d+)\s*(Ki|Mi|Gi|Ti|KiB|MiB|GiB|TiB)\s*/\s*node\s*$")
_SHIFT = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}
_FIELDS = {"name", "sockets", "numa_nodes_per_socket", "cores_per_numa_node", "threads_per_core",
           "memory_per_numa_node", "hugepages_per_numa_node", "devices_per_numa_node", "dra_devices_per_numa_node"}
_YAML_KEYS = {"s": "sockets", "n": "numa_nodes_per_socket", "c": "cores_per_numa_node", "t": "threads_per_core"}
# The mapping form's names in the key style of the machine file and cluster.yaml; either spelling is read,
# one per file, and messages name the fields as the file spells them.
_CAMEL = {"numa_nodes_per_socket": "numaNodesPerSocket", "cores_per_numa_node": "coresPerNumaNode",
          "threads_per_core": "threadsPerCore", "memory_per_numa_node": "memoryPerNumaNode",
          "hugepages_per_numa_node": "hugepagesPerNumaNode", "devices_per_numa_node": "devicesPerNumaNode",
          "dra_devices_per_numa_node": "draDevicesPerNumaNode"}
_SNAKE = {v: k for k, v in _CAMEL.items()}


def looks_like_shorthand(spec: str) -> bool:
    head = spec.split(",", 1)[0]
    return bool(re.match(r"^\s*\d+\s*[sS]\b", head)) and ("x" in head or "×" in head)


def parse_shorthand(spec: str) -> Machine:
    """The machine `spec` describes (the one-line form)."""
    head, *rest = spec.split(",")
    fields: dict[str, Any] = {}
    for part in re.split(r"[x×]", head):
        m = _TOPOLOGY.match(part)
        if m is None:
            raise InvalidInputError(f"--machine {spec!r}: {part.strip()!r} is not a count with s, n, c or t; "
                                    f"expected {EXPECTED}")
        fields[_YAML_KEYS[m.group(2).lower()]] = int(m.group(1))
    hugepages: dict[str, int] = {}
    devices: dict[str, int] = {}
    dra: dict[str, Any] = {}
    for part in rest:
        if (drap := _DRA_PER_NODE.match(part)) is not None:
            dra[drap.group(1)] = {"count": int(drap.group(2)),
                                  **_dra_properties(drap.group(3) or "", f"--machine {spec!r}: {part.strip()!r}")}
        elif (mem := _MEMORY.match(part)) is not None:
            fields["memory_per_numa_node"] = f"{mem.group(1)}{mem.group(2)[:2]}"
        elif (per := _PER_NODE.match(part)) is not None:
            key, count = per.group(1), int(per.group(2))
            if key.startswith("hugepages-"):
                hugepages[key.removeprefix("hugepages-")] = count
            else:
                devices[key] = count
        elif part.strip().startswith("name="):
            fields["name"] = part.strip().removeprefix("name=")
        else:
            raise InvalidInputError(f"--machine {spec!r}: cannot read {part.strip()!r}; expected SIZE/node "
                                    "(Ki, Mi, Gi or Ti, e.g. 256Gi/node), RESOURCE=N/node, hugepages-SIZE=N/node, "
                                    "dra:DRIVER=N/node{ATTRIBUTE=VALUE;capacity.NAME=QUANTITY} or "
                                    f"name=NAME, as in {EXPECTED}")
    fields["hugepages_per_numa_node"] = hugepages
    fields["devices_per_numa_node"] = devices
    if dra:
        fields["dra_devices_per_numa_node"] = dra
    fields.setdefault("name", " ".join(spec.split()))
    return machine_from_shorthand(fields, f"--machine {spec!r}")


def machine_from_shorthand(obj: Mapping[str, Any], source: str) -> Machine:
    """The machine of the mapping form (also what the one-line form is read into)."""
    camel = any(k in _SNAKE for k in obj)

    def n(field: str) -> str:  # the field as this file spells it
        return _CAMEL.get(field, field) if camel else field

    allowed = {n(f) for f in _FIELDS}
    unknown = sorted(str(k) for k in obj if k not in allowed)
    if unknown:
        mixed = [k for k in unknown if k in _CAMEL or k in _SNAKE]
        hint = (f"; write {', '.join(repr(_CAMEL.get(k) or _SNAKE[k]) for k in mixed)} (one spelling per file: "
                "camelCase, or the older snake_case)") if mixed else ""
        raise InvalidInputError(f"{source}: unknown keys {unknown}; allowed: {', '.join(sorted(allowed))}{hint}")
    obj = {_SNAKE.get(k, k): v for k, v in obj.items()}
    sockets = _count(obj, "sockets", source, None)
    per_socket = _count(obj, "numa_nodes_per_socket", source, 1, n)
    cores = _count(obj, "cores_per_numa_node", source, None, n)
    threads = _count(obj, "threads_per_core", source, 1, n)
    if "memory_per_numa_node" not in obj:
        raise InvalidInputError(f"{source}: {n('memory_per_numa_node')} is missing (a node without memory admits no "
                                f"pod); expected a size such as 256Gi/node, as in {EXPECTED}")
    memory = _size(obj["memory_per_numa_node"], f"{source}: {n('memory_per_numa_node')}")
    raw_huge = obj.get("hugepages_per_numa_node") or {}
    raw_dev = obj.get("devices_per_numa_node") or {}
    if not isinstance(raw_huge, Mapping) or not isinstance(raw_dev, Mapping):
        raise InvalidInputError(f"{source}: {n('hugepages_per_numa_node')} and {n('devices_per_numa_node')}: "
                                "expected mappings such as {1Gi: 16} and {nvidia.com/gpu: 2}")
    hugepages = {page_size_bytes(k, f"{source}: {n('hugepages_per_numa_node')}"):
                 _nonneg(v, f"{source}: hugepages {k}") for k, v in raw_huge.items()}
    lay = _Layout(sockets, per_socket, cores, threads, cores, memory, hugepages)

    def dist(i: int, j: int) -> int:
        return 10 if i == j else 11 if i // per_socket == j // per_socket else 21

    nodes, cpus = _cpu_nodes(lay, dist)
    devices: list[Device] = []
    bus = 0x10
    for node in range(sockets * per_socket):
        for resource, count in sorted(raw_dev.items()):
            for _ in range(_nonneg(count, f"{source}: {n('devices_per_numa_node')} {resource}")):
                addr = f"0000:{bus:02x}:00.0"
                vendor, cls = (NVIDIA, CLASS_3D) if resource == "nvidia.com/gpu" else (None, CLASS_ETHERNET
                                                                                       if "net" in resource else None)
                devices.append(Device(addr, str(resource), (node,), addr, vendor, cls))
                bus += 1
    dra_field = f"{source}: {n('dra_devices_per_numa_node')}"
    dra_devices = dra_devices_per_numa_node(obj.get("dra_devices_per_numa_node") or {}, range(sockets * per_socket),
                                            bus, dra_field)
    name = obj.get("name") or source
    try:
        return Machine(str(name), tuple(nodes), tuple(cpus), tuple(devices), dra_devices=dra_devices)
    except InvalidInputError as e:
        raise InvalidInputError(f"{source}: {e}") from None


def _count(obj: Mapping[str, Any], key: str, source: str, default: int | None,
           n: Callable[[str], str] = str) -> int:
    value = obj.get(key, default)
    if value is None:
        raise InvalidInputError(f"{source}: {n(key)} is missing; expected a count >= 1, as in {EXPECTED}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{source}: {n(key)}: expected a count >= 1, got {value!r}")
    return value


def _nonneg(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{where}: expected a count >= 0, got {value!r}")
    return value


def _size(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    m = re.match(r"^\s*(\d+)\s*(Ki|Mi|Gi|Ti)B?\s*$", str(value))
    if m is None:
        raise InvalidInputError(f"{where}: expected a size such as 256Gi (or bytes), got {value!r}")
    return int(m.group(1)) << _SHIFT[m.group(2)]


def _dra_properties(text: str, where: str) -> dict[str, Any]:
    """`model=h100;capacity.memory=80Gi` -> attributes and capacity (integers and true/false typed)."""
    attributes: dict[str, str | int | bool] = {}
    capacity: dict[str, str] = {}
    for item in filter(None, (i.strip() for i in text.split(";"))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise InvalidInputError(
                f"{where}: cannot read {item!r}; expected ATTRIBUTE=VALUE or capacity.NAME=QUANTITY separated by ';', "
                "as in dra:gpu.example.com=2/node{model=h100;capacity.memory=80Gi}")
        if key.startswith("capacity."):
            capacity[key.removeprefix("capacity.")] = value
        elif value in ("true", "false"):
            attributes[key] = value == "true"
        elif re.fullmatch(r"-?\d+", value):
            attributes[key] = int(value)
        else:
            attributes[key] = value
    return {"attributes": attributes, "capacity": capacity}


def dra_devices_per_numa_node(raw: Any, numa_nodes: Iterable[int], bus: int, source: str) -> tuple[DRADevice, ...]:
    """DRA devices per NUMA node: {DRIVER: N} or {DRIVER: {count: N, attributes: {...}, capacity: {...}}};
    named after the driver's first label (gpu-0, gpu-1, ... across the machine), each on a PCI bus of
    its own after the device plugins' devices. `source` names the field as its file spells it
    (`m.yaml: draDevicesPerNumaNode`, a cluster pool's `...draDevices`)."""
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{source}: expected a mapping such as "
                                "{gpu.example.com: 2} or {gpu.example.com: {count: 2, attributes: {model: h100}}}")
    specs: list[tuple[str, int, Mapping[str, Any], Mapping[str, Any]]] = []
    for driver, value in sorted(raw.items()):
        where = f"{source} {driver}"
        item = value if isinstance(value, Mapping) else {"count": value}
        unknown = sorted(set(item) - {"count", "attributes", "capacity"})
        if unknown:
            raise InvalidInputError(f"{where}: unknown keys {unknown}; allowed: attributes, capacity, count")
        attrs, cap = item.get("attributes") or {}, item.get("capacity") or {}
        if not isinstance(attrs, Mapping) or not isinstance(cap, Mapping):
            raise InvalidInputError(f"{where}: attributes and capacity: expected mappings such as {{model: h100}} "
                                    "and {memory: 80Gi}")
        specs.append((str(driver), _nonneg(item.get("count"), f"{where} count"), attrs, cap))
    out: list[DRADevice] = []
    index: dict[str, int] = {}
    for node in numa_nodes:
        for driver, count, attrs, cap in specs:
            prefix = driver.split(".")[0].lower()
            for _ in range(count):
                i = index[driver] = index.get(driver, -1) + 1
                addr = f"0000:{bus:02x}:00.0"
                out.append(DRADevice(f"{prefix}-{i}", driver, node, addr, None, dict(attrs),
                                     {k: str(v) for k, v in cap.items()}))
                bus += 1
    return tuple(out)
