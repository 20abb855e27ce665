"""`numalign remove` of a `numalign run` pod whose process still runs is refused: the run is released when
its process ends, and freeing its CPUs before would give the same exclusive CPU to the next run."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from numalign.adapters.statedir.layout import POD_RECORD_FILE
from numalign.adapters.statedir.podrecord import decode_pod_record, encode_pod_record
from numalign.cli.main import main

# Written on dual-socket with a static CPU manager reserving CPU 0: runs a and b (pids 10 and 11), and a
# pod without a process (an agent's).
WRITTEN_BEFORE = Path(__file__).resolve().parents[2] / "data" / "state" / "run-processes"
NODE = ["--machine", "dual-socket", "--cpu-manager-policy", "static", "--reserved-cpus", "0",
        "--memory-manager-policy", "None", "--topology-manager-policy", "none"]


def _run_of_a_is_this_process(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    shutil.copytree(WRITTEN_BEFORE, state)
    stat = Path("/proc/self/stat").read_text()
    start = int(stat[stat.rfind(")") + 2:].split()[22 - 3])  # field 22: start time, as numalign run records it
    path = state / POD_RECORD_FILE
    record = decode_pod_record(path.read_bytes())
    pods = tuple(dataclasses.replace(e, process={**e.process, "pid": os.getpid(), "start_time": start})
                 if e.uid == "uid-a" and e.process is not None else e for e in record.pods)
    path.write_bytes(encode_pod_record(dataclasses.replace(record, pods=pods)))
    return state


def test_the_pod_of_a_running_run_is_not_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = _run_of_a_is_this_process(tmp_path)
    before = (state / POD_RECORD_FILE).read_bytes()
    assert main(["remove", "--state-dir", str(state), *NODE, "default/a", "uid-agent"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"remove default/a: it is the pod of a running `numalign run` (pid {os.getpid()}" in err[0]
    assert f"fix: end that process (kill {os.getpid()})" in err[0]
    record = decode_pod_record((state / POD_RECORD_FILE).read_bytes())
    assert "uid-a" in record.uids() and "uid-agent" in record.uids()  # one transaction: neither removed
    # b's process (pid 11, another start time) ended: released on the load, as every writer does.
    assert "uid-b" not in record.uids() and before != (state / POD_RECORD_FILE).read_bytes()


def test_a_pod_without_a_running_process_is_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = _run_of_a_is_this_process(tmp_path)
    assert main(["remove", "--state-dir", str(state), *NODE, "uid-agent"]) == 0
    assert "removed default/agent" in capsys.readouterr().out
    assert decode_pod_record((state / POD_RECORD_FILE).read_bytes()).uids() == ["uid-a"]
