"""Atomic checkpoint files and CheckpointStore: real files in tmp_path, failures injected."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from numalign.adapters.statedir.files import (
    DEFAULT_DEVICE_PLUGINS_DIR,
    CheckpointFileError,
    CheckpointStore,
    read_checkpoint,
    write_atomic,
)
from numalign.kubelet.checkpointmanager.errors import CheckpointDecodeError, CorruptCheckpointError, PolicyMismatchError
from numalign.kubelet.cpumanager.checkpoint import CPUManagerCheckpoint, encode_cpu_checkpoint
from numalign.kubelet.devicemanager.checkpoint import DeviceCheckpoint
from numalign.kubelet.devicemanager.state import PodDevicesEntry
from numalign.kubelet.memorymanager.checkpoint import MemoryManagerCheckpoint
from numalign.kubelet.memorymanager.state import Block, MemoryTable, NUMANodeState


def _leftovers(directory: Path, keep: str) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != keep)


def test_write_atomic_writes_bytes_with_mode_and_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "state"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert _leftovers(tmp_path, "state") == []
    write_atomic(target, b"three", mode=0o640)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_write_atomic_fsyncs_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    write_atomic(tmp_path / "state", b"x")
    assert len(synced) == 2  # the temporary file, then the directory after the rename


def test_failed_write_keeps_old_content_and_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state"
    write_atomic(target, b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(CheckpointFileError, match=r"previous content .* is unchanged") as info:
        write_atomic(target, b"new")
    assert info.value.path == target
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path, "state") == []


def test_failed_rename_keeps_old_content_and_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state"
    write_atomic(target, b"old")

    def failing_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(CheckpointFileError, match="No space left on device"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path, "state") == []


def test_interrupted_write_cleans_up_and_propagates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "state", b"new")
    assert list(tmp_path.iterdir()) == []


def test_write_into_missing_directory_names_the_directory(tmp_path: Path) -> None:
    with pytest.raises(CheckpointFileError, match=r"create .*missing"):
        write_atomic(tmp_path / "missing" / "state", b"x")


def test_read_checkpoint(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "absent") is None
    (tmp_path / "f").write_bytes(b"abc")
    assert read_checkpoint(tmp_path / "f") == b"abc"
    with pytest.raises(CheckpointFileError, match="cannot read"):
        read_checkpoint(tmp_path)  # a directory


def test_store_paths() -> None:
    default = CheckpointStore()
    assert default.cpu_path == Path("/var/lib/kubelet/cpu_manager_state")
    assert default.memory_path == Path("/var/lib/kubelet/memory_manager_state")
    assert default.device_path == DEFAULT_DEVICE_PLUGINS_DIR / "kubelet_internal_checkpoint"
    # --root-dir does not move the device checkpoint
    assert CheckpointStore("/srv/kubelet").device_path == default.device_path
    assert CheckpointStore.under("/x").device_path == Path("/x/device-plugins/kubelet_internal_checkpoint")


def test_store_round_trips_all_three_files(tmp_path: Path) -> None:
    store = CheckpointStore.under(tmp_path)
    assert store.load_cpu("static") is None
    assert store.load_memory("Static") is None
    assert store.load_devices() is None
    cpu = CPUManagerCheckpoint("static", "0,3", {"pod": {"app": "1-2"}})
    table = MemoryTable(100, 10, 90, 0, 90)
    memory = MemoryManagerCheckpoint(
        "Static", {0: NUMANodeState(1, {"memory": table}, [0])}, {"pod": {"app": [Block([0], "memory", 5)]}}
    )
    entry = PodDevicesEntry("pod", "app", "example.com/d", {0: ["d0"]}, b"\x01")
    devices = DeviceCheckpoint([entry], {"example.com/d": ["d0"]})
    store.save_cpu(cpu)
    store.save_memory(memory)
    store.save_devices(devices)
    fresh = CheckpointStore.under(tmp_path)
    loaded_cpu = fresh.load_cpu("static")
    loaded_memory = fresh.load_memory("Static")
    loaded_devices = fresh.load_devices()
    assert loaded_cpu is not None and loaded_cpu.entries == cpu.entries
    assert loaded_memory is not None and loaded_memory.machine_state == memory.machine_state
    assert loaded_devices is not None and list(loaded_devices.pod_device_entries) == list(devices.pod_device_entries)
    assert (tmp_path / "device-plugins" / "kubelet_internal_checkpoint").exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"policyName":"static","defaultCpuSet":"0-3","checksum":1}', CorruptCheckpointError),
        (b'{"policyName":"static","defaultCpu', CheckpointDecodeError),
        (encode_cpu_checkpoint(CPUManagerCheckpoint("none", "")), PolicyMismatchError),
    ],
)
def test_bad_cpu_file_raises_actionable_error_and_is_left_untouched(
    tmp_path: Path, content: bytes, reason: type[Exception]
) -> None:
    path = tmp_path / "cpu_manager_state"
    path.write_bytes(content)
    before = path.stat().st_mtime_ns
    store = CheckpointStore.under(tmp_path)
    with pytest.raises(CheckpointFileError) as info:
        store.load_cpu("static")
    message = str(info.value)
    assert str(path) in message
    assert "drain this node and delete the CPU manager checkpoint file" in message
    assert isinstance(info.value.reason, reason)
    assert path.read_bytes() == content and path.stat().st_mtime_ns == before


def test_bad_memory_and_device_files_name_their_fix(tmp_path: Path) -> None:
    store = CheckpointStore.under(tmp_path)
    store.memory_path.write_bytes(b"{")
    store.device_path.parent.mkdir()
    store.device_path.write_bytes(b'{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":0}')
    with pytest.raises(CheckpointFileError, match="memory manager checkpoint file"):
        store.load_memory("Static")
    with pytest.raises(CheckpointFileError, match="kubelet logs this error, continues") as info:
        store.load_devices()
    assert isinstance(info.value.reason, CorruptCheckpointError)


def test_save_never_overwrites_a_corrupt_file_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "cpu_manager_state"
    path.write_bytes(b"garbage")
    store = CheckpointStore.under(tmp_path)
    with pytest.raises(CheckpointFileError, match="left untouched"):
        store.save_cpu(CPUManagerCheckpoint("static", "0-3"))
    assert path.read_bytes() == b"garbage"
    store.save_cpu(CPUManagerCheckpoint("static", "0-3"), force=True)
    loaded = CheckpointStore.under(tmp_path).load_cpu("static")
    assert loaded is not None
    assert (loaded.policy_name, loaded.default_cpu_set, loaded.entries) == ("static", "0-3", {})


def test_save_over_a_valid_file_of_another_policy_is_allowed(tmp_path: Path) -> None:
    store = CheckpointStore.under(tmp_path)
    store.save_cpu(CPUManagerCheckpoint("none", ""))
    CheckpointStore.under(tmp_path).save_cpu(CPUManagerCheckpoint("static", "0-3"))
    loaded = CheckpointStore.under(tmp_path).load_cpu("static")
    assert loaded is not None and loaded.default_cpu_set == "0-3"
