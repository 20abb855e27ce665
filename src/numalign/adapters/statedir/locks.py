"""Who may change a state directory, and when: two flock(2) locks beside the kubelet's files.

* `numalign.lock` orders transactions. A writer (admit, remove, `numalign run`'s admission and
  release, each of the agent's admissions and removals) holds it exclusively from the moment it reads
  the state until its last file is renamed into place; a reader (`--dry-run`, `pods`, `nrt`) holds it
  shared, so it never sees one file of a transaction without the others. Held for milliseconds.
* `numalign-owner.lock` names the directory's long-lived owner: `numalign serve` holds it for its
  whole life, `numalign admit` and `numalign remove` for theirs. A second owner is refused with one
  line naming the holder. `numalign run` takes no owner lock: it shares a directory with an agent and
  with other runs through transactions alone.

The kernel drops both locks when their process dies, kill -9 included, so a crash never leaves a
directory locked. The lock files are numalign's; the kubelet's own state files stay readable by the
kubelet and by anyone at every moment (the locks are advisory and the kubelet does not take them).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from numalign.adapters.statedir.layout import OWNER_LOCK_FILE, TRANSACTION_LOCK_FILE
from numalign.errors import CheckpointError

# The holder note is a few dozen bytes; never read more than this from a file anyone could write.
_HOLDER_LIMIT = 4096


class StateDirInUseError(CheckpointError):
    """Another process owns the state directory (or holds a transaction longer than we waited)."""


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    since: float

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"{self.command} (pid {self.pid}, since {started})"


def _open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open of a lock file that must be a regular file. O_NONBLOCK: a FIFO put in its place would
    block the open until a writer came (every reader hung); fstat then refuses it unread."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    kind = os.fstat(fd).st_mode
    if stat.S_ISREG(kind):
        return fd
    os.close(fd)
    what = "a FIFO" if stat.S_ISFIFO(kind) else "a device" if stat.S_ISCHR(kind) or stat.S_ISBLK(kind) else (
        "a socket" if stat.S_ISSOCK(kind) else "not a regular file")
    raise CheckpointError(f"cannot use the lock file {path}: it is {what}; expected a regular file numalign "
                          "creates; remove it (it is recreated)")


def _open_lock(path: Path) -> int:
    try:
        return _open_regular(path, os.O_RDWR | os.O_CREAT)
    except OSError as e:
        raise CheckpointError(
            f"cannot open the lock file {path}: {e.strerror or e}; expected a writable state directory; "
            "fix the directory's permissions; to only read it, use `numalign pods --state-dir` or "
            "`numalign admit --dry-run` (remove, resize and serve write there)"
        ) from e


def _open_reader_lock(path: Path) -> int | None:
    """A reader's descriptor for the transaction lock: flock needs no write access, so a reader of a
    read-only directory (a copy of a node's /var/lib/kubelet) opens it read-only, or goes without."""
    try:
        return _open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise CheckpointError(f"cannot open the lock file {path}: {e.strerror or e}; expected a regular file; "
                              "remove it (it is recreated)") from e
    try:
        return _open_lock(path)
    except CheckpointError:
        return None


def read_holder(state_dir: Path) -> Holder | None:
    """The owner recorded in the owner lock file, if it names one (the lock itself may be free)."""
    try:
        fd = _open_regular(state_dir / OWNER_LOCK_FILE, os.O_RDONLY)
        try:
            raw = os.read(fd, _HOLDER_LIMIT)
        finally:
            os.close(fd)
        obj = json.loads(raw.decode("utf-8"))
        return Holder(int(obj["pid"]), str(obj["command"])[:200], float(obj["since"]))
    except (OSError, CheckpointError, ValueError, KeyError, TypeError):
        return None


class OwnerLock:
    """The directory's owner lock, held until `release()` (or the process's end)."""

    def __init__(self, state_dir: Path, fd: int) -> None:
        self.state_dir = state_dir
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the descriptor drops the flock
        self._fd = None

    def __enter__(self) -> OwnerLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire_owner(state_dir: Path, command: str) -> OwnerLock:
    """Become the directory's owner, or raise StateDirInUseError naming the current one."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / OWNER_LOCK_FILE
    fd = _open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise CheckpointError(f"cannot lock {path}: {e.strerror or e}") from e
        holder = read_holder(state_dir)
        who = holder.describe() if holder else "another process"
        raise StateDirInUseError(
            f"state directory {state_dir} is in use by {who}; expected a state directory no other numalign "
            "agent or admit is using; stop that process, use another --state-dir, or add --dry-run to only read it"
        ) from None
    note = json.dumps({"pid": os.getpid(), "command": command, "since": time.time()}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, note, 0)
    return OwnerLock(state_dir, fd)


def transaction_busy(state_dir: Path) -> bool:
    """True while another process holds the transaction lock (a writer, or a reader). A periodic task
    asks first and comes back on its next tick instead of waiting: `numalign run` may hold the lock
    across a device plugin's Allocate call, and an agent must not stall its gRPC servers meanwhile."""
    try:
        fd = _open_regular(state_dir / TRANSACTION_LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False  # no lock file yet: nobody has held it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise CheckpointError(f"cannot lock {state_dir / TRANSACTION_LOCK_FILE}: {e.strerror or e}") from e
    finally:
        os.close(fd)  # closing drops the probe's lock at once
    return False


@contextlib.contextmanager
def transaction(state_dir: Path, *, shared: bool = False, timeout: float = 30.0) -> Iterator[None]:
    """Hold the transaction lock: exclusive for a writer, shared for a reader.

    Waits up to `timeout` seconds (a transaction takes milliseconds; a longer wait means a process is
    stuck holding it), then raises StateDirInUseError."""
    if shared and not state_dir.is_dir():
        yield  # nothing to read yet, and a reader must not create the directory
        return
    path = state_dir / TRANSACTION_LOCK_FILE
    if shared:
        fd = _open_reader_lock(path)
        if fd is None:
            yield  # a directory this user cannot write: no writer of ours can hold it either
            return
    else:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(path)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise CheckpointError(f"cannot lock {path}: {e.strerror or e}") from e
                if time.monotonic() >= deadline:
                    raise StateDirInUseError(
                        f"state directory {state_dir}: another process held its transaction lock {path} for "
                        f"more than {timeout:g} s; expected transactions of milliseconds; find the process "
                        f"(fuser {path}) and stop it"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)
