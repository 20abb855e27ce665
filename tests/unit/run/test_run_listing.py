"""`numalign pods` lists the runs of a state directory from their process records (run/listing.py): a
record whose allocation is not the shape a run writes is refused in one line naming the file and pod,
never met as an internal error while the table is drawn."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from numalign.adapters.statedir.layout import POD_RECORD_FILE
from numalign.adapters.statedir.podrecord import decode_pod_record, encode_pod_record
from numalign.cli.main import main

WRITTEN_BEFORE = Path(__file__).resolve().parents[2] / "data" / "state" / "run-processes"
GIVEN = {"cpus": "4-5", "exclusive_cpus": True, "devices": {"example.com/gpu": ["gpu-1"]},
         "memory": [{"numa_nodes": [0], "size": 1073741824, "type": "memory"}]}


def _with_allocation(tmp_path: Path, allocation: object) -> Path:
    """The fixture directory, pod a's process record holding `allocation` (checksummed as numalign writes)."""
    state = tmp_path / "state"
    shutil.copytree(WRITTEN_BEFORE, state)
    path = state / POD_RECORD_FILE
    record = decode_pod_record(path.read_bytes())
    pods = tuple(dataclasses.replace(e, process={**e.process, "allocation": allocation})
                 if e.uid == "uid-a" and e.process is not None else e for e in record.pods)
    path.write_bytes(encode_pod_record(dataclasses.replace(record, pods=pods)))
    return state


def test_a_runs_allocation_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pods", "--state-dir", str(_with_allocation(tmp_path, GIVEN))]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "default/a" in line)
    assert row.split()[5:] == ["4-5", "1Gi@0", "example.com/gpu", "gpu-1"]


@pytest.mark.parametrize("allocation", ["x", {"cpus": 5}, {"memory": [{"size": "1Gi"}]}, {"devices": {"r": "id"}}])
def test_a_damaged_allocation_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          allocation: object) -> None:
    state = _with_allocation(tmp_path, allocation)
    assert main(["pods", "--state-dir", str(state)]) == 3
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "internal error" not in err[0], err
    assert f"{state / POD_RECORD_FILE}: pod uid-a: process.allocation: expected" in err[0]
    assert "remove that pod's entry" in err[0] and captured.out == ""
