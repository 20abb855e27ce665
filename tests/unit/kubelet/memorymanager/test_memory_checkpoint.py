"""memory_manager_state codec: round trips, layout and error cases."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from support.strategies import memory_checkpoints

from numalign.kubelet.checkpointmanager.errors import CheckpointDecodeError, CorruptCheckpointError, PolicyMismatchError
from numalign.kubelet.memorymanager.checkpoint import (
    MemoryManagerCheckpoint,
    decode_memory_checkpoint,
    encode_memory_checkpoint,
    memory_checkpoint_checksum,
)
from numalign.kubelet.memorymanager.state import Block, MemoryTable, NUMANodeState


def _fields(cp: MemoryManagerCheckpoint) -> tuple[object, ...]:
    return (cp.policy_name, cp.machine_state, cp.entries)


@settings(max_examples=100)
@given(memory_checkpoints)
def test_decode_encode_round_trip(cp: MemoryManagerCheckpoint) -> None:
    blob = encode_memory_checkpoint(cp)
    back = decode_memory_checkpoint(blob, policy_name=cp.policy_name)
    assert _fields(back) == _fields(cp)
    assert back.checksum == memory_checkpoint_checksum(cp)
    assert encode_memory_checkpoint(back) == blob


def test_layout_orders_numa_keys_as_strings_and_omits_empty_entries() -> None:
    table = MemoryTable(10, 1, 9, 0, 9)
    state = NUMANodeState(0, {"memory": table}, [0])
    cp = MemoryManagerCheckpoint("Static", {10: state, 2: state})
    doc = encode_memory_checkpoint(cp).decode()
    assert doc.startswith('{"policyName":"Static","machineState":{"10":{"numberOfAssignments":0,"memoryMap":')
    assert doc.index('"10":') < doc.index('"2":')
    assert '"memory":{"total":10,"systemReserved":1,"allocatable":9,"reserved":0,"free":9}' in doc
    assert '"entries"' not in doc
    assert json.loads(doc)["checksum"] == memory_checkpoint_checksum(cp)


def test_zero_checksum_is_rejected_as_in_1_35_and_accepted_on_request() -> None:
    blob = b'{"policyName":"Static","machineState":{},"checksum":0}'
    with pytest.raises(CorruptCheckpointError) as info:
        decode_memory_checkpoint(blob)
    assert info.value.expected == 0
    cp = decode_memory_checkpoint(blob, accept_zero_checksum=True)
    assert (cp.policy_name, cp.machine_state, cp.entries, cp.checksum) == ("Static", {}, {}, 0)


def test_tampered_size_is_detected() -> None:
    cp = MemoryManagerCheckpoint("Static", {}, {"pod": {"c": [Block([0], "memory", 512)]}})
    blob = encode_memory_checkpoint(cp)
    with pytest.raises(CorruptCheckpointError):
        decode_memory_checkpoint(blob.replace(b'"size":512', b'"size":513'))


def test_policy_mismatch_uses_kubelet_wording() -> None:
    blob = encode_memory_checkpoint(MemoryManagerCheckpoint("None"))
    message = r'\[memorymanager\] configured policy "Static" differs from state checkpoint policy "None"'
    with pytest.raises(PolicyMismatchError, match=message):
        decode_memory_checkpoint(blob, policy_name="Static")


def test_null_node_state_is_rejected_after_the_checksum() -> None:
    with pytest.raises(CheckpointDecodeError, match=r"machineState\[0\] is null"):
        decode_memory_checkpoint(
            b'{"policyName":"Static","machineState":{"0":null},"checksum":0}', accept_zero_checksum=True
        )


def test_wrong_types_name_the_field() -> None:
    with pytest.raises(CheckpointDecodeError, match=r"MachineState\[0\]\.Cells"):
        decode_memory_checkpoint(b'{"policyName":"Static","machineState":{"0":{"cells":"x"}},"checksum":1}')
