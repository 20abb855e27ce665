"""hwloc's reading of every hwloc Linux sysfs dump (../shared/fixtures/hwloc/linux, BSD-3 hwloc test
data, read in place, never copied into the repository): `discover_sysfs_hwloc`, the second opinion that
`numalign discover --hwloc` shows. Decisions use the kubelet's reading, tested in test_kubelet_view_dumps.py.

Each dump is extracted once per session and discovered once. Every `.test` beside the dumps says how
hwloc was run (target .console/.xml, options, env); we compare what that run shows (NUMA nodes with
their CPUs and memory, packages, cores, PUs, the NUMA latency matrix) with our machine, narrowed the
way hwloc narrowed it (cgroup-allowed CPUs and memory nodes unless --disallowed, NVIDIA GPU memory
nodes dropped unless HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES). Separately, each machine is checked against
the sysfs files themselves.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.dumps import HWLOC, TARBALLS, extracted

from numalign.adapters.sysfs import discover_sysfs_hwloc
from numalign.errors import DiscoveryError
from numalign.machine.topology import Machine

TESTS = sorted(HWLOC.glob("*.test"))

def test_fixtures_present() -> None:
    assert len(TARBALLS) >= 40, f"expected the hwloc Linux dumps in {HWLOC}"
    assert len(TESTS) >= len(TARBALLS)


_machines: dict[str, Machine] = {}


def _root(tarball: Path, tmp_factory: pytest.TempPathFactory) -> Path:
    return extracted(tarball, tmp_factory)


def _machine(tarball: Path, tmp_factory: pytest.TempPathFactory) -> tuple[Path, Machine]:
    root = _root(tarball, tmp_factory)
    if tarball.name not in _machines:
        _machines[tarball.name] = discover_sysfs_hwloc(root)
    return root, _machines[tarball.name]


# ---- what hwloc showed ------------------------------------------------------------------------------


@dataclass
class Expected:
    pus: set[int] = field(default_factory=set)
    pu_package: dict[int, int] = field(default_factory=dict)
    pu_core: dict[int, int] = field(default_factory=dict)
    cores: list[frozenset[int]] = field(default_factory=list)
    nodes: dict[int, frozenset[int]] = field(default_factory=dict)  # P# -> CPUs under it (console: parent's)
    node_memory: dict[int, tuple[int, int]] = field(default_factory=dict)  # P# -> (low, high) bytes
    matrix_nodes: list[int] = field(default_factory=list)
    matrix: list[list[int]] = field(default_factory=list)


_UNITS = {"KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}
_OBJ = re.compile(r"^(\s*)([A-Za-z][\w]*)(?:\[[^\]]*\])?(?:\([^)]*\))?(?: L#(\d+))?(?: \((.*)\))?")


def _parse_console(text: str) -> Expected:
    exp = Expected()
    # stack of (indent, type, P#, pus-under-it); PUs are added to every open ancestor
    stack: list[tuple[int, str, int | None, set[int]]] = []
    node_parent: dict[int, set[int]] = {}
    node_logical: dict[int, int] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("Relative latency matrix") and "NUMALatency" in line and "logical" in line:
            i += 1  # header
            rows = []
            while i < len(lines) and re.match(r"^\s+\d+(\s+\d+)+\s*$", lines[i]):
                rows.append([int(x) for x in lines[i].split()])
                i += 1
            by_logical = {v: k for k, v in node_logical.items()}
            exp.matrix_nodes = [by_logical[r[0]] for r in rows]
            exp.matrix = [r[1:] for r in rows]
            continue
        m = _OBJ.match(line)
        if not m or line.startswith(("depth", " depth", "Special", "Topology", "CPU kind")):
            continue
        indent, kind, logical, attrs = len(m.group(1)), m.group(2), m.group(3), m.group(4) or ""
        if kind in ("depth", "index"):
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        pm = re.search(r"\bP#(\d+)", attrs)
        os_index = int(pm.group(1)) if pm else None
        if kind == "NUMANode" and os_index is not None:
            # a memory-side cache sits between a node and the object it is local to
            parents = [entry for entry in stack if entry[1] != "MemCache"]
            parent_pus = parents[-1][3] if parents else set()
            node_parent[os_index] = parent_pus
            node_logical[os_index] = int(logical) if logical else len(node_logical)
            mem = re.search(r"local=(\d+)(KiB|MiB|GiB|TiB)", attrs)
            if mem:
                value, shift = int(mem.group(1)), _UNITS[mem.group(2)]
                exp.node_memory[os_index] = ((value - 1) << shift, (value + 1) << shift)
            continue
        if kind == "PU" and os_index is not None:
            exp.pus.add(os_index)
            for _, t, p, pus in stack:
                pus.add(os_index)
                if t == "Package" and p is not None:
                    exp.pu_package[os_index] = p
                if t == "Core" and p is not None:
                    exp.pu_core[os_index] = p
        stack.append((indent, kind, os_index, set()))
        if kind == "Core":
            exp.cores.append(frozenset())  # filled below from the stack set
            stack[-1] = (indent, kind, os_index, _CoreSet(exp, len(exp.cores) - 1))
    exp.nodes = {k: frozenset(v) for k, v in node_parent.items()}
    exp.cores = [c for c in exp.cores if c]
    return exp


class _CoreSet(set[int]):
    """A PU set that records itself into Expected.cores as it fills."""

    def __init__(self, exp: Expected, index: int) -> None:
        super().__init__()
        self._exp = exp
        self._index = index

    def add(self, pu: int) -> None:
        super().add(pu)
        self._exp.cores[self._index] = frozenset(self)


def _mask(text: str) -> frozenset[int]:
    value = 0
    for word in text.split(","):
        value = (value << 32) | int(word, 16)
    return frozenset(b for b in range(value.bit_length()) if value >> b & 1)


def _parse_xml(text: str) -> Expected:
    exp = Expected()
    root = ET.fromstring(text)

    def walk(el: ET.Element, package: int | None, core: int | None) -> None:
        for obj in el.findall("object"):
            kind = obj.get("type")
            idx = obj.get("os_index")
            os_index = int(idx) if idx is not None else None
            if kind == "PU" and os_index is not None:
                exp.pus.add(os_index)
                if package is not None:
                    exp.pu_package[os_index] = package
                if core is not None:
                    exp.pu_core[os_index] = core
            elif kind == "NUMANode" and os_index is not None:
                exp.nodes[os_index] = _mask(obj.get("cpuset", "0x0"))
                mem = int(obj.get("local_memory", "0"))
                exp.node_memory[os_index] = (mem, mem)
            elif kind == "Core":
                exp.cores.append(_mask(obj.get("cpuset", "0x0")))
            walk(
                obj,
                os_index if kind == "Package" else package,
                os_index if kind == "Core" else core,
            )

    walk(root, None, None)
    exp.cores = [c for c in exp.cores if c]
    for d in root.findall("distances2"):
        if d.get("name") != "NUMALatency" or d.get("type") != "NUMANode":
            continue
        n = int(d.get("nbobjs", "0"))
        exp.matrix_nodes = [int(x) for x in (d.findtext("indexes") or "").split()]
        values = [int(x) for v in d.findall("u64values") for x in (v.text or "").split()]
        exp.matrix = [values[r * n : (r + 1) * n] for r in range(n)]
    return exp


# ---- how hwloc was run -----------------------------------------------------------------------------


@dataclass
class Run:
    source: Path
    target: Path
    options: str
    env: dict[str, str]


def _run(test: Path) -> Run:
    fields: dict[str, str] = {}
    env: dict[str, str] = {}
    for line in test.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^(\w+):\s*(.*)$", line)
        if not m:
            continue
        if m.group(1) == "env":
            e = re.match(r"^(\w+)=(.*)$", m.group(2))
            if e:
                env[e.group(1)] = e.group(2).strip('"')
        else:
            fields[m.group(1)] = m.group(2).strip()
    return Run(HWLOC / fields["source"], HWLOC / fields["target"], fields.get("options", ""), env)


def _cgroup_allowed(root: Path) -> tuple[frozenset[int] | None, frozenset[int] | None]:
    """The CPUs and memory nodes hwloc's process was allowed (cgroup v1 cpuset or v2)."""
    mounts = (root / "proc" / "mounts").read_text() if (root / "proc" / "mounts").exists() else ""
    v1 = v2 = None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cpuset" or (parts[2] == "cgroup" and "cpuset" in parts[3].split(",")):
            v1 = parts[1]
        elif parts[2] == "cgroup2":
            v2 = parts[1]
    candidates: list[tuple[Path, list[str], list[str]]] = []
    cpuset_file = root / "proc" / "self" / "cpuset"
    if v1 and cpuset_file.exists():
        d = root / v1.lstrip("/") / cpuset_file.read_text().strip().lstrip("/")
        # hwloc reads the configured (not effective) sets from cgroup v1
        candidates.append((d, ["cpuset.cpus", "cpus"], ["cpuset.mems", "mems"]))
    cgroup_file = root / "proc" / "self" / "cgroup"
    if v2:
        paths = [line[3:] for line in _text(cgroup_file).splitlines() if line.startswith("0::")]
        paths.append(_text(cpuset_file))  # older hwloc dumps only kept /proc/self/cpuset
        for path in paths:
            d = root / v2.lstrip("/") / path.strip().lstrip("/")
            candidates.append((d, ["cpuset.cpus.effective"], ["cpuset.mems.effective"]))
    from numalign.k8s.cpuset import parse_cpuset

    for d, cpu_names, mem_names in candidates:
        cpus = next((d / n for n in cpu_names if (d / n).exists()), None)
        mems = next((d / n for n in mem_names if (d / n).exists()), None)
        if cpus is not None or mems is not None:
            return (
                None if cpus is None else parse_cpuset(cpus.read_text().replace("\x00", "")),
                None if mems is None else parse_cpuset(mems.read_text().replace("\x00", "")),
            )
    return None, None


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _nvidia_gpu_nodes(root: Path) -> set[int]:
    out = set()
    for status in (root / "proc" / "driver" / "nvidia" / "gpus").glob("*/numa_status"):
        m = re.search(r"Node:\s*(\d+)", status.read_text())
        if m:
            out.add(int(m.group(1)))
    return out


# ---- the comparison ---------------------------------------------------------------------------------


@pytest.mark.parametrize("test", TESTS, ids=[t.stem for t in TESTS])
def test_matches_hwloc(test: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    run = _run(test)
    if not run.source.name.endswith(".tar.bz2"):
        pytest.fail(f"{test.name}: source {run.source.name} is not a sysfs dump tarball")
    text = run.target.read_text(encoding="utf-8")
    exp = _parse_xml(text) if run.target.suffix == ".xml" else _parse_console(text)
    try:
        root, machine = _machine(run.source, tmp_path_factory)
    except DiscoveryError as e:
        _check_refusal(e, _root(run.source, tmp_path_factory), exp)
        return

    allowed_cpus, allowed_mems = (None, None) if "--disallowed" in run.options else _cgroup_allowed(root)
    hidden_nodes: set[int] = set()
    if run.env.get("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES") != "1":
        hidden_nodes |= _nvidia_gpu_nodes(root)

    ours_pus = {c.id for c in machine.cpus if c.online}
    if allowed_cpus is not None:
        ours_pus &= allowed_cpus
    assert ours_pus == exp.pus, (
        f"PUs differ: ours-only {sorted(ours_pus - exp.pus)}, hwloc-only {sorted(exp.pus - ours_pus)}"
    )

    by_id = {c.id: c for c in machine.cpus}
    for pu, package in exp.pu_package.items():
        assert by_id[pu].socket == package, f"CPU {pu}: socket {by_id[pu].socket}, hwloc Package P#{package}"
    for pu, core in exp.pu_core.items():
        assert by_id[pu].core == core, f"CPU {pu}: core {by_id[pu].core}, hwloc Core P#{core}"
    if exp.cores:
        ours_cores = {c & ours_pus for c in machine.physical_cores()} - {frozenset()}
        assert ours_cores == set(exp.cores)

    ours_nodes = {n.id: n for n in machine.numa_nodes if n.id not in hidden_nodes}
    if allowed_mems is not None:
        ours_nodes = {i: n for i, n in ours_nodes.items() if i in allowed_mems}
    overlapping = run.env.get("HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS") is not None
    if overlapping:  # hwloc kept nodes that overlap earlier ones; we ignore them, as hwloc does by default
        assert set(ours_nodes) <= set(exp.nodes)
    else:
        assert set(ours_nodes) == set(exp.nodes), "NUMA node ids differ"
    for node_id, node in ours_nodes.items():
        cpus = node.cpus & ours_pus
        if cpus:
            # hwloc gives a CPU-less node the locality of its initiators or nearest nodes instead
            assert cpus == exp.nodes[node_id], f"NUMA node {node_id} CPUs"
        low, high = exp.node_memory.get(node_id, (0, 0))
        assert low <= node.memory_bytes <= high, f"NUMA node {node_id} memory {node.memory_bytes}"

    if exp.matrix and not overlapping:
        ids = machine.numa_ids()
        for row_id, row in zip(exp.matrix_nodes, exp.matrix, strict=True):
            dist = machine.node(row_id).distances
            assert dist is not None, f"NUMA node {row_id}: no distances, hwloc has {row}"
            assert [dist[ids.index(j)] for j in exp.matrix_nodes] == row, f"NUMA node {row_id} distances"


def _check_refusal(e: DiscoveryError, root: Path, exp: Expected) -> None:
    """Discovery may refuse a dump only for contradictory core topology, naming the directory, and
    only where hwloc indeed shows the CPUs it names in different cores."""
    m = re.match(r"^(\S+/cpu(\d+)/topology): CPUs (\d+) and (\d+) both report", str(e))
    assert m, f"unexpected DiscoveryError: {e}"
    assert Path(m.group(1)).is_dir() and Path(m.group(1)).is_relative_to(root)
    a, b = int(m.group(3)), int(m.group(4))
    core_of = {pu: core for core in exp.cores for pu in core}
    assert a in exp.pus and b in exp.pus
    assert core_of.get(a) != core_of.get(b) or a not in core_of, f"hwloc shows CPUs {a} and {b} in one core"
    for cpu in (a, b):
        topo = root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "topology"
        assert (topo / "core_id").exists()


@pytest.mark.parametrize("tarball", TARBALLS, ids=[t.name.split(".")[0] for t in TARBALLS])
def test_matches_sysfs_files(tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    try:
        root, machine = _machine(tarball, tmp_path_factory)
    except DiscoveryError as e:  # checked against hwloc in test_matches_hwloc
        assert "thread_siblings puts them in different cores" in str(e)
        return
    system = root / "sys" / "devices" / "system"
    for c in machine.cpus:
        topo = system / "cpu" / f"cpu{c.id}" / "topology"
        if (topo / "physical_package_id").exists():
            assert max(int((topo / "physical_package_id").read_text().strip("\x00\n ")), 0) == c.socket
        if (topo / "core_id").exists():
            assert int((topo / "core_id").read_text().strip("\x00\n ")) == c.core
    claimed: set[int] = set()
    for node in machine.numa_nodes:
        d = system / "node" / f"node{node.id}"
        if not d.exists():
            assert [n.id for n in machine.numa_nodes] == [0], "only a NUMA-less kernel gets a made-up node 0"
            continue
        raw = _mask((d / "cpumap").read_text().strip("\x00\n "))
        assert node.cpus <= raw
        assert not (node.cpus & claimed)
        claimed |= node.cpus
        assert {c for c in raw if c in machine.online_cpus()} == node.cpus
        meminfo = (d / "meminfo").read_text()
        kb = int(re.search(r"MemTotal:\s*(\d+)", meminfo).group(1))  # type: ignore[union-attr]
        assert node.memory_bytes == kb * 1024
        hp_dir = d / "hugepages"
        if hp_dir.is_dir():
            for sub in hp_dir.iterdir():
                size = int(sub.name.removeprefix("hugepages-").removesuffix("kB")) * 1024
                assert node.hugepages[size] == int((sub / "nr_hugepages").read_text().strip("\x00\n "))
    _check_distances(system / "node", machine)
    for dev in machine.devices:
        numa = root / "sys" / "bus" / "pci" / "devices" / dev.id / "numa_node"
        value = int(numa.read_text().strip("\x00\n ")) if numa.exists() else -1
        assert dev.numa_nodes == ((value,) if value >= 0 and value in machine.numa_ids() else None)
    # every online CPU the kubelet would see is in exactly one NUMA node
    infos = machine.cpu_infos()
    assert [i.id for i in infos] == sorted(c for n in machine.numa_nodes for c in n.cpus)


def _check_distances(node_root: Path, machine: Machine) -> None:
    """Each kept node's row is its distance file, read at the columns of the kept nodes (the file has
    a column per online node, or per possible node on hand-edited dumps)."""
    online_file = node_root / "online"
    if not online_file.exists():
        return
    from numalign.k8s.cpuset import parse_cpuset

    online = sorted(parse_cpuset(online_file.read_text().replace("\x00", "")))
    possible_file = node_root / "possible"
    possible = sorted(parse_cpuset(possible_file.read_text().replace("\x00", ""))) if possible_file.exists() else []
    for node in machine.numa_nodes:
        path = node_root / f"node{node.id}" / "distance"
        if not path.exists():
            assert node.distances is None
            continue
        row = [int(x) for x in path.read_text().replace("\x00", "").split()]
        if any(x <= 0 for x in row):
            assert node.distances is None
            continue
        columns = online if len(row) == len(online) else possible
        assert node.distances == tuple(row[columns.index(k)] for k in machine.numa_ids())


def test_fsroot_without_sysfs_is_refused_clearly() -> None:
    """linux/allowed/test1.fsroot only carries cgroup restrictions for a synthetic hwloc topology."""
    from numalign.adapters.sysfs import load_machine

    fsroot = HWLOC / "allowed" / "test1.fsroot.tar.bz2"
    with pytest.raises(DiscoveryError, match=r"no sys/ directory inside \(or several\); expected a sysfs root"):
        load_machine(str(fsroot))
