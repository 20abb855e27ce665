"""A lock file replaced by something that is not a regular file (a FIFO, which an open for reading
would wait on forever) is refused at once with one line naming it, by readers, writers and owners."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from numalign.adapters.statedir.layout import OWNER_LOCK_FILE, TRANSACTION_LOCK_FILE
from numalign.adapters.statedir.locks import (
    acquire_owner,
    read_holder,
    transaction,
    transaction_busy,
)
from numalign.errors import CheckpointError

# A FIFO makes an open for reading wait for a writer that never comes: before the fix each of these
# hung, so the timeout (far above the milliseconds they take) turns a hang into a failure.
pytestmark = pytest.mark.timeout(60)


def _fifo(state: Path, name: str) -> Path:
    state.mkdir(exist_ok=True)
    path = state / name
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("shared", [True, False], ids=["reader", "writer"])
def test_a_fifo_transaction_lock_is_refused_by_name(tmp_path: Path, shared: bool) -> None:
    path = _fifo(tmp_path, TRANSACTION_LOCK_FILE)
    refused = rf"^cannot use the lock file {path}: it is a FIFO; expected a regular"
    with pytest.raises(CheckpointError, match=refused), transaction(tmp_path, shared=shared):
        pass


def test_a_fifo_owner_lock_is_refused_and_names_no_holder(tmp_path: Path) -> None:
    path = _fifo(tmp_path, OWNER_LOCK_FILE)
    assert read_holder(tmp_path) is None
    with pytest.raises(CheckpointError, match=rf"{path}: it is a FIFO.*remove it"):
        acquire_owner(tmp_path, "numalign admit")


def test_the_agents_probe_does_not_wait_on_a_fifo(tmp_path: Path) -> None:
    _fifo(tmp_path, TRANSACTION_LOCK_FILE)
    with pytest.raises(CheckpointError, match="it is a FIFO"):
        transaction_busy(tmp_path)


def test_regular_lock_files_still_work(tmp_path: Path) -> None:
    with acquire_owner(tmp_path, "numalign admit"):
        holder = read_holder(tmp_path)
        assert holder is not None and holder.command == "numalign admit"
        with transaction(tmp_path):
            pass
        with transaction(tmp_path, shared=True):
            pass
    assert not transaction_busy(tmp_path)


def test_pods_on_a_directory_whose_lock_is_a_fifo_exits_with_one_line(tmp_path: Path) -> None:
    path = _fifo(tmp_path / "state", TRANSACTION_LOCK_FILE)
    done = subprocess.run([sys.executable, "-m", "numalign.cli.main", "pods", "--state-dir", str(tmp_path / "state"),
                           "--machine", "dual-socket"], capture_output=True, text=True, timeout=50, check=False)
    assert done.returncode == 3
    (line,) = done.stderr.splitlines()
    assert str(path) in line and "FIFO" in line and "Traceback" not in done.stderr


def test_a_lock_file_that_cannot_be_opened_names_the_read_only_commands(tmp_path: Path) -> None:
    # remove, resize and serve have no --dry-run: the fix names what does read a directory it cannot write
    (tmp_path / OWNER_LOCK_FILE).symlink_to(tmp_path / "elsewhere")  # O_NOFOLLOW refuses it, as a read-only fs
    with pytest.raises(CheckpointError) as err:
        acquire_owner(tmp_path, "remove")
    message = str(err.value)
    assert message.startswith(f"cannot open the lock file {tmp_path / OWNER_LOCK_FILE}: ")
    assert "`numalign pods --state-dir`" in message and "`numalign admit --dry-run`" in message
    assert "or use --dry-run to only read it" not in message
