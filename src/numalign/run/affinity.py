"""CPU affinity and memory binding of the calling process, straight from the kernel.

sched_setaffinity comes from the os module. set_mempolicy has no Python binding and libnuma is often
not installed, so it is called as a raw system call through libc's syscall(2): MPOL_BIND with a node
mask, which the kernel applies to every later allocation of the process and which fork and exec keep,
as the kernel's cpuset.mems would for a container.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterable
from pathlib import Path

from numalign.errors import NumalignError
from numalign.k8s.cpuset import format_cpuset, parse_cpuset

# include/uapi/linux/mempolicy.h
MPOL_DEFAULT = 0
MPOL_BIND = 2

# set_mempolicy's number per architecture (arch/*/syscall tables; asm-generic for the newer ports).
_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237, "arm64": 237, "ppc64le": 261, "ppc64": 261, "s390x": 270,
                  "riscv64": 237, "loongarch64": 237, "i386": 276, "i686": 276}

_ULONG_BITS = ctypes.sizeof(ctypes.c_ulong) * 8


class PlacementError(NumalignError):
    """The kernel refused to apply a placement (or this platform cannot)."""


def _status_list(key: str, status: Path) -> frozenset[int]:
    for line in status.read_text(encoding="ascii", errors="replace").splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return frozenset(parse_cpuset(value.strip()))
    raise PlacementError(f"{status}: no {key} line; expected a Linux /proc")


def allowed_cpus() -> frozenset[int]:
    """CPUs this process may run on (its affinity, itself bounded by its cpuset)."""
    return frozenset(os.sched_getaffinity(0))


def allowed_mems(status: Path = Path("/proc/self/status")) -> frozenset[int]:
    """NUMA nodes this process may allocate on (its cpuset's mems)."""
    return _status_list("Mems_allowed_list", status)


def set_cpu_affinity(cpus: Iterable[int]) -> None:
    wanted = sorted(set(cpus))
    try:
        os.sched_setaffinity(0, wanted)
    except OSError as e:
        raise PlacementError(f"sched_setaffinity({format_cpuset(wanted)}): {e.strerror or e}") from None


def syscall_number() -> int | None:
    return _SET_MEMPOLICY.get(platform.machine())


def set_memory_bind(nodes: Iterable[int]) -> None:
    """set_mempolicy(MPOL_BIND, nodes) for the calling thread (inherited by children and across exec)."""
    wanted = sorted(set(nodes))
    number = syscall_number()
    if number is None:
        raise PlacementError(
            f"set_mempolicy: numalign does not know its system call number on {platform.machine()}"
        )
    words = max(wanted) // _ULONG_BITS + 1
    mask = (ctypes.c_ulong * words)()
    for n in wanted:
        mask[n // _ULONG_BITS] |= 1 << (n % _ULONG_BITS)
    libc = ctypes.CDLL(None, use_errno=True)
    # maxnode counts one bit more than the mask holds: the kernel reads maxnode - 1 bits.
    rc = libc.syscall(ctypes.c_long(number), ctypes.c_int(MPOL_BIND), ctypes.byref(mask),
                      ctypes.c_ulong(words * _ULONG_BITS + 1))
    if rc != 0:
        err = ctypes.get_errno()
        raise PlacementError(f"set_mempolicy(MPOL_BIND, {format_cpuset(wanted)}): {os.strerror(err)}")
