"""Parsers for the text of Linux sysfs/procfs files, and the PCI -> extended resource mapping. Pure:
the adapter reads the files and hands us their text; errors name the file.

PCI devices become extended resources the way the common device plugins name them:

| PCI class (base/sub)                    | vendor            | resource                        |
|-----------------------------------------|-------------------|---------------------------------|
| 0x0300 VGA, 0x0302 3D controller        | 0x10de NVIDIA     | nvidia.com/gpu                  |
| 0x0300, 0x0302, 0x0380 display          | 0x1002 AMD        | amd.com/gpu                     |
| 0x0300, 0x0380 display                  | 0x8086 Intel      | gpu.intel.com/i915              |
| 0x0200 Ethernet, 0x0207 InfiniBand      | 0x8086 Intel      | intel.com/sriov_netdevice       |
| 0x0200 Ethernet, 0x0207 InfiniBand      | 0x15b3 Mellanox   | mellanox.com/sriov_rdma         |
| 0x0200 Ethernet, 0x0207 InfiniBand      | any other         | example.com/nic                 |
| 0x0302 3D controller, 0x1200 accelerator| any other         | example.com/accelerator         |
| 0x0b40 co-processor                     | 0x8086 Intel      | qat.intel.com/generic           |

Everything else (bridges, storage, USB, VGA of other vendors such as BMC graphics...) is not a
resource and is left out of the machine.
"""

from __future__ import annotations

import re

from numalign.errors import DiscoveryError, InvalidInputError
from numalign.k8s.cpuset import parse_cpuset
from numalign.limits import MAX_CPU_ID

NVIDIA = "0x10de"
AMD_ATI = "0x1002"
INTEL = "0x8086"
MELLANOX = "0x15b3"

_MEMTOTAL = re.compile(r"MemTotal:\s*(\d+)\s*kB")
_HUGEDIR = re.compile(r"^hugepages-(\d+)kB$")


def parse_cpumask(text: str, where: str) -> frozenset[int]:
    """A kernel cpumap: comma-separated 32-bit hex words, most significant first ("ff,00000001")."""
    words = text.strip().split(",")
    value = 0
    for w in words:
        w = w.strip()
        if not w or not re.fullmatch(r"(0x)?[0-9a-fA-F]+", w):
            raise DiscoveryError(
                f"{where}: cannot read {text.strip()!r} as a CPU mask; expected hex words like 'ff,00000001'"
            )
        value = (value << 32) | int(w, 16)
    if value.bit_length() > MAX_CPU_ID + 1:
        raise DiscoveryError(
            f"{where}: CPU mask names CPU {value.bit_length() - 1}, above {MAX_CPU_ID}, the largest CPU id Linux "
            "supports; expected a kernel cpumap; check the dump"
        )
    out = set()
    bit = 0
    while value:
        if value & 1:
            out.add(bit)
        value >>= 1
        bit += 1
    return frozenset(out)


def parse_cpulist(text: str, where: str) -> frozenset[int]:
    """A kernel cpulist ("0-3,8"); the same text as a k8s cpuset."""
    try:
        return parse_cpuset(text, where)
    except InvalidInputError as e:
        raise DiscoveryError(str(e)) from None


def parse_int(text: str, where: str) -> int:
    s = text.strip()
    try:
        return int(s, 0) if s.lower().startswith("0x") else int(s)
    except ValueError:  # not a number, or more than 4,300 digits
        raise DiscoveryError(f"{where}: cannot read {s!r} as an integer") from None


def parse_meminfo_total(text: str, where: str) -> int:
    """Bytes of `MemTotal: N kB` in a node meminfo (or /proc/meminfo)."""
    m = _MEMTOTAL.search(text)
    if not m:
        raise DiscoveryError(f"{where}: no 'MemTotal: N kB' line; expected a meminfo file")
    if len(m.group(1)) > 20:
        raise DiscoveryError(f"{where}: MemTotal of {len(m.group(1))} digits; expected a meminfo file")
    return int(m.group(1)) * 1024


def hugepage_dir_size(name: str) -> int | None:
    """Page size in bytes of a `hugepages-2048kB` directory name, None for other names."""
    m = _HUGEDIR.match(name)
    return int(m.group(1)) * 1024 if m and len(m.group(1)) <= 20 else None


def parse_distances(text: str, where: str) -> list[int]:
    parts = text.split()
    if not parts:
        raise DiscoveryError(f"{where}: empty distance row; expected one distance per NUMA node")
    return [parse_int(p, where) for p in parts]


def pci_resource(vendor: str, device_class: str) -> str | None:
    """The extended resource a device plugin would advertise this PCI function under (table above)."""
    vendor = vendor.lower()
    cls = device_class.lower()
    base_sub = cls[:6] if cls.startswith("0x") else "0x" + cls[:4]
    if base_sub in ("0x0300", "0x0302", "0x0380"):
        if vendor == NVIDIA and base_sub in ("0x0300", "0x0302"):
            return "nvidia.com/gpu"
        if vendor == AMD_ATI:
            return "amd.com/gpu"
        if vendor == INTEL and base_sub in ("0x0300", "0x0380"):
            return "gpu.intel.com/i915"
        if base_sub == "0x0302":
            return "example.com/accelerator"
        return None
    if base_sub in ("0x0200", "0x0207"):
        if vendor == INTEL:
            return "intel.com/sriov_netdevice"
        if vendor == MELLANOX:
            return "mellanox.com/sriov_rdma"
        return "example.com/nic"
    if base_sub == "0x1200":
        return "example.com/accelerator"
    if base_sub == "0x0b40" and vendor == INTEL:
        return "qat.intel.com/generic"
    return None
