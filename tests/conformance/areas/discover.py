"""The "discover" area: cadvisor's machine info and topology.Discover on real machines' sysfs dumps
(conformance/area_discover.go), against numalign's reading of the same tree (adapters/sysfs.py, as
`numalign discover -o cadvisor` prints it, and the CPU manager's topology built from it).

The cases are not generated: they are the 42 dumps of ../shared/fixtures/hwloc/linux (BSD-licensed,
COPYING beside them), extracted once into conformance/.build/hwloc/. Only what cadvisor and numalign's
discovery read is extracted (sys/devices/system, sys/kernel/mm/hugepages, proc/meminfo, proc/cpuinfo).
"""

from __future__ import annotations

import random
import tarfile
from pathlib import Path
from typing import Any

from support.shared import hwloc_linux_dir

from conformance.harness import BUILD
from numalign.adapters.sysfs import discover_sysfs
from numalign.errors import NumalignError
from numalign.kubelet.cpumanager.topology import CPUTopology
from numalign.machine.cadvisor import machine_to_cadvisor

NAME = "discover"
MINORS = ("1.33", "1.34", "1.35", "1.36", "1.37")

_KEEP = ("sys/devices/system/cpu/", "sys/devices/system/node/", "sys/kernel/mm/hugepages/", "proc/meminfo",
         "proc/cpuinfo")
_ROOTS = BUILD / "hwloc"


def _extract(tarball: Path) -> Path:
    name = tarball.name.removesuffix(".tar.bz2")
    root = _ROOTS / name
    done = _ROOTS / f"{name}.extracted"
    if done.exists():
        return root
    # The tarball's top directory is not always named after it: extract its content under the name.
    with tarfile.open(tarball, "r|bz2") as tar:
        for member in tar:
            rest = member.name.partition("/")[2]
            if rest.startswith(_KEEP):
                member.name = rest
                tar.extract(member, root, filter="tar")
    done.touch()
    return root


def fixed_cases(version: str) -> list[dict[str, Any]]:
    """One case per dump, in name order (the cases are the dumps, whatever --cases says)."""
    _ROOTS.mkdir(parents=True, exist_ok=True)
    return [{"dump": t.name.removesuffix(".tar.bz2"), "root": str(_extract(t))}
            for t in sorted(hwloc_linux_dir().glob("*.tar.bz2"))]


def generate(rng: random.Random, version: str) -> dict[str, Any]:
    cases = fixed_cases(version)
    return cases[rng.randrange(len(cases))]


def size(case: dict[str, Any]) -> int:
    return sum(1 for _ in Path(case["root"], "sys/devices/system/cpu").glob("cpu[0-9]*"))


def _caches(caches: list[dict[str, Any]]) -> list[dict[str, int]]:
    return sorted(({"id": c["id"], "level": c["level"]} for c in caches), key=lambda c: (c["id"], c["level"]))


def numalign(case: dict[str, Any], version: str) -> dict[str, Any]:
    try:
        machine = discover_sysfs(Path(case["root"]), name=case["dump"])
    except NumalignError as e:
        return {"numalign_error": str(e)}
    info = machine_to_cadvisor(machine)
    answer: dict[str, Any] = {
        "num_cores": info["num_cores"],
        "num_physical_cores": info["num_physical_cores"],
        "num_sockets": info["num_sockets"],
        "memory_capacity": info["memory_capacity"],
        "hugepages": info.get("hugepages", []),
        "topology": [
            {
                "node_id": n["node_id"],
                "memory": n["memory"],
                "hugepages": n["hugepages"],
                "cores": [
                    {"core_id": c["core_id"], "thread_ids": c["thread_ids"], "socket_id": c["socket_id"],
                     "uncore_caches": _caches(c["uncore_caches"])}
                    for c in n["cores"]
                ],
                "caches": _caches(n["caches"]),
                "distances": n["distances"],
            }
            for n in info["topology"]
        ],
    }
    topo = CPUTopology.from_machine(machine)
    if topo.num_cpus == 0:
        answer["discover"] = {"error": "could not detect number of cpus"}
    else:
        answer["discover"] = {
            "num_cpus": topo.num_cpus,
            "num_cores": topo.num_cores,
            "num_sockets": topo.num_sockets,
            "num_numa_nodes": len({i.numa_node for i in topo.cpu_infos()}),
            "num_uncore_cache": len({i.uncore for i in topo.cpu_infos()}),
            "cpus": [[i.cpu, i.numa_node, i.socket, i.core, i.uncore] for i in topo.cpu_infos()],
        }
    return answer


def equivalent(ours: Any, theirs: Any) -> bool:
    """Equal answers, but for the memory capacity of a dump without proc/meminfo: cadvisor fails there
    (an empty /proc/meminfo is bound in its place; a live machine always has the file), and numalign
    takes the nodes' memory, its documented reading of such dumps (docs/machine-format.md)."""
    if isinstance(theirs, dict) and isinstance(ours, dict) and isinstance(theirs.get("memory_capacity"), dict):
        ours = {k: v for k, v in ours.items() if k != "memory_capacity"}
        theirs = {k: v for k, v in theirs.items() if k != "memory_capacity"}
    return bool(ours == theirs)
