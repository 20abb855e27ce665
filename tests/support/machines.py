"""A realistic GPU server for admission tests: 2 sockets x 2 NUMA nodes x 28 cores x 2 threads (224
CPUs, siblings 112 apart), 256 GiB and 16 x 1 GiB hugepages per NUMA node, 8 GPUs (two per NUMA node)."""

from __future__ import annotations

from typing import Any

from numalign.machine.fileformat import machine_from_dict
from numalign.machine.topology import Machine

CORES_PER_NUMA = 28
DISTANCES = [[10, 12, 32, 32], [12, 10, 32, 32], [32, 32, 10, 12], [32, 32, 12, 10]]


def gpu_node_dict(gpus_per_numa: int = 2) -> dict[str, Any]:
    cpus = []
    for numa in range(4):
        for thread in range(2):
            for c in range(CORES_PER_NUMA):
                cpus.append({"id": thread * 4 * CORES_PER_NUMA + numa * CORES_PER_NUMA + c, "socket": numa // 2,
                             "core": numa * CORES_PER_NUMA + c, "numa_node": numa, "l3": numa})
    cpus.sort(key=lambda c: int(c["id"]))
    nodes = [{"id": n, "cpus": [c["id"] for c in cpus if c["numa_node"] == n], "memory_bytes": 256 * 2**30,
              "hugepages": {"1Gi": 16}, "distances": DISTANCES[n]} for n in range(4)]
    devices = [{"id": f"0000:{0x10 + i:02x}:00.0", "resource": "nvidia.com/gpu", "numa_nodes": [i // gpus_per_numa]}
               for i in range(4 * gpus_per_numa)]
    return {"name": "gpu-224", "numa_nodes": nodes, "cpus": cpus, "devices": devices}


def gpu_node(gpus_per_numa: int = 2) -> Machine:
    return machine_from_dict(gpu_node_dict(gpus_per_numa), "gpu-224")
