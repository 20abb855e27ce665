"""A sysfs tree read as the kubelet reads it: cadvisor's MachineInfo topology (google/cadvisor v0.53.0,
the version kubelet 1.35 vendors: utils/sysfs/sysfs.go, utils/sysinfo/sysinfo.go GetNodesInfo,
machine/info.go), which the kubelet's CPU manager turns into CPU details (topology.Discover) and its
Topology and memory managers into NUMA nodes, memory, hugepages and distances.

What cadvisor does, and so what this module does (paths relative to the root):
- NUMA nodes are the `sys/devices/system/node/node*[0-9]` directories, in Go's lexical glob order
  (node10 before node2); a node's CPUs are its `cpu*[0-9]` links, not cpumap. A CPU listed under two
  nodes is a thread of both; the kubelet's CPU details keep the last node listed (a map overwrite).
- A CPU counts when the global `cpu/online` list names it (every CPU when the file is missing; none
  when it cannot be parsed); its `topology/core_id` and `physical_package_id` are read as integers,
  -1 included, and a CPU missing either file is skipped. Threads are grouped into cores by
  (core_id, package id) alone: thread_siblings is never read.
- Caches come from `cpu/cpuN/cache/index*` of each core's first thread (id, size, level, type,
  shared_cpu_map); one unreadable cache file stops the node's cache discovery there (logged by
  cadvisor, not an error). An L3 shared by exactly the node's threads is a node cache, else the core's
  uncore cache.
- Memory is the node's meminfo MemTotal (0 when the file is missing), hugepages the node's
  `hugepages/hugepages-<size>kB/nr_hugepages`, distances the raw `distance` row (none when missing).
- Without a node directory, nodes are the physical packages (id = package id; memory 0, no hugepages,
  no distances); without any package id there are no nodes at all.
- Any other malformed value makes cadvisor's topology discovery fail: the kubelet then logs "Failed to
  get topology information" and runs with no topology and 0 CPUs, so its static CPU manager cannot
  start ("could not detect number of cpus"). numalign raises DiscoveryError with cadvisor's text.

Every read is bounded (sysfs attributes are small): a path that is not a regular file (a character
device such as /dev/zero, a FIFO) or is larger than the limit is refused with one line.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

from numalign.errors import DiscoveryError
from numalign.limits import MAX_CPU_ID, MAX_NUMA_NODE_ID, go_quote

log = logging.getLogger("numalign.discovery")

# Larger than any sysfs attribute or /proc/meminfo (a few kB even on 64-node machines).
MAX_ATTRIBUTE_BYTES = 1 << 20

_NODE_ID = re.compile(r"node/node(\d*)")
_CPU_ID = re.compile(r"/cpu(\d+)")
_MEMTOTAL = re.compile(r"MemTotal:\s*([0-9]+) kB")
_GO_INT = re.compile(r"[+-]?[0-9]+")
_PHYSICAL_ID = re.compile(r"^physical id\s*:\s*([0-9]+)$", re.MULTILINE)
_CORE_ID = re.compile(r"^core id\s*:\s*([0-9]+)$", re.MULTILINE)
_INT64 = 2**63


class UnsafeFileError(DiscoveryError):
    """A file discovery must not read: not a regular file, or larger than any sysfs attribute."""


def read_attribute(path: Path, limit: int = MAX_ATTRIBUTE_BYTES) -> str:
    """The text of one small file. FileNotFoundError/NotADirectoryError pass through (callers decide,
    as cadvisor's os.IsNotExist checks do); anything that is not a small regular file is refused."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a character device" if stat.S_ISCHR(st.st_mode) else (
                "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file")
            raise UnsafeFileError(
                f"{path}: is {kind}; expected a small regular sysfs file; check the dump (a sysfs "
                "attribute is never a device or a pipe)"
            )
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnsafeFileError(
            f"{path}: larger than {limit} bytes; expected a small sysfs attribute; check the dump"
        )
    return data.decode("utf-8", errors="replace").replace("\x00", "")


def _read(path: Path) -> str | None:
    """None when the file does not exist (Go's os.IsNotExist); other read errors are cadvisor errors."""
    try:
        return read_attribute(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise DiscoveryError(f"{path}: cannot read ({e.strerror}); check permissions of the sysfs root") from None


def _atoi(text: str, path: Path) -> int:
    """Go strconv.Atoi on cadvisor's TrimSpace'd value."""
    value = text.strip()
    if not _GO_INT.fullmatch(value) or len(value) > 20 or not -_INT64 <= int(value) < _INT64:
        raise DiscoveryError(f'{path}: strconv.Atoi: parsing {go_quote(value, 40)}: invalid syntax (cadvisor); '
                             "expected an integer")
    return int(value)


def _dec(digits: str, path: Path, maximum: int = _INT64 - 1) -> int:
    """Decimal digits cadvisor parses into a 64-bit integer (or an id no larger than `maximum`); more
    digits than that fail in Go as "value out of range", and in Python past 4,300 digits."""
    value = int(digits) if len(digits) <= 20 else maximum + 1
    if value > maximum:
        raise DiscoveryError(f'{path}: parsing "{digits[:24]}": value out of range (cadvisor); expected a number '
                             f"of at most {maximum}")
    return value


def _sscanf_int(text: str, path: Path, suffix: str = "") -> int:
    """fmt.Sscanf(text, "%d" + suffix): leading blanks skipped, digits, then the literal suffix."""
    m = re.match(r"\s*([+-]?[0-9]+)" + re.escape(suffix), text)
    if m is None:
        raise DiscoveryError(f"{path}: {text.strip()[:40]!r} does not match %d{suffix} (cadvisor); "
                             "expected a number")
    return _dec(m.group(1), path)


def _glob(directory: Path, prefix: str) -> list[Path]:
    """filepath.Glob(dir + "/" + prefix + "*[0-9]"), sorted as Go sorts it (by name, as bytes)."""
    try:
        names = [p.name for p in directory.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as e:
        raise DiscoveryError(f"{directory}: cannot list ({e.strerror}); check permissions") from None
    return [directory / n for n in sorted(names) if n.startswith(prefix) and n[-1:].isdigit()]


class _CadvisorSysfs:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.system = root / "sys" / "devices" / "system"
        self.cpu_root = self.system / "cpu"
        self._online_read = False
        self._online: list[tuple[int, int]] | None = None  # None: no online file, every CPU online

    # ---- sysfs.IsCPUOnline -------------------------------------------------------------------------

    def is_online(self, cpu_id: int) -> bool:
        if not self._online_read:
            self._online, self._online_read = self._read_online(), True
        if self._online is None:
            return True  # no online file: hotplug disabled, every CPU online
        if cpu_id > 0xFFFF:
            cpu_id &= 0xFFFF  # cadvisor compares as uint16
        return any(lo <= cpu_id <= hi for lo, hi in self._online)

    def _read_online(self) -> list[tuple[int, int]] | None:
        path = self.cpu_root / "online"
        text = _read(path)
        if text is None:
            return None
        if not text:
            log.info("%s is empty: cadvisor counts every CPU offline", path)
            return []
        ranges: list[tuple[int, int]] = []
        for part in text.strip().split(","):
            bounds = part.split("-", 2)
            try:
                if len(bounds) == 3:
                    raise ValueError(part)
                lo = int(bounds[0])
                hi = int(bounds[-1])
                if not (0 <= lo <= 0xFFFF and 0 <= hi <= 0xFFFF) or lo > hi:
                    raise ValueError(part)
            except ValueError:
                # cadvisor logs the error and counts the CPU offline; the ranges read before it still count
                log.info("%s: cannot parse %r: cadvisor counts the remaining CPUs offline", path, part)
                return ranges
            ranges.append((lo, hi))
        return ranges

    # ---- sysinfo.getCoresInfo ----------------------------------------------------------------------

    def cores(self, cpu_dirs: list[Path]) -> list[dict[str, Any]]:
        cores: list[dict[str, Any]] = []
        index: dict[tuple[int, int], int] = {}
        for cpu_dir in cpu_dirs:
            m = _CPU_ID.search(str(cpu_dir))
            if m is None:
                raise DiscoveryError(f"unexpected format of CPU directory, cpuDirRegExp /cpu(\\d+), cpuDir: {cpu_dir}")
            cpu_id = _dec(m.group(1), cpu_dir, MAX_CPU_ID)
            if not self.is_online(cpu_id):
                continue
            core_text = _read(cpu_dir / "topology" / "core_id")
            if core_text is None:
                log.info("cannot read core id for %s: core_id file does not exist (cadvisor skips the CPU)",
                            cpu_dir)
                continue
            core_id = _atoi(core_text, cpu_dir / "topology" / "core_id")
            pkg_text = _read(cpu_dir / "topology" / "physical_package_id")
            if pkg_text is None:
                log.info("cannot read physical package id for %s: the file does not exist (cadvisor skips "
                            "the CPU)", cpu_dir)
                continue
            package = _atoi(pkg_text, cpu_dir / "topology" / "physical_package_id")
            key = (core_id, package)
            if key not in index:
                index[key] = len(cores)
                cores.append({"core_id": core_id, "thread_ids": [], "socket_id": package,
                              "caches": [], "uncore_caches": []})
            cores[index[key]]["thread_ids"].append(cpu_id)
        return cores

    # ---- sysinfo.addCacheInfo ----------------------------------------------------------------------

    def add_caches(self, node: dict[str, Any]) -> None:
        cores = node["cores"]
        for core in cores:
            try:
                caches = self.cache_info(core["thread_ids"][0])
            except _CacheUnreadableError as e:
                log.info("node %s: no cache information from %s (cadvisor stops reading caches here)",
                         node["node_id"], e)
                return
            per_core = len(core["thread_ids"])
            per_node = len(cores) * per_core
            for cache in caches:
                c = {k: cache[k] for k in ("id", "size", "type", "level")}
                if cache["level"] > 2:
                    if cache["cpus"] == per_node:
                        if c not in node["caches"]:
                            node["caches"].append(c)
                    elif c not in core["uncore_caches"]:
                        core["uncore_caches"].append(c)
                elif cache["cpus"] == per_core:
                    core["caches"].append(c)

    def cache_info(self, cpu_id: int) -> list[dict[str, Any]]:
        cache_dir = self.cpu_root / f"cpu{cpu_id}" / "cache"
        try:
            names = sorted(p.name for p in cache_dir.iterdir())
        except OSError as e:
            raise _CacheUnreadableError(str(cache_dir)) from e
        out = []
        for name in names:
            if not name.startswith("index"):
                continue
            d = cache_dir / name
            try:
                texts = {f: read_attribute(d / f) for f in ("id", "size", "level", "type", "shared_cpu_map")}
                cache = {
                    "id": _sscanf_int(texts["id"], d / "id"),
                    "size": _sscanf_int(texts["size"], d / "size", "K") * 1024,
                    "level": _sscanf_int(texts["level"], d / "level"),
                    "type": texts["type"].strip(),
                    "cpus": _mask_count(texts["shared_cpu_map"], d / "shared_cpu_map"),
                }
            except UnsafeFileError:
                raise
            except (OSError, DiscoveryError) as e:
                raise _CacheUnreadableError(str(d)) from e
            out.append(cache)
        return out

    # ---- sysinfo.GetNodesInfo / getCPUTopology ---------------------------------------------------

    def nodes(self) -> tuple[list[dict[str, Any]], int]:
        node_dirs = _glob(self.system / "node", "node")
        if not node_dirs:
            return self._package_nodes()
        nodes = []
        logical = 0
        for node_dir in node_dirs:
            m = _NODE_ID.search(str(node_dir))
            if m is None or not m.group(1):
                raise DiscoveryError(f"failed to match regexp, str: {node_dir} (cadvisor); expected nodeN")
            node_id = _dec(m.group(1), node_dir, MAX_NUMA_NODE_ID)
            node: dict[str, Any] = {"node_id": node_id, "memory": 0, "hugepages": [], "cores": [],
                                    "caches": [], "distances": None}
            cpu_dirs = _glob(node_dir, "cpu")
            if not cpu_dirs:
                log.info("found node without any CPU, nodeDir: %s", node_dir)
            else:
                node["cores"] = self.cores(cpu_dirs)
                logical += sum(len(c["thread_ids"]) for c in node["cores"])
            self.add_caches(node)
            node["memory"] = self.node_memory(node_dir)
            node["hugepages"] = self.hugepages(node_dir / "hugepages")
            node["distances"] = self.distances(node_dir)
            nodes.append(node)
        return nodes, logical

    def _package_nodes(self) -> tuple[list[dict[str, Any]], int]:
        cpu_dirs = _glob(self.cpu_root, "cpu")
        if not cpu_dirs:
            raise DiscoveryError(f"Any CPU is not available, cpusPath: {self.cpu_root} (cadvisor); point "
                                 "--machine at a directory holding sys/devices/system/cpu")
        by_package: dict[int, list[Path]] = {}
        for cpu_dir in cpu_dirs:
            text = _read(cpu_dir / "topology" / "physical_package_id")
            if text is None:
                continue
            by_package.setdefault(_atoi(text, cpu_dir / "topology" / "physical_package_id"), []).append(cpu_dir)
        nodes = []
        # Go ranges over a map here (random order); numalign takes the package ids in ascending order.
        for package in sorted(by_package):
            node: dict[str, Any] = {"node_id": package, "memory": 0, "hugepages": [], "caches": [],
                                    "distances": None, "cores": self.cores(by_package[package])}
            self.add_caches(node)
            nodes.append(node)
        # Here cadvisor's CPU count is every cpuN directory, online or not.
        return nodes, len(cpu_dirs)

    # ---- machine.GetSockets -------------------------------------------------------------------------

    def sockets(self) -> int:
        """MachineInfo.NumSockets: the distinct "physical id"s of /proc/cpuinfo, which lists the online
        CPUs (a package whose CPUs are all offline still counts when one is listed there); when it
        names none, the distinct package ids of the online cpuN directories (machine.GetSockets). A dump
        without proc/cpuinfo is read as a cpuinfo without physical ids: cadvisor on the live machine had
        one."""
        return self._cpuinfo_count(_PHYSICAL_ID, "physical_package_id")

    def physical_cores(self) -> int:
        """MachineInfo.NumPhysicalCores: the distinct "core id"s of /proc/cpuinfo (not per package: two
        packages' core 0 are one), else the distinct (core_id, package id) pairs of the online cpuN
        directories (machine.GetPhysicalCores)."""
        return self._cpuinfo_count(_CORE_ID, "core_id")

    def _cpuinfo_count(self, pattern: re.Pattern[str], attribute: str) -> int:
        text = _read(self.root / "proc" / "cpuinfo")
        ids = set(pattern.findall(text)) if text is not None else set()
        if ids:
            return len(ids)
        # sysfs.GetUniqueCPUPropertyCount: a missing attribute or package id reads "0".
        online_file = (self.cpu_root / "online").exists()
        seen: set[tuple[str, str]] = set()
        for cpu_dir in _glob(self.cpu_root, "cpu"):
            m = _CPU_ID.search(str(cpu_dir))
            if m is None:
                return 0  # cadvisor gives up on the count
            if online_file and not self.is_online(_dec(m.group(1), cpu_dir, MAX_CPU_ID)):
                continue
            value = _read(cpu_dir / "topology" / attribute)
            package = _read(cpu_dir / "topology" / "physical_package_id")
            seen.add(((value if value is not None else "0").strip(), (package if package is not None else "0").strip()))
        return len(seen)

    def node_memory(self, node_dir: Path) -> int:
        text = _read(node_dir / "meminfo")
        if text is None:
            log.info("found node without memory information, nodeDir: %s", node_dir)
            return 0
        m = _MEMTOTAL.search(text.strip())
        if m is None:
            raise DiscoveryError(f"{node_dir / 'meminfo'}: failed to match regexp in output (cadvisor); expected "
                                 "a 'MemTotal: N kB' line")
        return _dec(m.group(1), node_dir / "meminfo") * 1024

    def hugepages(self, directory: Path) -> list[dict[str, int]]:
        try:
            names = sorted(p.name for p in directory.iterdir())
        except OSError:
            return []  # kernels without hugepage support: not an error for cadvisor
        out = []
        for name in names:
            parts = name.split("-")
            if len(parts) < 2:
                raise DiscoveryError(f"{directory / name}: expected hugepages-<size>kB (cadvisor indexes past "
                                     "the name otherwise)")
            size_text = parts[1].split("kB")[0]
            if not size_text.isdigit():
                raise DiscoveryError(f'{directory / name}: strconv.ParseUint: parsing {go_quote(size_text, 20)}: '
                                     "invalid syntax (cadvisor); expected hugepages-<size>kB")
            nr = directory / name / "nr_hugepages"
            text = _read(nr)
            if text is None:
                raise DiscoveryError(f"{nr}: missing; expected the number of hugepages (cadvisor)")
            m = re.match(r"\s*([0-9]+)", text)
            if m is None:
                raise DiscoveryError(f"could not parse file nr_hugepage for {name}, contents {text.strip()[:40]!r} "
                                     "(cadvisor)")
            out.append({"page_size": _dec(size_text, directory / name), "num_pages": _dec(m.group(1), nr)})
        return out

    def distances(self, node_dir: Path) -> list[int] | None:
        text = _read(node_dir / "distance")
        if text is None:
            log.info("found node without distance information, nodeDir: %s", node_dir)
            return None
        row = []
        for part in text.strip().split(" "):
            if not part.isdigit():
                raise DiscoveryError(f"{node_dir / 'distance'}: cannot convert {part[:20]!r} to int (cadvisor); "
                                     "expected distances separated by single spaces")
            row.append(_dec(part, node_dir / "distance"))
        return row


class _CacheUnreadableError(Exception):
    """A cache attribute cadvisor could not read: it stops the node's cache discovery, nothing more."""


def _mask_count(text: str, path: Path) -> int:
    count = 0
    for word in text.split(","):
        word = word.strip()
        try:
            count += int(word, 16).bit_count()
        except ValueError:
            raise DiscoveryError(f"{path}: failed to parse cpu map (cadvisor)") from None
    return count


def read_machine_info(root: Path) -> dict[str, Any]:
    """cadvisor's MachineInfo fields the kubelet reads: num_cores (its count of logical CPUs),
    num_physical_cores, num_sockets, memory_capacity (/proc/meminfo), hugepages (the machine's
    sys/kernel/mm/hugepages, for the node's hugepages capacity) and topology."""
    fs = _CadvisorSysfs(root)
    topology, num_cores = fs.nodes()
    meminfo = root / "proc" / "meminfo"
    text = _read(meminfo)
    # A dump without /proc/meminfo: the nodes' memory (cadvisor on the live machine read MemTotal).
    capacity = sum(node["memory"] for node in topology)
    if text is not None and (m := _MEMTOTAL.search(text)) is not None:
        capacity = _dec(m.group(1), meminfo) * 1024
    return {"num_cores": num_cores, "num_physical_cores": fs.physical_cores(), "num_sockets": fs.sockets(),
            "memory_capacity": capacity, "hugepages": fs.hugepages(root / "sys" / "kernel" / "mm" / "hugepages"),
            "topology": topology}
