"""The built-in machines have the shapes the issue asks for, and realistic values."""

from __future__ import annotations

import pytest

from numalign.errors import InvalidInputError
from numalign.machine.examples import DEFAULT_MACHINE, example, example_names
from numalign.machine.topology import Machine


def _nodes_per_socket(m: Machine) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for c in m.cpus:
        if c.numa_node is not None:
            out.setdefault(c.socket, set()).add(c.numa_node)
    return out


@pytest.mark.parametrize("name", example_names())
def test_common_sanity(name: str) -> None:
    m = example(name)
    assert m.name == name
    matrix = m.distance_matrix()
    assert matrix is not None
    ids = m.numa_ids()
    for i in ids:
        assert matrix[i][ids.index(i)] == 10
        for j in ids:
            assert matrix[i][ids.index(j)] == matrix[j][ids.index(i)]  # SLIT tables are symmetric
            assert i == j or matrix[i][ids.index(j)] > 10
    assert all(n.memory_bytes >= 0 for n in m.numa_nodes)
    cpu_nodes = [n for n in m.numa_nodes if n.has_cpu]
    assert all(n.memory_bytes >= 16 << 30 and n.hugepages for n in cpu_nodes)
    infos = m.cpu_infos()
    assert [i.id for i in infos] == sorted(m.online_cpus())
    # core ids unique per socket in sysfs terms, and the kubelet's core ids are threads of that core
    for info in infos:
        assert m.cpu(info.core).socket == info.socket
    assert example(name) is m  # cached: machines are immutable values


def test_default_is_the_dual_socket_server() -> None:
    assert DEFAULT_MACHINE == "dual-socket"
    assert example() is example("dual-socket")


def test_dual_socket() -> None:
    m = example("dual-socket")
    assert _nodes_per_socket(m) == {0: {0, 1}, 1: {2, 3}}
    assert {len(c) for c in m.physical_cores()} == {2}
    by_res = m.devices_by_resource()
    for node in m.numa_ids():
        assert sum(d.numa_nodes == (node,) for d in by_res["nvidia.com/gpu"]) >= 1
        assert sum(d.numa_nodes == (node,) for d in by_res["intel.com/sriov_netdevice"]) >= 1


def test_epyc_nps4_l3_per_ccx() -> None:
    m = example("epyc-nps4")
    assert len(m.numa_nodes) == 8 and len(m.sockets()) == 2
    assert all(len(v) == 4 for v in _nodes_per_socket(m).values())
    per_l3: dict[int, set[int]] = {}
    for c in m.cpus:
        assert c.l3 is not None
        per_l3.setdefault(c.l3, set()).add(c.core)
    assert {len(cores) for cores in per_l3.values()} == {8}  # 8-core CCX
    assert len({i.uncore for i in m.cpu_infos()}) == 16
    assert m.node(0).distances == (10, 12, 12, 12, 32, 32, 32, 32)


def test_snc_16() -> None:
    m = example("snc-16")
    assert len(m.numa_nodes) == 16 and len(m.sockets()) == 4
    assert all(len(v) == 4 for v in _nodes_per_socket(m).values())


def test_gb200_cpu_less_gpu_memory_nodes() -> None:
    m = example("gb200")
    assert len(m.numa_nodes) == 34
    cpu_nodes = [n.id for n in m.numa_nodes if n.has_cpu]
    assert cpu_nodes == [0, 1]
    assert sum(1 for n in m.numa_nodes if not n.has_cpu and n.has_memory) == 4
    gpus = m.devices_by_resource()["nvidia.com/gpu"]
    assert len(gpus) == 4 and {d.numa_nodes for d in gpus} == {(0,), (1,)}


def test_numa_64() -> None:
    m = example("numa-64")
    assert len(m.numa_nodes) == 64
    assert len(m.cpu_infos()) == 1024


def test_unknown_name() -> None:
    with pytest.raises(InvalidInputError, match="unknown built-in machine 'dual'; choose one of dual-socket"):
        example("dual")


@pytest.mark.parametrize("name", ["numa-64", "gb200", "epyc-nps4"])
def test_lookups_agree_with_the_cpu_list(name: str) -> None:
    """cpu(id), numa_of, cpus_on and numa_nodes_of are indexes over the same facts the CPU list holds."""
    m = example(name)
    for c in m.cpus:
        assert m.cpu(c.id) is c and m.numa_of(c.id) == c.numa_node
    for n in m.numa_nodes:
        assert m.cpus_on(n.id) == frozenset(c.id for c in m.cpus if c.online and c.numa_node == n.id)
        assert m.node(n.id) is n
    some = [c.id for c in m.cpus[::7]]
    assert m.numa_nodes_of(some) == {m.cpu(i).numa_node for i in some} - {None}
    assert m.cpus_on(max(m.numa_ids()) + 1) == frozenset()
    with pytest.raises(InvalidInputError, match=f"no CPU {len(m.cpus) + 1000}"):
        m.cpu(len(m.cpus) + 1000)
    with pytest.raises(InvalidInputError, match="no NUMA node 999"):
        m.node(999)


def test_gb200_gpus_sit_at_a_real_trays_pci_addresses_so_a_drivers_slice_finds_their_numa_node() -> None:
    from numalign.k8s.dra.types import ATTRIBUTE_PCI_BUS_ID, DeviceAttribute
    from numalign.machine.dra import numa_of_pci
    from numalign.machine.examples import example

    machine = example("gb200")
    gpus = [d for d in machine.devices if d.resource == "nvidia.com/gpu"]
    assert [(d.pci_address, d.numa_nodes) for d in gpus] == [
        ("0008:01:00.0", (0,)), ("0009:01:00.0", (0,)), ("0018:01:00.0", (1,)), ("0019:01:00.0", (1,))]
    # What the NVIDIA DRA driver publishes for the third GPU of a tray.
    attrs = {ATTRIBUTE_PCI_BUS_ID: DeviceAttribute("string", ("0018:01:00.0",))}
    assert numa_of_pci(machine, attrs)[0] == 1
