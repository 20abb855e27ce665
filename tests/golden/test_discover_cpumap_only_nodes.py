"""hwloc's fakeheterocpunuma dump (heterogeneous CPU NUMA: nodes whose cpumaps overlap): its node
directories hold `cpumap` files and no `cpuN` links. cadvisor's GetNodesInfo globs the links, so the
kubelet sees no CPU at all there, not the 32 CPUs and 16 cores the overlapping cpumaps would give.
`discover` says why, where the user meets the 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import kubelet_view
from support.dumps import TARBALLS, extracted

from numalign.cli.main import main


def _dump(name: str) -> str:
    (found,) = [t for t in TARBALLS if t.name.startswith(name + ".")]
    return str(found)


def test_the_heterogeneous_cpu_dump_gives_no_cpu_and_discover_says_why(
        capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    tarball = _dump("fakeheterocpunuma")
    # The oracle, written from cadvisor's code apart from numalign: no CPU under any node.
    exp = kubelet_view.read(str(extracted(Path(tarball), tmp_path_factory)))
    assert exp["num_cores"] == 0 and exp["cpus"] == {}
    assert main(["discover", "--machine", tarball, "-o", "json"]) == 0
    shown = capsys.readouterr()
    assert json.loads(shown.out)["cpus"] == []
    (line,) = [w for w in shown.err.splitlines() if "cpumap" in w]
    assert "NUMA node(s) 0,1,3,4,5 list CPUs in cpumap but have no cpuN links" in line
    assert "cadvisor reads only the links" in line
    # hwloc reads the cpumaps: the CPUs are there for it, which is why the two readings differ.
    assert main(["discover", "--machine", tarball, "--hwloc", "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["cpus"]) == 24


def test_a_dump_with_cpu_links_gets_no_such_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["discover", "--machine", _dump("fakeheteromemtiers"), "-o", "json"]) == 0
    assert "cpumap" not in capsys.readouterr().err
