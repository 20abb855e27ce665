"""`numalign discover` through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from numalign.cli.main import main
from numalign.cli.output import EXIT_INVALID
from numalign.machine.examples import example, example_names
from numalign.machine.fileformat import machine_from_dict


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["discover", "--list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == example_names()
    assert "NPS4" in out and "34 NUMA nodes" in out


def test_json_and_yaml_are_the_machine_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["discover", "--machine", "epyc-nps4", "--output", "json"]) == 0
    assert machine_from_dict(json.loads(capsys.readouterr().out), "out") == example("epyc-nps4")
    assert main(["discover", "--machine", "gb200", "-o", "yaml"]) == 0
    assert machine_from_dict(yaml.safe_load(capsys.readouterr().out), "out") == example("gb200")


def test_text_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["discover", "--machine", "dual-socket"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == ("machine dual-socket: 2 sockets, 4 NUMA nodes, 64 cores, 128 CPUs, 1 TiB memory, 12 devices")
    assert "NUMA node 2  memory 256 GiB  hugepages 2Mi x 4096, 1Gi x 16  CPUs 32-47,96-111" in lines
    assert "    socket 1: 16 cores, 2 threads each, L3 1" in lines
    assert "    nvidia.com/gpu: 0000:97:00.0" in lines
    d = lines.index("distances")  # the terminal picture of the NUMA nodes follows the matrix
    assert lines[d + 1].split() == ["0", "1", "2", "3"]
    assert lines[d + 2].split() == ["0", "10", "11", "21", "21"]
    assert lines[d + 5].split() == ["3", "21", "21", "11", "10"]
    assert lines[d + 7].startswith("NUMA nodes of dual-socket")


def test_this_machine_and_a_sysfs_root(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["discover"]) == 0
    assert capsys.readouterr().out.startswith("machine ")
    assert main(["discover", "--sysfs-root", "/", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["numaNodes"]
    assert main(["discover", "--sysfs-root", str(tmp_path)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert err.startswith("numalign discover: error: ") and "no sys/ directory inside" in err


def test_bad_machine_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["discover", "--machine", "no-such-machine"]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a built-in machine" in err


def test_cadvisor_output_is_the_kubelet_view(capsys: pytest.CaptureFixture[str]) -> None:
    from numalign.machine.cadvisor import machine_from_cadvisor

    assert main(["discover", "--machine", "snc-16", "-o", "cadvisor"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["num_cores"] == 256 and len(info["topology"]) == 16
    assert machine_from_cadvisor(info, "out").cpu_infos() == example("snc-16").cpu_infos()
