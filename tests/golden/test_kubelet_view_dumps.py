"""The machine as the kubelet sees it, on every hwloc Linux sysfs dump: the CPU details (NUMA node,
socket, core, uncore cache per CPU), NUMA node ids in cadvisor's order, memory, hugepages and distances
that cadvisor's MachineInfo and topology.Discover give, or the kubelet's failure. The expected values
come from tests/support/kubelet_view.py, an independent plain reading of cadvisor's Go code; the
hand-checked cases below pin each kind of difference from hwloc's reading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import kubelet_view
from support.dumps import HWLOC, TARBALL_IDS, TARBALLS, extracted
from support.sysfs_tree import write_sysfs

from numalign.adapters.sysfs import discover_sysfs, discover_sysfs_hwloc, load_machine
from numalign.core.policies.startup import StartupError, start_policy
from numalign.errors import ConfigError, DiscoveryError
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.manager import new_cpu_manager_policy
from numalign.kubelet.cpumanager.topology import CPUTopology
from numalign.kubelet.startup import numa_info_for
from numalign.machine.cadvisor import machine_from_cadvisor, machine_to_cadvisor
from numalign.machine.fileformat import machine_from_dict, machine_to_dict
from numalign.machine.topology import Machine

_views: dict[str, tuple[dict[str, object], Machine | DiscoveryError]] = {}


def _view(tarball: Path, tmp: pytest.TempPathFactory) -> tuple[Path, dict[str, object], Machine | DiscoveryError]:
    root = extracted(tarball, tmp)
    if tarball.name not in _views:
        expected = kubelet_view.read(str(root))
        try:
            got: Machine | DiscoveryError = discover_sysfs(root)
        except DiscoveryError as e:
            got = e
        _views[tarball.name] = (expected, got)
    return root, *_views[tarball.name]


@pytest.mark.parametrize("tarball", TARBALLS, ids=TARBALL_IDS)
def test_every_dump_reads_as_the_kubelet_reads_it(tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    _, exp, got = _view(tarball, tmp_path_factory)
    nodes = exp["nodes"]
    assert isinstance(nodes, list)
    # Every dump reads: no NUMA node at all (no package id) and node -1 (package id -1) included.
    assert isinstance(got, Machine), got
    assert got.cadvisor_numa_order() == nodes
    details = {i.id: (i.numa_node, i.socket, i.core, i.uncore) for i in got.cpu_infos()}
    assert details == exp["cpus"]
    assert got.memory_by_node() == exp["memory"]
    hp = exp["hugepages"]
    assert isinstance(hp, dict)
    assert got.hugepages_by_node() == {n: {kb * 1024: c for kb, c in sizes.items()} for n, sizes in hp.items()}
    rows = exp["distances"]
    assert isinstance(rows, dict)
    # The kubelet keeps each node's row as sysfs gives it, by node id (sparse ids and memory tiers too).
    if all(r is not None for r in rows.values()):
        assert got.kubelet_distances() == {n: tuple(r) for n, r in rows.items()}
    else:
        assert got.kubelet_distances() is None
    topo = CPUTopology.from_machine(got)
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets) == (
        exp["num_cores"], exp["num_physical_cores"], exp["num_sockets"])


@pytest.mark.parametrize("tarball", TARBALLS, ids=TARBALL_IDS)
def test_a_dump_given_as_an_archive_reads_as_the_same_dump_extracted(
    tarball: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, _, extracted_machine = _view(tarball, tmp_path_factory)
    try:
        archived: Machine | DiscoveryError = load_machine(str(tarball))
    except DiscoveryError as e:
        archived = e
    if isinstance(extracted_machine, DiscoveryError):
        assert isinstance(archived, DiscoveryError)
        return
    assert isinstance(archived, Machine), archived
    assert archived.cpu_infos() == extracted_machine.cpu_infos()
    assert archived.cadvisor_numa_order() == extracted_machine.cadvisor_numa_order()
    assert archived.memory_by_node() == extracted_machine.memory_by_node()
    assert archived.kubelet_distances() == extracted_machine.kubelet_distances()
    assert archived.cadvisor == extracted_machine.cadvisor


@pytest.mark.parametrize("tarball", TARBALLS, ids=TARBALL_IDS)
def test_the_static_cpu_manager_starts_exactly_when_cadvisor_counted_cpus(
    tarball: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, exp, got = _view(tarball, tmp_path_factory)
    if not isinstance(got, Machine):
        return
    topo = CPUTopology.from_machine(got)
    if exp["num_cores"] == 0:
        with pytest.raises(ConfigError, match="could not detect number of cpus"):
            new_cpu_manager_policy("static", topo, reserved_cpu=None)
    elif not exp["cpus"]:  # Discover succeeds (NumCores counted), with no CPU to reserve from
        with pytest.raises(ConfigError, match="unable to reserve the required amount of CPUs"):
            new_cpu_manager_policy("static", topo, reserved_cpu=Quantity.from_int(1))
    else:
        assert topo.num_cpus == len(exp["cpus"])  # type: ignore[arg-type]


@pytest.mark.parametrize("tarball", TARBALLS, ids=TARBALL_IDS)
def test_cadvisor_json_round_trip_keeps_the_kubelet_view(
    tarball: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, _, got = _view(tarball, tmp_path_factory)
    if not isinstance(got, Machine):
        return
    again = machine_from_cadvisor(machine_to_cadvisor(got), "export")
    assert again.cpu_infos() == got.cpu_infos()
    assert again.memory_by_node() == got.memory_by_node()
    assert again.distance_matrix() == got.distance_matrix()
    assert again.kubelet_distances() == got.kubelet_distances() and again.cadvisor == got.cadvisor
    assert machine_from_dict(machine_to_dict(got), "file") == got  # the machine file keeps cadvisor's counts


# ---- each kind of difference from hwloc, on the dumps that show it ----------------------------------


def _tar(name: str) -> Path:
    (found,) = [t for t in TARBALLS if t.name.startswith(name + ".")]
    return found


def test_no_numa_directory_gives_one_node_per_package(tmp_path_factory: pytest.TempPathFactory) -> None:
    root, _, got = _view(_tar("2arm-2c"), tmp_path_factory)
    assert not (root / "sys/devices/system/node").exists()
    assert isinstance(got, Machine)
    # cadvisor names the node after the package id (3 here), with no memory and no distances; hwloc
    # shows one node 0 holding /proc/meminfo's memory.
    assert got.numa_ids() == [3] and got.memory_by_node() == {3: 0} and got.distance_matrix() is None
    hw = discover_sysfs_hwloc(root)
    assert hw.numa_ids() == [0] and hw.memory_by_node()[0] > 0


def test_no_package_id_at_all_gives_a_machine_without_numa_nodes(tmp_path_factory: pytest.TempPathFactory) -> None:
    # cadvisor's getCPUTopology: no node directory and no CPU with a physical_package_id: no nodes, and
    # NumCores is the number of cpuN directories. Discover then succeeds with empty CPU details.
    root, exp, got = _view(_tar("2ps3-2t"), tmp_path_factory)
    assert exp["nodes"] == [] and isinstance(got, Machine)
    assert got.numa_nodes == () and got.cpus == () and got.numa_ids() == []
    assert got.cadvisor is not None and got.cadvisor.num_cpus == 2 == exp["num_cores"]
    topo = CPUTopology.from_machine(got)
    assert (topo.num_cpus, topo.num_cores, topo.num_numa_nodes) == (2, 0, 0)
    assert got.capacity_cpus() == 2  # the node's cpu capacity is NumCores, though no CPU is placed
    assert numa_info_for(got).nodes == ()
    assert machine_from_dict(machine_to_dict(got), "file") == got
    assert machine_from_cadvisor(machine_to_cadvisor(got), "export").cadvisor == got.cadvisor
    assert discover_sysfs_hwloc(root).numa_ids() == [0]  # hwloc invents node 0


def test_package_id_minus_one_is_kept_as_node_minus_one(tmp_path_factory: pytest.TempPathFactory) -> None:
    # s390 without a node directory: package -1 becomes node -1 (socket -1, uncore -1), memory 0 on the
    # node and /proc/meminfo's MemTotal as the node's memory capacity.
    root, exp, got = _view(_tar("20s390-2g6s4c"), tmp_path_factory)
    assert exp["nodes"] == [-1] and isinstance(got, Machine)
    assert got.numa_ids() == [-1] and got.memory_by_node() == {-1: 0} and got.kubelet_distances() is None
    assert {i.numa_node for i in got.cpu_infos()} == {-1} and len(got.cpu_infos()) == 20
    meminfo = (root / "proc/meminfo").read_text()
    assert got.capacity_memory() == int(meminfo.split("MemTotal:")[1].split()[0]) * 1024 > 0
    assert numa_info_for(got).nodes == (-1,)
    assert machine_from_dict(machine_to_dict(got), "file") == got
    again = machine_from_cadvisor(machine_to_cadvisor(got), "export")
    assert again.cpu_infos() == got.cpu_infos() and again.cadvisor == got.cadvisor


def test_a_cpu_without_core_id_is_skipped(tmp_path_factory: pytest.TempPathFactory) -> None:
    # These old dumps link nodeN/cpuM to the node directory itself, so cadvisor finds no core_id.
    root, exp, got = _view(_tar("16amd64-8n2c"), tmp_path_factory)
    assert str((root / "sys/devices/system/node/node0/cpu0").readlink()) == "."
    assert isinstance(got, Machine) and got.cpus == () and exp["num_cores"] == 0
    assert len(got.numa_ids()) == 8
    assert len(discover_sysfs_hwloc(root).cpus) == 16  # hwloc reads cpumap


def test_membership_comes_from_the_node_links(tmp_path_factory: pytest.TempPathFactory) -> None:
    root, _, got = _view(_tar("8em64t-2s2ca2c-buggynuma"), tmp_path_factory)
    assert isinstance(got, Machine)
    linked = {n: {int(p.name[3:]) for p in (root / f"sys/devices/system/node/node{n}").iterdir()
                  if p.name.startswith("cpu") and p.name[3:].isdigit()} for n in got.numa_ids()}
    owner: dict[int, int] = {}
    for n in got.cadvisor_numa_order():
        for c in linked[n]:
            owner[c] = n  # the last node listing a CPU keeps it
    assert {c.id: c.numa_node for c in got.cpus} == owner
    hw = discover_sysfs_hwloc(root)
    assert hw.numa_ids() != got.numa_ids() or {c.id: c.numa_node for c in hw.cpus} != owner


def test_sparse_node_ids_keep_their_raw_rows_and_prefer_closest_says_the_kubelet_would_crash(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Rows of 8 entries (one per online node), which the kubelet indexes by node id up to 73.
    _, exp, got = _view(_tar("48amd64-4pa2n6c-sparse"), tmp_path_factory)
    assert isinstance(got, Machine)
    rows = got.kubelet_distances()
    raw = exp["distances"]
    assert isinstance(raw, dict) and rows is not None and rows == {n: tuple(r) for n, r in raw.items()}
    assert all(len(r) == 8 for r in rows.values()) and max(rows) == 73
    assert got.distance_matrix() is None  # numalign's by-position view cannot place them
    numa = numa_info_for(got)
    start_policy("best-effort", numa, {"max-allowable-numa-nodes": "8"})  # without the option it starts
    with pytest.raises(StartupError, match=r"distance row has 8 entries, but the node ids reach 73: the kubelet "
                                           r"starts, then crashes \(index out of range\)"):
        start_policy("best-effort", numa, {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "8"})


def test_an_offline_cpu0_on_an_offline_node0(tmp_path_factory: pytest.TempPathFactory) -> None:
    # /proc/cpuinfo still lists both packages: NumSockets 2; node 1 keeps its raw row [21, 10].
    _, exp, got = _view(_tar("offline-cpu0-node0"), tmp_path_factory)
    assert isinstance(got, Machine) and got.numa_ids() == [1]
    assert CPUTopology.from_machine(got).num_sockets == 2 == exp["num_sockets"]
    assert got.kubelet_distances() == {1: (21, 10)}
    exported = machine_to_cadvisor(got)
    assert exported["num_sockets"] == 2 and exported["topology"][0]["distances"] == [21, 10]


def test_a_cpu_linked_under_two_nodes_counts_in_both(tmp_path: Path) -> None:
    """Heterogeneous CPU NUMA (a node whose CPUs another node lists too): cadvisor lists the CPUs under
    both nodes, Discover sums NumCPUs and NumCores over them and its CPU details keep the last node."""
    root = write_sysfs(tmp_path / "root", nodes=2, cores=4, threads=2)
    node1 = root / "sys/devices/system/node/node1"
    for cpu in (0, 8, 1, 9):  # node 0's first two cores, linked from node 1 as well
        (node1 / f"cpu{cpu}").symlink_to(f"../../cpu/cpu{cpu}")
    exp = kubelet_view.read(str(root))
    got = discover_sysfs(root)
    topo = CPUTopology.from_machine(got)
    assert (topo.num_cpus, topo.num_cores) == (exp["num_cores"], exp["num_physical_cores"]) == (20, 10)
    assert {i.id: (i.numa_node, i.socket, i.core, i.uncore) for i in got.cpu_infos()} == exp["cpus"]
    details = exp["cpus"]
    assert isinstance(details, dict) and len(details) == 16 and {details[c][0] for c in (0, 1, 8, 9)} == {1}


def test_discover_reads_an_archive_as_the_same_dump_extracted(capsys: pytest.CaptureFixture[str]) -> None:
    """`--machine X.tar.bz2` warns as `--sysfs-root` does, and honours --hwloc."""
    from numalign.cli.main import main

    tarball = str(_tar("16amd64-8n2c"))
    assert main(["discover", "--machine", tarball, "-o", "json"]) == 0
    shown = capsys.readouterr()
    assert "cadvisor counts no CPU on this machine" in shown.err and "hwloc reads this sysfs differently" in shown.err
    assert main(["discover", "--machine", tarball, "--hwloc", "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["cpus"]) == 16  # hwloc reads cpumap


def test_hwloc_xml_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from numalign.cli.main import main

    xml = HWLOC.parent / "xml" / "nvidiaDGX2.xml"
    assert main(["discover", "--machine", str(xml)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{xml}: an hwloc XML topology; --machine does not read hwloc XML" in line and "found a str" not in line
