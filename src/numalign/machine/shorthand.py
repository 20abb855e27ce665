"""A machine in a few words: `2s x 2n x 28c x 2t, 256Gi/node, nvidia.com/gpu=2/node`.

sockets x NUMA nodes per socket x cores per NUMA node x threads per core, then comma-separated: memory
per NUMA node (`256Gi/node`), hugepages per NUMA node (`hugepages-1Gi=16/node`), devices per NUMA node
(`nvidia.com/gpu=2/node`) and a name (`name=gpu-node`). The same fields as a YAML mapping (`sockets`,
`numa_nodes_per_socket`, `cores_per_numa_node`, `threads_per_core`, `memory_per_numa_node`,
`hugepages_per_numa_node`, `devices_per_numa_node`, `name`) make a machine file of a few lines.

The machine is laid out as Linux numbers real servers (machine/examples.py): first threads of every
core, socket by socket, then their SMT siblings; one L3 per NUMA node; SLIT distances 10 (local), 11
(same socket), 21 (other socket). Devices get PCI addresses, one bus per device, on their NUMA node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from numalign.errors import InvalidInputError
from numalign.machine.examples import CLASS_3D, CLASS_ETHERNET, NVIDIA, _cpu_nodes, _Layout
from numalign.machine.fileformat import page_size_bytes
from numalign.machine.topology import Device, Machine

EXPECTED = ('"2s x 2n x 28c x 2t, 256Gi/node, nvidia.com/gpu=2/node" (sockets x NUMA nodes per socket x cores '
            "per NUMA node x threads per core; memory, hugepages-SIZE=N and RESOURCE=N per NUMA node)")
_TOPOLOGY = re.compile(r"^\s*(\d+)\s*([sSnNcCtT])\s*$")
_PER_NODE = re.compile(r"^\s*([^=\s]+)\s*=\s*(\d+)\s*/\s*node\s*$")
_MEMORY = re.compile(r"^\s*(\d+)\s*(Ki|Mi|Gi|Ti|KiB|MiB|GiB|TiB)\s*/\s*node\s*$")
_SHIFT = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}
_FIELDS = {"name", "sockets", "numa_nodes_per_socket", "cores_per_numa_node", "threads_per_core",
           "memory_per_numa_node", "hugepages_per_numa_node", "devices_per_numa_node"}
_YAML_KEYS = {"s": "sockets", "n": "numa_nodes_per_socket", "c": "cores_per_numa_node", "t": "threads_per_core"}


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
    for part in rest:
        if (mem := _MEMORY.match(part)) is not None:
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
                                    "(Ki, Mi, Gi or Ti, e.g. 256Gi/node), RESOURCE=N/node, hugepages-SIZE=N/node or "
                                    f"name=NAME, as in {EXPECTED}")
    fields["hugepages_per_numa_node"] = hugepages
    fields["devices_per_numa_node"] = devices
    fields.setdefault("name", " ".join(spec.split()))
    return machine_from_shorthand(fields, f"--machine {spec!r}")


def machine_from_shorthand(obj: Mapping[str, Any], source: str) -> Machine:
    """The machine of the mapping form (also what the one-line form is read into)."""
    unknown = sorted(set(obj) - _FIELDS)
    if unknown:
        raise InvalidInputError(f"{source}: unknown keys {unknown}; allowed: {', '.join(sorted(_FIELDS))}")
    sockets = _count(obj, "sockets", source, None)
    per_socket = _count(obj, "numa_nodes_per_socket", source, 1)
    cores = _count(obj, "cores_per_numa_node", source, None)
    threads = _count(obj, "threads_per_core", source, 1)
    if "memory_per_numa_node" not in obj:
        raise InvalidInputError(f"{source}: memory_per_numa_node is missing (a node without memory admits no "
                                f"pod); expected a size such as 256Gi/node, as in {EXPECTED}")
    memory = _size(obj["memory_per_numa_node"], f"{source}: memory_per_numa_node")
    raw_huge = obj.get("hugepages_per_numa_node") or {}
    raw_dev = obj.get("devices_per_numa_node") or {}
    if not isinstance(raw_huge, Mapping) or not isinstance(raw_dev, Mapping):
        raise InvalidInputError(f"{source}: hugepages_per_numa_node and devices_per_numa_node: expected mappings "
                                "such as {1Gi: 16} and {nvidia.com/gpu: 2}")
    hugepages = {page_size_bytes(k, f"{source}: hugepages_per_numa_node"): _nonneg(v, f"{source}: hugepages {k}")
                 for k, v in raw_huge.items()}
    lay = _Layout(sockets, per_socket, cores, threads, cores, memory, hugepages)

    def dist(i: int, j: int) -> int:
        return 10 if i == j else 11 if i // per_socket == j // per_socket else 21

    nodes, cpus = _cpu_nodes(lay, dist)
    devices: list[Device] = []
    bus = 0x10
    for node in range(sockets * per_socket):
        for resource, count in sorted(raw_dev.items()):
            for _ in range(_nonneg(count, f"{source}: devices_per_numa_node {resource}")):
                addr = f"0000:{bus:02x}:00.0"
                vendor, cls = (NVIDIA, CLASS_3D) if resource == "nvidia.com/gpu" else (None, CLASS_ETHERNET
                                                                                       if "net" in resource else None)
                devices.append(Device(addr, str(resource), (node,), addr, vendor, cls))
                bus += 1
    name = obj.get("name") or source
    try:
        return Machine(str(name), tuple(nodes), tuple(cpus), tuple(devices))
    except InvalidInputError as e:
        raise InvalidInputError(f"{source}: {e}") from None


def _count(obj: Mapping[str, Any], key: str, source: str, default: int | None) -> int:
    value = obj.get(key, default)
    if value is None:
        raise InvalidInputError(f"{source}: {key} is missing; expected a count >= 1, as in {EXPECTED}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{source}: {key}: expected a count >= 1, got {value!r}")
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
