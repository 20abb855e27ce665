"""`numalign run ... 2>&1 | head`: a reader that goes away stops neither COMMAND nor the release."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


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
    assert doc["decision"]["allocations"]["main"]["exclusive_cpus"] is False
    assert any("Guaranteed" in n and "--memory" in n for n in doc["notes"])  # no --memory: Burstable
