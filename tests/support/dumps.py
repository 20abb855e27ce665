"""The hwloc Linux sysfs dumps (../shared/fixtures/hwloc/linux, BSD-3 hwloc test data), extracted once
per test session: only the files discovery (both readings) and the dump tests read."""

from __future__ import annotations

import bz2
import io
import re
import tarfile
from pathlib import Path

import pytest

from support.shared import hwloc_linux_dir

HWLOC = hwloc_linux_dir()
TARBALLS = sorted(HWLOC.glob("*.tar.bz2"))
TARBALL_IDS = [t.name.split(".")[0] for t in TARBALLS]

_KEEP = re.compile(
    r"""^[^/]+/(
       sys/devices/system/(node|cpu)/(online|possible|present|offline)$
     | sys/devices/system/node/node\d+/(cpumap|cpulist|distance|meminfo|cpu\d+|hugepages/[^/]+/nr_hugepages)$
     | sys/devices/system/cpu/cpu\d+/(online|topology/?|cache/index\d+/(level|type|id|size|shared_cpu_map)
         |topology/(core_id|physical_package_id|die_id|thread_siblings|core_cpus))$
     | sys/bus/pci/devices/[^/]+$
     | sys/devices/pci[^/]*/(.*/)?(class|vendor|numa_node)$
     | sys/kernel/mm/hugepages/[^/]+/nr_hugepages$
     | proc/(meminfo|cpuinfo|self/cpuset|self/cgroup|mounts|driver/nvidia/gpus/[^/]+/numa_status)$
     | (.*/)?(cpuset\.)?(cpus|mems)(\.effective)?$
    )""",
    re.X,
)

_roots: dict[str, Path] = {}


def extracted(tarball: Path, tmp_factory: pytest.TempPathFactory) -> Path:
    """The dump's sysfs root (the directory holding sys/), extracted on first use."""
    if tarball.name not in _roots:
        dest = tmp_factory.mktemp(tarball.name.split(".")[0])
        # Decompress once into memory: tarfile seeks back to extract, which would restart bz2.
        data = io.BytesIO(bz2.decompress(tarball.read_bytes()))
        with tarfile.open(fileobj=data) as tf:
            members = [m for m in tf.getmembers() if _KEEP.match(m.name)]
            tf.extractall(dest, members=members, filter="data")
        (inner,) = [p for p in dest.iterdir() if (p / "sys").is_dir()]
        _roots[tarball.name] = inner
    return _roots[tarball.name]
