"""kubelet_internal_checkpoint codec: round trips, layout, the pre-1.20 format and error cases."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from support.strategies import device_checkpoints

from numalign.kubelet.checkpointmanager.checksum import fnv1a_32
from numalign.kubelet.checkpointmanager.errors import CheckpointDecodeError, CorruptCheckpointError
from numalign.kubelet.devicemanager.checkpoint import (
    DeviceCheckpoint,
    decode_device_checkpoint,
    device_checkpoint_checksum,
    encode_device_checkpoint,
)
from numalign.kubelet.devicemanager.state import PodDevicesEntry


def _fields(cp: DeviceCheckpoint) -> tuple[object, ...]:
    return (list(cp.pod_device_entries), cp.registered_devices, cp.boot_id)


@settings(max_examples=100)
@given(device_checkpoints)
def test_decode_encode_round_trip(cp: DeviceCheckpoint) -> None:
    blob = encode_device_checkpoint(cp)
    back = decode_device_checkpoint(blob)
    assert _fields(back) == _fields(cp)
    assert back.checksum == device_checkpoint_checksum(cp)
    assert encode_device_checkpoint(back) == blob


def test_layout_matches_the_kubelet() -> None:
    entry = PodDevicesEntry("uid", "ctr", "example.com/dev", {1: ["b"], -1: ["a"]}, b"\x0a\x00")
    doc = encode_device_checkpoint(DeviceCheckpoint([entry], {"example.com/dev": []})).decode()
    assert doc.startswith(
        '{"Data":{"PodDeviceEntries":[{"PodUID":"uid","ContainerName":"ctr","ResourceName":"example.com/dev",'
        '"DeviceIDs":{"-1":["a"],"1":["b"]},"AllocResp":"CgA="}],"RegisteredDevices":{"example.com/dev":[]}},'
        '"Checksum":'
    )
    assert "BootID" not in doc


def test_no_entries_are_written_as_null_like_the_kubelet() -> None:
    doc = encode_device_checkpoint(DeviceCheckpoint()).decode()
    assert doc.startswith('{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":')


def test_boot_id_is_kept_outside_the_checksum() -> None:
    plain = DeviceCheckpoint((), {"r": ["x"]})
    with_boot = DeviceCheckpoint((), {"r": ["x"]}, boot_id="1b2c")
    assert device_checkpoint_checksum(plain) == device_checkpoint_checksum(with_boot)
    assert json.loads(encode_device_checkpoint(with_boot))["BootID"] == "1b2c"


def test_zero_checksum_is_not_accepted() -> None:
    with pytest.raises(CorruptCheckpointError) as info:
        decode_device_checkpoint(b'{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":0}')
    assert info.value.expected == 0


def test_absent_and_null_entries_hash_differently() -> None:
    null_blob = encode_device_checkpoint(DeviceCheckpoint())
    absent = null_blob.replace(b'"PodDeviceEntries":null,', b"")
    with pytest.raises(CorruptCheckpointError):
        decode_device_checkpoint(absent)  # absent keeps make([]...,0): `[]`, not `<nil>`


def test_pre_1_20_flat_device_ids_are_read_as_numa_node_0() -> None:
    # The V1 verifier renames checkpointDataV1/PodDevicesEntryV1, so the hashed text is:
    text = (
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)p "
        "ContainerName:(string)c ResourceName:(string)r DeviceIDs:([]string)[d1 d2] AllocResp:([]uint8)[8 1]}] "
        "RegisteredDevices:(map[string][]string)map[r:[d1 d2]]}"
    )
    blob = (
        '{"Data":{"PodDeviceEntries":[{"PodUID":"p","ContainerName":"c","ResourceName":"r",'
        '"DeviceIDs":["d1","d2"],"AllocResp":"CAE="}],"RegisteredDevices":{"r":["d1","d2"]}},'
        f'"Checksum":{fnv1a_32(text.encode())}}}'
    ).encode()
    cp = decode_device_checkpoint(blob)
    assert cp.version == 1
    assert cp.pod_device_entries == [PodDevicesEntry("p", "c", "r", {0: ["d1", "d2"]}, b"\x08\x01")]
    with pytest.raises(CheckpointDecodeError, match=r"cannot unmarshal array into .*DeviceIDs"):
        decode_device_checkpoint(blob, legacy_fallback=False)  # kubelet 1.32-1.35 behaviour
    tampered = blob.replace(b'"DeviceIDs":["d1","d2"]', b'"DeviceIDs":["d1","d3"]')
    assert tampered != blob
    with pytest.raises(CorruptCheckpointError, match=r"pre-1\.20"):
        decode_device_checkpoint(tampered)


def test_garbage_reports_both_formats() -> None:
    with pytest.raises(CheckpointDecodeError, match=r"as the pre-1\.20 format"):
        decode_device_checkpoint(b'{"Data":{"PodDeviceEntries":{}}}')
