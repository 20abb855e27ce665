"""An independent, deliberately plain reading of a sysfs tree as the kubelet sees it, for the dump tests:
cadvisor's GetNodesInfo (utils/sysinfo/sysinfo.go, utils/sysfs/sysfs.go) and the MachineInfo counts of
machine/info.go (GetSockets, machine/machine.go) followed line by line, then topology.Discover
(pkg/kubelet/cm/cpumanager/topology/topology.go). These files read the same from cadvisor v0.52.1 to
v0.57.0, the versions kubelets 1.33 to 1.37 vendor. It shares no code with numalign's reader (it imports
nothing from numalign) and handles only what the dumps contain; anything else raises.

Result: {"cpus": {cpu: (numa node, socket, core id, uncore id)} (CPUDetails: a CPU listed under two
nodes keeps the last), "nodes": [ids in cadvisor order], "memory": {node: bytes}, "hugepages": {node:
{page size kB: pages}}, "distances": {node: raw row, as sysfs gives it, kept by node id},
"num_cores": cadvisor's NumCores (logical CPUs: Discover's NumCPUs), "num_sockets": cadvisor's
NumSockets (Discover's NumSockets), "num_physical_cores": Discover's NumCores (each node's cores
counted, so a core listed under two nodes counts twice)}.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any


class TopologyError(Exception):
    """cadvisor's GetNodesInfo returned an error: the kubelet runs with no topology."""


def _file(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:  # noqa: PTH123  # plain, on purpose: not numalign's reader
            return fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def _go_glob(pattern: str) -> list[str]:
    return sorted(glob.glob(pattern))  # noqa: PTH207  # Go's filepath.Glob, plainly


def _online_ok(root: str, cpu: int) -> bool:
    text = _file(f"{root}/sys/devices/system/cpu/online")
    if text is None:
        return True
    if len(text) == 0:
        return False
    for piece in text.strip().split(","):
        lo_hi = piece.split("-")
        try:
            lo, hi = int(lo_hi[0]), int(lo_hi[-1])
        except ValueError:
            return False
        if len(lo_hi) > 2:
            return False
        if lo <= cpu <= hi:
            return True
    return False


def _atoi(text: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"[+-]?\d+", t):
        raise TopologyError(f"Atoi {t!r}")
    return int(t)


def _cores(root: str, cpu_dirs: list[str]) -> list[dict[str, Any]]:
    cores: list[dict[str, Any]] = []
    for d in cpu_dirs:
        cpu = int(re.search(r"/cpu(\d+)", d).group(1))  # type: ignore[union-attr]
        if not _online_ok(root, cpu):
            continue
        core_txt = _file(d + "/topology/core_id")
        if core_txt is None:
            continue
        pkg_txt = _file(d + "/topology/physical_package_id")
        if pkg_txt is None:
            continue
        core_id, pkg = _atoi(core_txt), _atoi(pkg_txt)
        found = [c for c in cores if c["id"] == core_id and c["socket"] == pkg]
        if found:
            found[-1]["threads"].append(cpu)
        else:
            cores.append({"id": core_id, "socket": pkg, "threads": [cpu], "uncore": []})
    return cores


def _caches(root: str, node: dict[str, Any]) -> None:
    cores = node["cores"]
    for core in cores:
        cpu = core["threads"][0]
        base = f"{root}/sys/devices/system/cpu/cpu{cpu}/cache"
        if not os.path.isdir(base):  # noqa: PTH112
            return
        infos = []
        for name in sorted(os.listdir(base)):  # noqa: PTH208
            if not name.startswith("index"):
                continue
            vals = {k: _file(f"{base}/{name}/{k}") for k in ("id", "size", "level", "type", "shared_cpu_map")}
            if any(v is None for v in vals.values()):
                return  # GetCacheInfo failed: addCacheInfo stops, keeping what it added
            m_id = re.match(r"\s*(-?\d+)", vals["id"] or "")
            m_size = re.match(r"\s*(\d+)K", vals["size"] or "")
            m_level = re.match(r"\s*(\d+)", vals["level"] or "")
            if not (m_id and m_size and m_level):
                return
            count = sum(bin(int(w.strip(), 16)).count("1") for w in (vals["shared_cpu_map"] or "").split(","))
            infos.append((int(m_id.group(1)), int(m_size.group(1)), int(m_level.group(1)),
                          (vals["type"] or "").strip(), count))
        per_core = len(core["threads"])
        per_node = len(cores) * per_core
        for cid, size, level, ctype, count in infos:
            key = (cid, size, level, ctype)
            if level > 2:
                if count == per_node:
                    node.setdefault("caches", [])
                    if key not in node["caches"]:
                        node["caches"].append(key)
                elif key not in core["uncore"]:
                    core["uncore"].append(key)


def read(root: str) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    logical = 0
    node_dirs = _go_glob(f"{root}/sys/devices/system/node/node*[0-9]")
    if node_dirs:
        for nd in node_dirs:
            node: dict[str, Any] = {"id": int(re.search(r"node/node(\d+)", nd).group(1)),  # type: ignore[union-attr]
                                    "cores": [], "memory": 0, "hugepages": {}, "distances": None}
            cpu_dirs = _go_glob(nd + "/cpu*[0-9]")
            if cpu_dirs:
                node["cores"] = _cores(root, cpu_dirs)
                logical += sum(len(c["threads"]) for c in node["cores"])
            _caches(root, node)
            mem = _file(nd + "/meminfo")
            if mem is not None:
                m = re.search(r"MemTotal:\s*([0-9]+) kB", mem.strip())
                if m is None:
                    raise TopologyError("meminfo")
                node["memory"] = int(m.group(1)) * 1024
            hp = nd + "/hugepages"
            if os.path.isdir(hp):  # noqa: PTH112
                for name in sorted(os.listdir(hp)):  # noqa: PTH208
                    size = int(name.split("-")[1].split("kB")[0])
                    nr = _file(f"{hp}/{name}/nr_hugepages")
                    if nr is None:
                        raise TopologyError("nr_hugepages")
                    node["hugepages"][size] = int(nr.strip())
            dist = _file(nd + "/distance")
            if dist is not None:
                parts = dist.strip().split(" ")
                if not all(p.isdigit() for p in parts):
                    raise TopologyError("distance")
                node["distances"] = [int(p) for p in parts]
            nodes.append(node)
    else:
        cpu_dirs = _go_glob(f"{root}/sys/devices/system/cpu/cpu*[0-9]")
        packages: dict[int, list[str]] = {}
        for d in cpu_dirs:
            t = _file(d + "/topology/physical_package_id")
            if t is not None:
                packages.setdefault(_atoi(t), []).append(d)
        for pkg in sorted(packages):
            node = {"id": pkg, "cores": _cores(root, packages[pkg]), "memory": 0, "hugepages": {},
                    "distances": None}
            _caches(root, node)
            nodes.append(node)
        logical = len(cpu_dirs)
    # topology.Discover: NumCores is the number of cores each node lists, summed
    physical_cores = sum(len(n["cores"]) for n in nodes)
    cpus: dict[int, tuple[int, int, int, int]] = {}
    for node in nodes:
        for core in node["cores"]:
            uncore = core["uncore"][0][0] if core["uncore"] else core["socket"]
            for t in core["threads"]:
                cpus[t] = (node["id"], core["socket"], min(core["threads"]), uncore)
    return {
        "cpus": cpus,
        "nodes": [n["id"] for n in nodes],
        "memory": {n["id"]: n["memory"] for n in nodes},
        "hugepages": {n["id"]: n["hugepages"] for n in nodes},
        "distances": {n["id"]: n["distances"] for n in nodes},
        "num_cores": logical,
        "num_sockets": _sockets(root),
        "num_physical_cores": physical_cores,
    }


_PHYSICAL_ID = re.compile(r"(?m)^physical id\s*:\s*([0-9]+)$")


def _sockets(root: str) -> int:
    """machine.GetSockets: distinct "physical id" values of /proc/cpuinfo (which lists online CPUs);
    none there: sysfs.GetUniqueCPUPropertyCount(cpu dir, "physical_package_id"). A dump without
    proc/cpuinfo is read as a cpuinfo without physical ids (cadvisor on the live machine had one)."""
    cpuinfo = _file(f"{root}/proc/cpuinfo") or ""
    found = set(_PHYSICAL_ID.findall(cpuinfo))
    if found:
        return len(found)
    uniques = set()
    online_path = f"{root}/sys/devices/system/cpu/online"
    for d in _go_glob(f"{root}/sys/devices/system/cpu/cpu*[0-9]"):
        cpu = int(re.search(r"cpu(\d+)$", d).group(1))  # type: ignore[union-attr]
        if _file(online_path) is not None and not _online_ok(root, cpu):
            continue  # isCPUOnline: offline, or an online file it cannot parse
        prop = _file(d + "/topology/physical_package_id")
        pkg = _file(d + "/topology/physical_package_id")
        uniques.add(f"{(prop if prop is not None else '0').strip()}_{(pkg if pkg is not None else '0').strip()}")
    return len(uniques)
