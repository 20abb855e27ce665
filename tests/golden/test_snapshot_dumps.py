"""A snapshot keeps every file discovery reads: the hwloc dumps, snapshotted and read back, give the
machine (or the discovery error) that reading the dump itself gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support.dumps import TARBALL_IDS, TARBALLS, extracted

from numalign.adapters.snapshot_collect import collect
from numalign.adapters.sysfs import discover_sysfs, load_machine
from numalign.errors import DiscoveryError

# Four small dumps keep the run short: 8 NUMA nodes with distances, GPUs as NUMA nodes, PCI domains
# beyond 16 bits, and a machine without NUMA nodes.
_NAMES = ("16ia64-8n2s", "nvidiagpunumanodes", "2pa-pcidomain32bits", "4fake-4gr1nu1pu")
PICKED = [(t, n) for t, n in zip(TARBALLS, TARBALL_IDS, strict=True) if n in _NAMES]


@pytest.mark.parametrize(("tarball", "name"), PICKED, ids=[n for _, n in PICKED])
def test_snapshot_reads_back_as_the_dump(tarball: Path, name: str, tmp_path_factory: pytest.TempPathFactory,
                                         tmp_path: Path) -> None:
    root = extracted(tarball, tmp_path_factory)
    out = tmp_path / "node.tgz"
    try:
        direct: object = dataclasses.replace(discover_sysfs(root), name="node")
    except DiscoveryError as e:
        direct = type(e).__name__
    collect(out, sysfs_root=root, config=None, state_dir=None, pod_resources_socket=None)
    try:
        again: object = dataclasses.replace(load_machine(str(out)), name="node")
    except DiscoveryError as e:
        again = type(e).__name__
    assert again == direct
