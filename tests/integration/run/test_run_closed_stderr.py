"""`numalign run ... 2>&1 | head`: a reader that goes away stops neither COMMAND nor the release."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.schemas import validate


def _run(tmp_path: Path, *requests: str, command: str) -> int:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before numalign says anything: every write to stderr fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "numalign.cli.main", "run", "--state-dir", str(tmp_path / "state"),
             "--no-cgroup", *requests, "--", "sh", "-c", command],
            stderr=write_end, stdout=subprocess.DEVNULL, cwd=tmp_path, timeout=300, check=False)
    finally:
        os.close(write_end)
    return done.returncode


def _pods(tmp_path: Path) -> list[object]:
    doc = json.loads((tmp_path / "state" / "numalign_pods.json").read_text())
    return list(doc.get("pods", doc) if isinstance(doc, dict) else doc)


@pytest.mark.parametrize("output", ["text", "json"])
def test_command_runs_and_its_allocation_is_released_when_stderr_is_a_closed_pipe(
    tmp_path: Path, output: str
) -> None:
    code = _run(tmp_path, "-o", output, "--cpus", "1", "--memory", "32Mi", command="touch ran; exit 5")
    assert (tmp_path / "ran").exists()  # COMMAND ran
    assert code == 5  # and its exit status stands (not 0 from a swallowed broken pipe)
    assert not _pods(tmp_path)  # and nothing stays held


def test_a_run_in_the_shared_pool_says_why(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "numalign.cli.main", "run", "--state-dir", str(tmp_path / "state"), "--no-cgroup",
         "-o", "json", "--cpus", "1", "--", "true"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stderr[done.stderr.index("{"):])
    validate("run", doc)
    assert doc["decision"]["allocations"]["main"]["exclusiveCPUs"] is False
    assert any("Guaranteed" in n and "--memory" in n for n in doc["notes"])  # no --memory: Burstable


def _said(tmp_path: Path, verbosity: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "numalign.cli.main", "-v", verbosity, "run", "--state-dir", str(tmp_path / "state"),
         *args, "--", "true"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)


def test_run_says_the_decision_and_nothing_internal(tmp_path: Path) -> None:
    """numactl prints nothing; run says its decision line, and numalign's own bookkeeping (the
    NUMALIGN_RUN marker, the cgroup it made, how the version was chosen) only with -v 1."""
    requests = ("--cpus", "1", "--memory", "32Mi")
    quiet = _said(tmp_path, "0", "-q", *requests)
    assert quiet.returncode == 0, quiet.stderr
    (line,) = quiet.stderr.splitlines()
    assert line.startswith("numalign run: default/true-") and "admitted" in line and "cpus 1 (exclusive)" in line
    default = _said(tmp_path, "0", *requests)
    assert default.returncode == 0, default.stderr
    assert "NUMALIGN_RUN" not in default.stderr and "kubelet version:" not in default.stderr
    assert not [n for n in default.stderr.splitlines() if n.startswith("numalign run:   cgroup /")]
    detail = _said(tmp_path, "1", *requests)
    assert "env NUMALIGN_RUN=" in detail.stderr
    rejected = _said(tmp_path, "0", "-q", "--cpus", "1", "--memory", "1Pi")
    assert rejected.returncode == 1
    (line,) = rejected.stderr.splitlines()
    assert "rejected" in line and "COMMAND was not run" in line
