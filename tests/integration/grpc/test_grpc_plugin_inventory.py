"""`numalign plugin` building blocks: YAML and sysfs PCI inventories, NUMA-aware preferred allocation."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.deviceplugin.inventory import PluginDevice, load_yaml_devices, scan_pci_devices
from numalign.deviceplugin.preferred import preferred_allocation
from numalign.errors import DiscoveryError, InvalidInputError
from numalign.k8s.deviceplugin import Device


def _dev(i: str, numa: tuple[int, ...] | None, path: tuple[str, ...] = ()) -> PluginDevice:
    return PluginDevice(Device(i, "Healthy", numa), path)


def test_grpc_yaml_inventory(tmp_path: Path) -> None:
    f = tmp_path / "devs.yaml"
    f.write_text(
        "- {id: gpu0, numa: 0, pci: '0000:3b:00.0'}\n"
        "- {id: gpu1, numa: [1, 0], health: Unhealthy}\n"
        "- {id: gpu2}\n"
        "- {id: 7, numa: []}\n"
    )
    devs = load_yaml_devices(f)
    assert [d.device for d in devs] == [
        Device("gpu0", "Healthy", (0,)),
        Device("gpu1", "Unhealthy", (0, 1)),
        Device("gpu2", "Healthy", None),
        Device("7", "Healthy", ()),
    ]
    assert devs[0].pci_path == ("pci0000", "0000:3b")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("- {id: a}\n- {id: a}\n", "listed twice"),
        ("- {id: a, numa: -1}\n", "numa must be"),
        ("- {id: a, health: Sick}\n", "health must be"),
        ("- {id: a, color: red}\n", "unknown keys"),
        ("- {numa: 0}\n", "non-empty 'id'"),
        ("id: a\n", "expected a list"),
        ("- [unclosed\n", "not valid YAML"),
    ],
)
def test_grpc_yaml_inventory_rejects_bad_input(tmp_path: Path, text: str, why: str) -> None:
    f = tmp_path / "devs.yaml"
    f.write_text(text)
    with pytest.raises(InvalidInputError, match=why):
        load_yaml_devices(f)


def make_sysfs(root: Path, devices: dict[str, tuple[str, str, int, str]]) -> None:
    """devices: address -> (class, vendor, numa_node, bridge chain under /sys/devices)."""
    base = root / "bus" / "pci" / "devices"
    base.mkdir(parents=True)
    for addr, (cls, vendor, numa, chain) in devices.items():
        real = root / "devices" / chain / addr
        real.mkdir(parents=True)
        (real / "class").write_text(cls + "\n")
        (real / "vendor").write_text(vendor + "\n")
        (real / "numa_node").write_text(f"{numa}\n")
        (base / addr).symlink_to(real)


def test_grpc_sysfs_pci_inventory(tmp_path: Path) -> None:
    make_sysfs(
        tmp_path,
        {
            "0000:3b:00.0": ("0x030200", "0x10de", 0, "pci0000:3a/0000:3a:00.0"),
            "0000:3c:00.0": ("0x030200", "0x10de", 0, "pci0000:3a/0000:3a:02.0"),
            "0000:af:00.0": ("0x030200", "0x10de", -1, "pci0000:ae/0000:ae:00.0"),
            "0000:b0:00.0": ("0x030200", "0x1002", 1, "pci0000:ae/0000:ae:02.0"),
            "0000:18:00.0": ("0x020000", "0x8086", 0, "pci0000:17/0000:17:00.0"),
        },
    )
    nv = scan_pci_devices("0x0302", "10de", tmp_path)
    assert [d.device for d in nv] == [
        Device("0000:3b:00.0", "Healthy", (0,)),
        Device("0000:3c:00.0", "Healthy", (0,)),
        Device("0000:af:00.0", "Healthy", None),  # numa_node -1: no topology
    ]
    assert nv[0].pci_path == ("pci0000:3a", "0000:3a:00.0")
    assert [d.id for d in scan_pci_devices("03", None, tmp_path)] == [
        "0000:3b:00.0",
        "0000:3c:00.0",
        "0000:af:00.0",
        "0000:b0:00.0",
    ]
    assert [d.id for d in scan_pci_devices("0x02", "0x8086", tmp_path)] == ["0000:18:00.0"]
    with pytest.raises(InvalidInputError, match="not hexadecimal"):
        scan_pci_devices("gpu", None, tmp_path)
    with pytest.raises(DiscoveryError, match="no PCI devices directory"):
        scan_pci_devices("03", None, tmp_path / "nope")


# Two NUMA nodes; node 0 has two switches (a, b), node 1 one switch (c); x has no topology.
DEVS = {
    d.id: d
    for d in [
        _dev("a0", (0,), ("r0", "a")),
        _dev("a1", (0,), ("r0", "a")),
        _dev("b0", (0,), ("r0", "b")),
        _dev("b1", (0,), ("r0", "b")),
        _dev("b2", (0,), ("r0", "b")),
        _dev("c0", (1,), ("r1", "c")),
        _dev("c1", (1,), ("r1", "c")),
        _dev("x", None, ()),
    ]
}
ALL = list(DEVS)


@pytest.mark.parametrize(
    ("available", "must", "size", "expected"),
    [
        (ALL, [], 2, ["a0", "a1"]),  # one NUMA node, one switch
        (ALL, [], 3, ["b0", "b1", "b2"]),  # the switch that fits 3
        (ALL, ["c0"], 2, ["c0", "c1"]),  # must_include pulls in its own node and switch
        (ALL, ["a1"], 3, ["a1", "a0", "b0"]),  # stay on node 0, start next to a1
        (ALL, [], 5, ["a0", "a1", "b0", "b1", "b2"]),  # all of node 0 before crossing
        (ALL, [], 6, ["a0", "a1", "b0", "b1", "b2", "c0"]),
        (["a0", "c0", "c1", "x"], [], 2, ["c0", "c1"]),
        (["a0", "c0", "x"], [], 2, ["a0", "c0"]),  # two nodes beats a device without topology
        (["a0", "x"], ["x"], 2, ["x", "a0"]),
        (ALL, ["a0", "c0"], 1, ["a0", "c0"]),  # size below must_include: must_include wins
    ],
)
def test_grpc_preferred_allocation(
    available: list[str], must: list[str], size: int, expected: list[str]
) -> None:
    assert preferred_allocation(DEVS, available, must, size) == expected


@settings(max_examples=100)
@given(
    avail=st.lists(st.sampled_from(ALL), unique=True, min_size=1),
    data=st.data(),
)
def test_grpc_preferred_allocation_properties(avail: list[str], data: st.DataObject) -> None:
    must = data.draw(st.lists(st.sampled_from(avail), unique=True, max_size=len(avail)))
    size = data.draw(st.integers(min_value=len(must), max_value=len(avail)))
    got = preferred_allocation(DEVS, avail, must, size)
    assert len(got) == size and len(set(got)) == size
    assert set(must) <= set(got) <= set(avail)

    # Fewest NUMA nodes: no other choice of the same size (keeping must) touches fewer nodes,
    # counting a device without topology as its own node so it is only used when needed.
    def nodes(ids: list[str]) -> int:
        s: set[object] = set()
        for i in ids:
            s |= set(DEVS[i].device.topology or ("none-" + i,))
        return len(s)

    from itertools import combinations

    rest = [i for i in avail if i not in must]
    best = min(nodes(list(must) + list(c)) for c in combinations(rest, size - len(must)))
    assert nodes(got) == best
