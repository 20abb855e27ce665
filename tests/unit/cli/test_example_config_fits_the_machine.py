"""The built-in example configuration reserves the machine's first core, not a fixed "0,64" (issue 22,
item 12): a 16-CPU machine is not refused, and the note says which CPUs are reserved and why."""

from __future__ import annotations

import json

import pytest

from numalign.cli.main import main
from numalign.cluster.model import example_config
from numalign.machine.examples import example


def test_a_16_cpu_machine_runs_with_the_example_and_the_note_names_the_reservation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["admit", "--machine", "1s x 1n x 8c x 2t, 64Gi/node"]) == 0
    out = capsys.readouterr().out
    assert "reservedSystemCPUs 0,8: the machine's first core" in out


@pytest.mark.parametrize(("machine", "reserved"), [("dual-socket", "0,64"), ("epyc-nps4", "0,128"), ("gb200", "0")])
def test_admit_and_cluster_pools_reserve_the_same_first_core(
    machine: str, reserved: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert example_config(example(machine)).reserved_system_cpus == reserved
    main(["admit", "--machine", machine, "--policy-option", "max-allowable-numa-nodes=34", "-o", "json"])
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(f"reservedSystemCPUs {reserved}: the machine's first core" in n for n in notes)
