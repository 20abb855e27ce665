"""The kubelet's state files on disk: atomic writes, careful reads, actionable errors.

Writes never leave a half-written file: the bytes go to a temporary file in the same directory,
which is fsynced, renamed over the target (atomic on POSIX) and then the directory is fsynced so
the rename itself survives a crash. A failure at any step removes the temporary file and leaves
the previous content untouched.

Reads return None for a missing file (the kubelet then starts fresh) and raise CheckpointFileError
for anything else, naming the file, what is wrong, what was expected and the fix. The kubelet's
fix for a bad cpu/memory manager file is to drain the node and delete the file before restarting;
numalign never overwrites an existing file it could not read unless the caller says so (`force`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from numalign.adapters.statedir.layout import (
    CPU_MANAGER_STATE_FILE,
    DEVICE_MANAGER_CHECKPOINT_FILE,
    DEVICE_PLUGINS_DIR,
    MEMORY_MANAGER_STATE_FILE,
)
from numalign.errors import CheckpointError, InvalidInputError
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.cpumanager.checkpoint import CPUManagerCheckpoint, decode_cpu_checkpoint, encode_cpu_checkpoint
from numalign.kubelet.devicemanager.checkpoint import (
    DeviceCheckpoint,
    decode_device_checkpoint,
    encode_device_checkpoint,
)
from numalign.kubelet.devicemanager.state import DeviceManagerState
from numalign.kubelet.memorymanager.checkpoint import (
    MemoryManagerCheckpoint,
    decode_memory_checkpoint,
    encode_memory_checkpoint,
)
from numalign.kubelet.memorymanager.state import MemoryManagerState
from numalign.limits import MAX_STATE_FILE_BYTES, read_bounded

DEFAULT_ROOT_DIR = Path("/var/lib/kubelet")
# The kubelet keeps the device checkpoint in the plugin socket directory, whatever --root-dir says.
DEFAULT_DEVICE_PLUGINS_DIR = DEFAULT_ROOT_DIR / DEVICE_PLUGINS_DIR

_T = TypeVar("_T")


class CheckpointFileError(CheckpointError):
    """A state file could not be read, decoded, verified or written. `reason` is the codec error."""

    def __init__(self, message: str, *, path: Path, reason: BaseException | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes, mode: int = 0o600) -> None:
    """Replace `path` with `data` atomically (tmp in the same dir, fsync, rename, fsync dir)."""
    target = Path(path)
    directory = target.parent
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as e:
        problem = path_kind_problem(target) if e.errno in (errno.EISDIR, errno.ENOTDIR) else None
        raise CheckpointFileError(
            f"cannot write {target}: {problem}" if problem else
            f"cannot write {target}: cannot create a temporary file in {directory}: {e.strerror or e}; "
            f"expected an existing, writable directory; fix: create {directory} or correct its permissions",
            path=target,
            reason=e,
        ) from e
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(target)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(e, OSError):
            raise CheckpointFileError(
                f"cannot write {target}: {e.strerror or e}; the previous content (if any) is unchanged; "
                f"fix: free space or correct permissions in {directory}, then retry",
                path=target,
                reason=e,
            ) from e
        raise
    try:
        _fsync_dir(directory)
    except OSError as e:
        raise CheckpointFileError(
            f"wrote {target} but could not fsync {directory}: {e.strerror or e}; the new content may not "
            "survive a power loss; fix: check the filesystem holding the kubelet state",
            path=target,
            reason=e,
        ) from e


def read_checkpoint(path: str | os.PathLike[str]) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    target = Path(path)
    try:
        return read_bounded(target, MAX_STATE_FILE_BYTES, f"the state file {target.name}", regular_only=True)
    except FileNotFoundError:
        return None
    except InvalidInputError as e:  # a device, a FIFO, or larger than any state file numalign writes
        raise CheckpointFileError(str(e), path=target) from None
    except OSError as e:
        raise CheckpointFileError(_read_error(target, e), path=target, reason=e) from e


def path_kind_problem(target: Path) -> str | None:
    """What is in the way when `target` cannot be a regular file: permissions cannot fix these."""
    if target.is_dir():
        return (
            f"{target} is a directory; expected the kubelet state file {target.name} (a regular file) there; "
            f"fix: move that directory away, or point --state-dir at the right directory"
        )
    for parent in target.parents:
        if parent.exists() and not parent.is_dir():
            return (
                f"{parent} is a file; expected a directory holding {target.relative_to(parent)}; "
                "fix: point --state-dir at a directory (it is created if missing), or move that file away"
            )
    return None


def _read_error(target: Path, e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return (f"cannot read {target}: it is a loop of symbolic links (or too many levels of them); expected a "
                f"regular file; fix: remove the link {target}, or point it at the file numalign wrote")
    if e.errno in (errno.EISDIR, errno.ENOTDIR):
        problem = path_kind_problem(target)
        if problem is not None:
            return f"cannot read {target}: {problem}"
    return (
        f"cannot read {target}: {e.strerror or e}; expected a regular file readable by this user; "
        f"fix: correct the permissions of {target} (or run as the kubelet's user)"
    )


_KUBELET_FIX = {
    CPU_MANAGER_STATE_FILE: "drain this node and delete the CPU manager checkpoint file {path} "
    "before restarting the kubelet (it is recreated empty on start)",
    MEMORY_MANAGER_STATE_FILE: "drain this node and delete the memory manager checkpoint file {path} "
    "before restarting the kubelet (it is recreated on start)",
    DEVICE_MANAGER_CHECKPOINT_FILE: "delete {path} (the kubelet logs this error, continues with no "
    "recorded device allocations and rewrites the file); drain the node first so no pod loses its devices",
}


class CheckpointStore:
    """Load, verify and save the three kubelet state files.

    cpu_manager_state and memory_manager_state live in the kubelet root dir; kubelet_internal_checkpoint
    lives in the device plugins dir. Use `CheckpointStore.under(dir)` to keep all three in one tree.

    `kubelet_version`: the release whose kubelet reads and writes the files. Its checkpoint codecs decide
    the layout: from 1.37 cpu_manager_state and memory_manager_state are the envelope (`data` and
    `dataChecksum`), before it the flat layout with `checksum`. None: as the kubelet up to 1.35.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str] = DEFAULT_ROOT_DIR,
        device_plugins_dir: str | os.PathLike[str] = DEFAULT_DEVICE_PLUGINS_DIR,
        *,
        kubelet_version: KubeletVersion | None = None,
    ) -> None:
        self.root_dir = Path(root_dir)
        self.device_plugins_dir = Path(device_plugins_dir)
        self.kubelet_version = kubelet_version
        # What the codecs take: the release's (major, minor).
        self._release = None if kubelet_version is None else kubelet_version.minor_key
        self._trusted: set[Path] = set()  # files this store read successfully or wrote

    @classmethod
    def under(
        cls, state_dir: str | os.PathLike[str], *, kubelet_version: KubeletVersion | None = None
    ) -> CheckpointStore:
        """A store rooted at `state_dir`, device checkpoint in `state_dir/device-plugins`."""
        return cls(state_dir, Path(state_dir) / DEVICE_PLUGINS_DIR, kubelet_version=kubelet_version)

    @property
    def cpu_path(self) -> Path:
        return self.root_dir / CPU_MANAGER_STATE_FILE

    @property
    def memory_path(self) -> Path:
        return self.root_dir / MEMORY_MANAGER_STATE_FILE

    @property
    def device_path(self) -> Path:
        return self.device_plugins_dir / DEVICE_MANAGER_CHECKPOINT_FILE

    def _load(self, path: Path, decode: Callable[[bytes], _T], what: str) -> _T | None:
        data = read_checkpoint(path)
        if data is None:
            self._trusted.add(path)
            return None
        try:
            value = decode(data)
        except CheckpointError as e:
            fix = _KUBELET_FIX[path.name].format(path=path)
            raise CheckpointFileError(
                f"could not restore state from checkpoint {path}: {e}; expected a valid {what} "
                f"written by the kubelet (or numalign); fix: {fix}. The file was left untouched",
                path=path,
                reason=e,
            ) from e
        self._trusted.add(path)
        return value

    def _save(self, path: Path, data: bytes, decode_any: Callable[[bytes], object], force: bool) -> None:
        if not force and path not in self._trusted:
            self._load(path, decode_any, "checkpoint")  # raises on a corrupt file: never overwrite it
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        self._trusted.add(path)

    def load_cpu(
        self, policy_name: str | None = None, initial_containers: Mapping[str, tuple[str, str]] | None = None
    ) -> CPUManagerCheckpoint | None:
        """The cpu_manager_state content, None if there is no file (the kubelet then writes a fresh one)."""
        return self._load(
            self.cpu_path,
            lambda b: decode_cpu_checkpoint(b, policy_name=policy_name, initial_containers=initial_containers,
                                            version=self._release),
            "cpu_manager_state",
        )

    def save_cpu(self, checkpoint: CPUManagerCheckpoint, *, force: bool = False) -> None:
        self._save(
            self.cpu_path,
            encode_cpu_checkpoint(checkpoint, version=self._release),
            lambda b: decode_cpu_checkpoint(b, initial_containers=_AnyContainer(), version=self._release),
            force,
        )

    def load_memory(
        self, policy_name: str | None = None, *, accept_zero_checksum: bool = False
    ) -> MemoryManagerCheckpoint | None:
        """The memory_manager_state content (a 0 checksum is corrupt up to 1.35; see the codec)."""
        return self._load(
            self.memory_path,
            lambda b: decode_memory_checkpoint(
                b, policy_name=policy_name, accept_zero_checksum=accept_zero_checksum, version=self._release
            ),
            "memory_manager_state",
        )

    def save_memory(self, checkpoint: MemoryManagerState, *, force: bool = False) -> None:
        self._save(
            self.memory_path,
            encode_memory_checkpoint(checkpoint, version=self._release),
            lambda b: decode_memory_checkpoint(b, version=self._release),
            force,
        )

    def load_devices(self, *, legacy_fallback: bool = True) -> DeviceCheckpoint | None:
        """kubelet_internal_checkpoint (legacy_fallback: also read the pre-1.20 flat format)."""
        return self._load(
            self.device_path,
            lambda b: decode_device_checkpoint(b, legacy_fallback=legacy_fallback),
            "kubelet_internal_checkpoint",
        )

    def save_devices(self, checkpoint: DeviceManagerState, *, force: bool = False) -> None:
        self._save(self.device_path, encode_device_checkpoint(checkpoint), decode_device_checkpoint, force)


class _AnyContainer(Mapping[str, tuple[str, str]]):
    """Lets a v1 file count as readable before an overwrite without knowing its containers."""

    def __getitem__(self, key: str) -> tuple[str, str]:
        return (key, key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0
