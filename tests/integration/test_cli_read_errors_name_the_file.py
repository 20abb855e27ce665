"""A file that fails while being read (here /proc/self/mem, whose first page no process maps: read(2)
gives EIO, an error the system reports without a file name) is named in the one error line, whichever
option or argument it came from."""

from __future__ import annotations

import subprocess
import sys

import pytest

UNREADABLE = "/proc/self/mem"
EXE = [sys.executable, "-m", "numalign.cli.main"]


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", UNREADABLE],
        ["admit", UNREADABLE, "--machine", "dual-socket"],
        ["discover", "--machine", UNREADABLE],
        ["admit", "-", "--machine", "dual-socket", "--config", UNREADABLE],
        ["admit", "-", "--machine", "dual-socket", "--devices", UNREADABLE],
        ["simulate", "--cluster", UNREADABLE],
    ],
    ids=["replay", "manifest", "machine", "config", "devices", "cluster"],
)
def test_a_read_error_names_the_file(argv: list[str]) -> None:
    done = subprocess.run([*EXE, *argv], capture_output=True, text=True, input="", timeout=120, check=False)
    assert done.returncode in (2, 3), done.stderr
    (line,) = done.stderr.splitlines()
    assert f"{UNREADABLE}: " in line and "Input/output error" in line and "a file" not in line
