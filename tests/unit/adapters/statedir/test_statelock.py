"""The state directory's locks, held by real processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from numalign.adapters.statedir.locks import (
    StateDirInUseError,
    acquire_owner,
    read_holder,
    transaction,
)

_HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from numalign.adapters.statedir.locks import acquire_owner, transaction
    d = Path(sys.argv[1])
    if sys.argv[2] == "owner":
        lock = acquire_owner(d, "numalign serve")
        print("held", flush=True)
        sys.stdin.read()
    else:
        with transaction(d):
            print("held", flush=True)
            sys.stdin.read()
    """
)


def _holder(tmp_path: Path, kind: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path), kind],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _kill(p: subprocess.Popen[str]) -> None:
    p.kill()
    p.wait()
    for f in (p.stdin, p.stdout):
        if f is not None:
            f.close()


def test_a_second_owner_is_refused_naming_the_holder(tmp_path: Path) -> None:
    p = _holder(tmp_path, "owner")
    try:
        with pytest.raises(StateDirInUseError) as e:
            acquire_owner(tmp_path, "numalign admit")
        msg = str(e.value)
        assert f"numalign serve (pid {p.pid}" in msg and "--dry-run" in msg and "\n" not in msg
    finally:
        _kill(p)
    # kill -9 drops the lock: the next owner gets it and is recorded
    with acquire_owner(tmp_path, "numalign admit"):
        holder = read_holder(tmp_path)
        assert holder is not None and holder.command == "numalign admit"


def test_a_transaction_waits_for_the_holder_then_gives_up(tmp_path: Path) -> None:
    p = _holder(tmp_path, "transaction")
    try:
        with pytest.raises(StateDirInUseError, match="transaction lock"), transaction(tmp_path, timeout=0.05):
            pass
        with pytest.raises(StateDirInUseError), transaction(tmp_path, shared=True, timeout=0.05):
            pass
    finally:
        _kill(p)
    with transaction(tmp_path, timeout=0.05), transaction(tmp_path / "other", timeout=0.05):
        pass


def test_a_reader_does_not_create_a_missing_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with transaction(missing, shared=True):
        pass
    assert not missing.exists()


def test_busy_says_whether_another_process_holds_a_transaction(tmp_path: Path) -> None:
    from numalign.adapters.statedir.locks import transaction_busy

    assert not transaction_busy(tmp_path)  # no lock file yet
    p = _holder(tmp_path, "transaction")
    try:
        assert transaction_busy(tmp_path)
    finally:
        _kill(p)
    assert not transaction_busy(tmp_path)
    with transaction(tmp_path, timeout=0.05):  # the probe left nothing held
        pass
