"""Which process holds a run's allocation: pid AND start time, read from a /proc tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from numalign.errors import CheckpointError
from numalign.run.process import ProcessRef, describe, is_alive, start_time


def fake_proc(root: Path, pid: int, state: str, start: int, comm: str = "sleep") -> None:
    fields = [state, *["0"] * 18, str(start), "0"]  # fields 3..23: state ... starttime (22)
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")


def test_alive_only_with_the_same_pid_and_start_time(tmp_path: Path) -> None:
    fake_proc(tmp_path, 42, "S", 1000, comm="a (weird) name")
    assert start_time(42, tmp_path) == 1000
    assert is_alive(ProcessRef(42, 1000, ("sleep",)), tmp_path)
    assert not is_alive(ProcessRef(42, 999, ("sleep",)), tmp_path)  # the pid was given to another process
    assert not is_alive(ProcessRef(43, 1000, ("sleep",)), tmp_path)  # gone
    assert start_time(43, tmp_path) is None


def test_a_zombie_holds_nothing(tmp_path: Path) -> None:
    fake_proc(tmp_path, 7, "Z", 5)
    assert not is_alive(ProcessRef(7, 5, ()), tmp_path)


def test_this_process_is_alive() -> None:
    me = start_time(os.getpid())
    assert me is not None and is_alive(ProcessRef(os.getpid(), me, ()))


def test_records_round_trip_and_bad_ones_are_named() -> None:
    ref = ProcessRef(12, 34, ("python", "-c", "pass"))
    assert ProcessRef.from_dict(ref.to_dict(), "f") == ref
    with pytest.raises(CheckpointError, match=r"^numalign_pods.json: process: expected \{pid: int > 0"):
        ProcessRef.from_dict({"pid": "12", "start_time": 3, "command": []}, "numalign_pods.json")


def test_long_commands_are_cut_for_a_table() -> None:
    assert describe(["sleep", "1"]) == "sleep 1"
    assert describe(["x" * 100], limit=10) == "xxxxxxx..."
