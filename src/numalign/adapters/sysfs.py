"""Machine discovery from Linux sysfs under an injectable root, and `load_machine`, the one entry point
behind every `--machine FILE|NAME` option.

What is read (paths relative to the root):
  sys/devices/system/cpu/{online, cpuN/online, cpuN/topology/*, cpuN/cache/index*/{level,type,id}}
  sys/devices/system/node/{online, nodeN/{cpumap|cpulist, meminfo, distance, hugepages/*/nr_hugepages}}
  sys/bus/pci/devices/*/{class, vendor, numa_node}
  proc/meminfo and sys/kernel/mm/hugepages when the kernel has no NUMA nodes directory.

`discover_sysfs` reads the tree as cadvisor and the kubelet do (adapters/cadvisor_sysfs.py);
`discover_sysfs_hwloc` keeps hwloc's reading as a second opinion. Broken firmware there follows
hwloc's answers: a node whose CPUs were already claimed by an earlier node is
ignored (its distance column too); CPUs that are offline or have no topology directory are not
online CPUs. What cannot be made sense of raises DiscoveryError naming the file.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from numalign.adapters.archive import extract_archive
from numalign.adapters.cadvisor_sysfs import read_attribute, read_machine_info
from numalign.adapters.textfiles import read_text_file
from numalign.errors import DiscoveryError, InvalidInputError
from numalign.machine.sysfstext import (
    hugepage_dir_size,
    parse_cpulist,
    parse_cpumask,
    parse_distances,
    parse_int,
    parse_meminfo_total,
    pci_resource,
)
from numalign.machine.topology import CPU, Device, Machine, NUMANode

_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_DIR = re.compile(r"^node(\d+)$")


def _read(path: Path) -> str | None:
    try:
        # hwloc dumps (and some kernels) leave NUL padding after the value.
        return read_attribute(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise DiscoveryError(f"{path}: cannot read ({e.strerror}); check permissions of the sysfs root") from None


def _numbered(directory: Path, pattern: re.Pattern[str]) -> dict[int, Path]:
    if not directory.is_dir():
        return {}
    out = {}
    for entry in directory.iterdir():
        m = pattern.match(entry.name)
        if m:
            out[int(m.group(1))] = entry
    return out


class _Sysfs:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.system = root / "sys" / "devices" / "system"

    # ---- CPUs ------------------------------------------------------------------------------------

    def online_set(self, cpu_dirs: dict[int, Path]) -> set[int]:
        online_file = self.system / "cpu" / "online"
        text = _read(online_file)
        if text is not None:
            return set(parse_cpulist(text, str(online_file))) & set(cpu_dirs)
        online = set()
        for cpu_id, d in cpu_dirs.items():
            flag = _read(d / "online")  # cpu0 often has no online file: it cannot be offlined
            if flag is None or not flag.strip() or parse_int(flag, str(d / "online")) != 0:
                online.add(cpu_id)
        return online

    def cpu(self, cpu_id: int, d: Path, online: bool) -> tuple[CPU, frozenset[int] | None] | None:
        """The CPU and its thread siblings (None when the kernel does not say)."""
        topo = d / "topology"
        if not topo.is_dir():
            return None  # offline, or a kernel that does not export it: hwloc does not count it either
        core_text = _read(topo / "core_id")
        pkg_text = _read(topo / "physical_package_id")
        die_text = _read(topo / "die_id")
        sib_file = topo / "thread_siblings"
        sib_text = _read(sib_file)
        if sib_text is None:  # newer kernels name it core_cpus
            sib_file = topo / "core_cpus"
            sib_text = _read(sib_file)
        siblings = parse_cpumask(sib_text, str(sib_file)) if sib_text else None
        # Old kernels/arches export only thread_siblings: then name the core by its first thread.
        core = parse_int(core_text, str(topo / "core_id")) if core_text is not None else min(siblings or {cpu_id})
        socket = parse_int(pkg_text, str(topo / "physical_package_id")) if pkg_text is not None else 0
        die = parse_int(die_text, str(topo / "die_id")) if die_text is not None else 0
        # Some kernels report -1 for "unknown"; hwloc then shows one anonymous package/die/core.
        socket, die = max(socket, 0), max(die, 0)
        if core < 0:
            core = cpu_id
        return CPU(cpu_id, socket, core, None, die, self.l3_id(d), online), siblings

    def l3_id(self, d: Path) -> int | None:
        cache = d / "cache"
        if not cache.is_dir():
            return None
        for index in sorted(cache.glob("index*")):
            level = _read(index / "level")
            kind = _read(index / "type")
            if level is None or kind is None or level.strip() != "3" or kind.strip() == "Instruction":
                continue
            ident = _read(index / "id")
            return None if ident is None else parse_int(ident, str(index / "id"))
        return None

    # ---- NUMA nodes ------------------------------------------------------------------------------

    def node_ids(self) -> list[int]:
        node_root = self.system / "node"
        dirs = _numbered(node_root, _NODE_DIR)
        online_file = node_root / "online"
        text = _read(online_file)
        if text is not None:
            ids = sorted(parse_cpulist(text, str(online_file)))
            missing = [i for i in ids if i not in dirs]
            if missing:
                raise DiscoveryError(f"{online_file}: lists nodes {missing} that have no {node_root}/nodeN directory")
            return ids
        return sorted(dirs)

    def node_cpus(self, node_dir: Path) -> frozenset[int]:
        text = _read(node_dir / "cpumap")
        if text is not None:
            return parse_cpumask(text, str(node_dir / "cpumap"))
        text = _read(node_dir / "cpulist")
        if text is not None:
            return parse_cpulist(text, str(node_dir / "cpulist"))
        return frozenset(_numbered(node_dir, _CPU_DIR))

    def node_hugepages(self, hp_dir: Path) -> dict[int, int]:
        out: dict[int, int] = {}
        if not hp_dir.is_dir():
            return out
        for entry in hp_dir.iterdir():
            size = hugepage_dir_size(entry.name)
            if size is None:
                continue
            text = _read(entry / "nr_hugepages")
            if text is None:
                raise DiscoveryError(f"{entry / 'nr_hugepages'}: missing; expected the number of hugepages")
            out[size] = parse_int(text, str(entry / "nr_hugepages"))
        return out

    def distance_row(self, node_dir: Path, ids: list[int]) -> list[int] | None:
        path = node_dir / "distance"
        text = _read(path)
        if text is None:
            return None
        row = parse_distances(text, str(path))
        if any(x <= 0 for x in row):
            return None  # no SLIT (e.g. "0" on old ia64 kernels): hwloc ignores such a matrix too
        if len(row) == len(ids):
            return row
        # Some kernels (and hand-edited dumps) write a column per POSSIBLE node.
        possible_text = _read(self.system / "node" / "possible")
        if possible_text is not None:
            possible = sorted(parse_cpulist(possible_text, str(self.system / "node" / "possible")))
            if len(row) == len(possible) and set(ids) <= set(possible):
                return [row[possible.index(i)] for i in ids]
        raise DiscoveryError(
            f"{path}: {len(row)} distances {row}, expected one per online NUMA node ({len(ids)}: {ids}); "
            "the firmware's SLIT table looks broken"
        )

    # ---- devices ---------------------------------------------------------------------------------

    def devices(self, node_ids: set[int]) -> list[Device]:
        pci = self.root / "sys" / "bus" / "pci" / "devices"
        if not pci.is_dir():
            return []
        out = []
        for entry in sorted(pci.iterdir(), key=lambda p: p.name):
            cls = _read(entry / "class")
            vendor = _read(entry / "vendor")
            if cls is None or vendor is None:
                continue
            resource = pci_resource(vendor.strip(), cls.strip())
            if resource is None:
                continue
            numa_text = _read(entry / "numa_node")
            node = None if numa_text is None else parse_int(numa_text, str(entry / "numa_node"))
            nodes = (node,) if node is not None and node in node_ids else None
            out.append(Device(entry.name, resource, nodes, entry.name, vendor.strip(), cls.strip()))
        return out


def discover_sysfs(root: Path | str = "/", name: str | None = None) -> Machine:
    """The machine under `root` (a live "/" or an extracted sysfs dump) as the kubelet sees it:
    cadvisor's MachineInfo (adapters/cadvisor_sysfs.py) read as topology.Discover reads it, plus the
    PCI devices with their NUMA nodes (numalign's own addition, for device files and plugins)."""
    from numalign.machine.cadvisor import machine_from_cadvisor

    root = Path(root)
    info = read_machine_info(root)
    info["machine_id"] = name or _name(root)
    try:
        machine = machine_from_cadvisor(info, f"{root} (as cadvisor reads it)")
    except InvalidInputError as e:
        raise DiscoveryError(str(e)) from None
    devices = _Sysfs(root).devices(set(machine.numa_ids()))
    return dataclasses.replace(machine, devices=tuple(devices)) if devices else machine


def discover_sysfs_hwloc(root: Path | str = "/", name: str | None = None) -> Machine:
    """The same tree read the way hwloc reads it (cpumap membership, thread_siblings, node 0 for a
    kernel without NUMA): a second opinion for `numalign discover --hwloc`, never used for decisions."""
    fs = _Sysfs(Path(root))
    cpu_root = fs.system / "cpu"
    cpu_dirs = _numbered(cpu_root, _CPU_DIR)
    if not cpu_dirs:
        raise DiscoveryError(f"{cpu_root}: no cpuN directories; point --sysfs-root at a directory holding sys/")
    online = fs.online_set(cpu_dirs)
    known: dict[int, CPU] = {}
    siblings: dict[int, frozenset[int]] = {}
    offline_unknown: set[int] = set()
    for cpu_id in sorted(cpu_dirs):
        found = fs.cpu(cpu_id, cpu_dirs[cpu_id], cpu_id in online)
        if found is None:
            if cpu_id not in online:
                offline_unknown.add(cpu_id)
            continue
        known[cpu_id], sib = found
        if sib is not None:
            siblings[cpu_id] = sib
    if not any(c.online for c in known.values()):
        raise DiscoveryError(
            f"{cpu_root}: no online CPU has a topology directory (cpuN/topology/core_id); "
            "cannot tell cores and sockets apart"
        )
    nodes, cpu_node = _nodes(fs, known)
    cpus = tuple(CPU(c.id, c.socket, c.core, cpu_node.get(c.id), c.die, c.l3, c.online) for c in known.values())
    _check_cores(cpu_root, cpus, siblings)
    devices = fs.devices({n.id for n in nodes})
    return Machine(name or _name(fs.root), tuple(nodes), cpus, tuple(devices), frozenset(offline_unknown))


def _nodes(fs: _Sysfs, known: dict[int, CPU]) -> tuple[list[NUMANode], dict[int, int]]:
    ids = fs.node_ids()
    online_cpus = {i for i, c in known.items() if c.online}
    if not ids:  # a kernel without NUMA: one node 0 holding everything, as hwloc shows it
        meminfo = fs.root / "proc" / "meminfo"
        text = _read(meminfo)
        memory = parse_meminfo_total(text, str(meminfo)) if text is not None else 0
        hugepages = fs.node_hugepages(fs.root / "sys" / "kernel" / "mm" / "hugepages")
        return [NUMANode(0, frozenset(online_cpus), memory, hugepages, None)], dict.fromkeys(known, 0)
    claimed: set[int] = set()
    kept: list[int] = []
    node_cpu_sets: dict[int, frozenset[int]] = {}
    for node_id in ids:
        cpus = fs.node_cpus(fs.system / "node" / f"node{node_id}") & set(known)
        if cpus & claimed:
            continue  # buggy firmware lists these CPUs in an earlier node too: hwloc ignores the node
        claimed |= cpus
        kept.append(node_id)
        node_cpu_sets[node_id] = cpus
    nodes = []
    cpu_node: dict[int, int] = {}
    for node_id in kept:
        d = fs.system / "node" / f"node{node_id}"
        text = _read(d / "meminfo")
        memory = parse_meminfo_total(text, str(d / "meminfo")) if text is not None else 0
        row = fs.distance_row(d, ids)
        distances = None if row is None else tuple(row[ids.index(k)] for k in kept)
        cpus = node_cpu_sets[node_id]
        for c in cpus:
            cpu_node[c] = node_id
        nodes.append(NUMANode(node_id, cpus & online_cpus, memory, fs.node_hugepages(d / "hugepages"), distances))
    return nodes, cpu_node


def _check_cores(cpu_root: Path, cpus: tuple[CPU, ...], siblings: dict[int, frozenset[int]]) -> None:
    """cadvisor pairs threads by (NUMA node, package, core_id); when thread_siblings says two such
    CPUs are different cores, the firmware contradicts itself and the kubelet would pair CPUs that
    are not SMT siblings. Say so rather than pick one story."""
    first: dict[tuple[int | None, int, int, int], int] = {}
    for c in cpus:
        if not c.online:
            continue
        key = (c.numa_node, c.socket, c.die, c.core)
        other = first.setdefault(key, c.id)
        if other == c.id or c.id not in siblings or other not in siblings:
            continue
        if other not in siblings[c.id]:
            raise DiscoveryError(
                f"{cpu_root}/cpu{c.id}/topology: CPUs {other} and {c.id} both report package {c.socket}, "
                f"die {c.die}, core_id {c.core} in NUMA node {c.numa_node}, but thread_siblings puts them in "
                "different cores; the firmware's CPU topology is inconsistent (the kubelet would pair them "
                "as SMT siblings). Describe the machine in a machine file instead (numalign discover "
                "--output yaml, then fix the core ids)"
            )


def _name(root: Path) -> str:
    text = _read(root / "proc" / "sys" / "kernel" / "hostname")
    if text and text.strip():
        return text.strip()
    return root.resolve().name or "localhost"


# ---- --machine FILE|NAME ----------------------------------------------------------------------------


def load_machine(spec: str) -> Machine:
    """A built-in machine name, a machine file (.json/.yaml/.yml, or cadvisor MachineInfo JSON), a
    sysfs root directory, or a sysfs dump tarball (.tar, .tar.gz, .tar.bz2, .tar.xz)."""
    from numalign.machine.cadvisor import is_cadvisor_machine_info, machine_from_cadvisor
    from numalign.machine.examples import EXAMPLES, example
    from numalign.machine.fileformat import machine_from_dict, parse_machine_text
    from numalign.machine.shorthand import looks_like_shorthand, machine_from_shorthand, parse_shorthand

    if spec in EXAMPLES:
        return example(spec)
    path = Path(spec)
    if not path.exists() and looks_like_shorthand(spec):
        return parse_shorthand(spec)
    if path.is_dir():
        return discover_sysfs(find_sysfs_root(path))
    if not path.exists():
        raise InvalidInputError(
            f"--machine {spec!r}: not a built-in machine ({', '.join(EXAMPLES)}) and no such file or directory; "
            "check the name or the path"
        )
    if is_dump_archive(path):
        return _load_tarball(path)
    text = read_text_file(path, "the machine file", _expected_machine())
    if text.lstrip().startswith("<"):
        # YAML would read XML as one string ("found a str"): say what the file is instead.
        what = "an hwloc XML topology" if "<topology" in text[:4096] else "an XML file"
        raise InvalidInputError(
            f"{path}: {what}; --machine does not read hwloc XML (it is hwloc's reading of a machine, and the "
            "kubelet reads sysfs through cadvisor, which places CPUs, nodes and distances differently); "
            "expected a sysfs dump, cadvisor MachineInfo JSON or a machine file; on the machine, take a sysfs "
            "tarball with `numalign snapshot FILE` (or hwloc-gather-topology) and give it to --machine"
        )
    data = parse_machine_text(text, str(path))
    if is_cadvisor_machine_info(data):
        return machine_from_cadvisor(data, str(path))
    if not isinstance(data, Mapping):
        found = "nothing (the file is empty)" if data is None else f"a {type(data).__name__}"
        raise InvalidInputError(f"{path}: found {found}; --machine expects {_expected_machine()}")
    if "apiVersion" in data or "kind" in data:
        # A Pod or KubeletConfiguration given to the wrong option: "unknown keys" would not say so.
        raise InvalidInputError(
            f"{path}: looks like a Kubernetes manifest (apiVersion {data.get('apiVersion')!r}, kind "
            f"{data.get('kind')!r}), not a machine; --machine expects {_expected_machine()}"
        )
    if "sockets" in data:
        return machine_from_shorthand(data, str(path))
    return machine_from_dict(data, str(path))


def _expected_machine() -> str:
    from numalign.machine.examples import EXAMPLES

    return (
        "a machine file (numalign discover --output yaml, or the few-line form with sockets:), cadvisor "
        "MachineInfo JSON, a sysfs dump (directory or tarball), a shorthand such as \"2s x 2n x 28c x 2t, "
        f"256Gi/node, nvidia.com/gpu=2/node\" or a built-in name ({', '.join(EXAMPLES)})"
    )


def find_sysfs_root(path: Path) -> Path:
    """The sysfs root at or in `path`: `path` itself when it holds sys/, else its only subdirectory
    holding sys/ (hwloc dumps wrap the tree in a directory named after the machine)."""
    if not path.exists():
        raise DiscoveryError(
            f"{path}: no such directory; expected a sysfs root (a directory holding sys/, such as / or an "
            "extracted sysfs dump); check the path"
        )
    if not path.is_dir():
        raise DiscoveryError(
            f"{path}: is a file, not a directory; expected a sysfs root (a directory holding sys/); for a "
            "dump tarball or a machine file use --machine instead"
        )
    if (path / "sys").is_dir():
        return path
    try:
        inner = [p for p in path.iterdir() if (p / "sys").is_dir()]
    except OSError as e:
        raise DiscoveryError(
            f"{path}: cannot list the directory ({e.strerror}); expected a readable sysfs root; "
            "check its permissions"
        ) from None
    if len(inner) == 1:
        return inner[0]
    raise DiscoveryError(f"{path}: no sys/ directory inside; expected a sysfs root (a directory holding sys/)")


def _load_tarball(path: Path) -> Machine:
    root = extracted_dump(path)
    try:
        return discover_sysfs(root, name=dump_name(path))
    except DiscoveryError as e:
        # Name the file in the archive, not the private directory it was extracted to.
        raise DiscoveryError(str(e).replace(f"{_extracted[path.resolve()].name}/", f"{path}:")) from None


def is_dump_archive(path: Path) -> bool:
    """A sysfs dump tarball by its name (.tar, .tar.gz, .tar.bz2, .tar.xz, .tgz)."""
    return ".tar" in path.suffixes or path.suffix == ".tgz"


def dump_name(path: Path) -> str:
    return path.name.split(".tar")[0].removesuffix(".tgz")


_extracted: dict[Path, tempfile.TemporaryDirectory[str]] = {}  # removed when the process ends

# The files discovery reads (this module and cadvisor_sysfs), below a dump's sys/ or proc/: a
# must-gather sysinfo.tgz holds ~10,000 files of which a few hundred are these, and extracting the rest
# cost seconds. PCI devices are links in sys/bus/pci/devices to directories under sys/devices/pci*,
# whose class, vendor and numa_node files are kept; a NUMA node's CPUs are its cpuN links (cadvisor).
_READ: Final = re.compile(
    r"(?:proc/(?:meminfo|cpuinfo)"
    r"|sys/devices/system/cpu(?:/(?:online|possible|present|cpu[0-9]+(?:/online"
    r"|/topology(?:/(?:core_id|physical_package_id|die_id|thread_siblings|core_cpus))?"
    r"|/cache(?:/index[0-9]+(?:/(?:level|type|id|size|shared_cpu_map))?)?)?))?"
    r"|sys/devices/system/node(?:/(?:online|possible|node[0-9]+(?:/(?:cpumap|cpulist|meminfo|distance"
    r"|cpu[0-9]+|hugepages(?:/.*)?))?))?"
    r"|sys/bus/pci/devices(?:/[^/]+(?:/(?:class|vendor|numa_node))?)?"  # links, or copies (tar -h)
    r"|sys/devices/pci[^/]*(?:/.*)?/(?:class|vendor|numa_node)"
    r"|sys/kernel/mm/hugepages(?:/.*)?)/?")
_ROOTS: Final = re.compile(r"(?:^|/)((?:sys|proc)(?:/.*)?)$")


def read_by_discovery(name: str) -> bool:
    """Is this archive entry one that machine discovery reads (or a directory on the way to one)?"""
    m = _ROOTS.search(name)
    if m is None:
        return False
    rel = m.group(1)
    return rel in ("sys", "proc") or _READ.fullmatch(rel) is not None


def extracted_dump(path: Path) -> Path:
    """The sysfs root of a dump tarball, extracted (bounded: adapters/archive.py) once per process into a
    private temporary directory: only its sys/ and proc/ files, which discovery reads."""
    key = path.resolve()
    if key not in _extracted:
        tmp = tempfile.TemporaryDirectory(prefix="numalign-sysfs-")
        expected = "a sysfs dump tarball holding sys/ (and proc/)"
        try:
            extract_archive(path, Path(tmp.name), f"--machine {path}", expected,
                            keep=read_by_discovery,
                            not_archive_fix="check the file, or give a machine file a .json/.yaml name")
        except BaseException:
            tmp.cleanup()
            raise
        _extracted[key] = tmp
    top = Path(_extracted[key].name)
    inner = [p for p in top.iterdir() if (p / "sys").is_dir()]
    if (top / "sys").is_dir() or len(inner) == 1:
        return top if (top / "sys").is_dir() else inner[0]
    raise DiscoveryError(f"--machine {path}: no sys/ directory inside (or several); expected a sysfs root: a dump "
                         "tarball holding sys/ (and proc/), as hwloc-gather-topology or `numalign snapshot` writes")
