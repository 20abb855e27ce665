"""cpu_manager_state codec: round trips, layout, the v2 -> v1 fallback and error cases."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from support.strategies import cpu_checkpoints

from numalign.kubelet.checkpointmanager.checksum import fnv1a_32
from numalign.kubelet.checkpointmanager.errors import (
    CheckpointDecodeError,
    CorruptCheckpointError,
    MigrationError,
    PolicyMismatchError,
)
from numalign.kubelet.cpumanager.checkpoint import (
    CPUManagerCheckpoint,
    cpu_checkpoint_checksum,
    decode_cpu_checkpoint,
    encode_cpu_checkpoint,
)


@settings(max_examples=150)
@given(cpu_checkpoints)
def test_decode_encode_round_trip(cp: CPUManagerCheckpoint) -> None:
    blob = encode_cpu_checkpoint(cp)
    back = decode_cpu_checkpoint(blob, policy_name=cp.policy_name)
    assert (back.policy_name, back.default_cpu_set, back.entries) == (cp.policy_name, cp.default_cpu_set, cp.entries)
    assert back.checksum == cpu_checkpoint_checksum(cp)
    assert encode_cpu_checkpoint(back) == blob  # stable bytes and checksum


def test_layout_is_go_marshal_of_the_v2_struct() -> None:
    cp = CPUManagerCheckpoint("static", "0,2-7", {"uid-b": {"z": "1", "a": "2"}, "uid-a": {}})
    blob = encode_cpu_checkpoint(cp)
    expected_prefix = b'{"policyName":"static","defaultCpuSet":"0,2-7","entries":{"uid-a":{},"uid-b":{"a":"2","z":"1"}}'
    assert blob.startswith(expected_prefix)
    assert json.loads(blob)["checksum"] == cpu_checkpoint_checksum(cp)


def test_empty_entries_are_omitted() -> None:
    blob = encode_cpu_checkpoint(CPUManagerCheckpoint("none", ""))
    assert blob.startswith(b'{"policyName":"none","defaultCpuSet":"","checksum":')


def test_checksum_field_of_the_input_is_ignored() -> None:
    a = CPUManagerCheckpoint("static", "0-3", checksum=12345)
    assert encode_cpu_checkpoint(a) == encode_cpu_checkpoint(CPUManagerCheckpoint("static", "0-3"))


def test_zero_checksum_is_accepted_as_legacy() -> None:
    cp = decode_cpu_checkpoint(b'{"policyName":"static","defaultCpuSet":"0-3","checksum":0}')
    assert (cp.policy_name, cp.default_cpu_set, cp.checksum, cp.version) == ("static", "0-3", 0, 2)


def test_missing_checksum_counts_as_zero() -> None:
    assert decode_cpu_checkpoint(b'{"policyName":"none","defaultCpuSet":""}').checksum == 0


def test_any_content_change_is_detected() -> None:
    blob = encode_cpu_checkpoint(CPUManagerCheckpoint("static", "0-3", {"pod": {"app": "4-5"}}))
    tampered = blob.replace(b'"4-5"', b'"4-6"')
    with pytest.raises(CorruptCheckpointError, match="checkpoint is corrupted") as info:
        decode_cpu_checkpoint(tampered)
    assert info.value.expected == json.loads(blob)["checksum"]


def test_null_entries_hash_as_nil_map_not_empty_map() -> None:
    # An explicit null makes Entries nil, which spew prints as <nil>; the {} checksum must not match.
    good = encode_cpu_checkpoint(CPUManagerCheckpoint("none", "0-3"))
    checksum = json.loads(good)["checksum"]
    with pytest.raises(CorruptCheckpointError):
        decode_cpu_checkpoint(b'{"policyName":"none","defaultCpuSet":"0-3","entries":null,"checksum":%d}' % checksum)
    nil_text = (
        "(*state.CPUManagerCheckpoint){PolicyName:(string)none DefaultCPUSet:(string)0-3 "
        "Entries:(map[string]map[string]string)<nil> Checksum:(checksum.Checksum)0}"
    )
    nil_sum = fnv1a_32(nil_text.encode())
    blob = b'{"policyName":"none","defaultCpuSet":"0-3","entries":null,"checksum":%d}' % nil_sum
    assert decode_cpu_checkpoint(blob).entries == {}


def test_null_pod_entry_restores_as_no_containers() -> None:
    assert decode_cpu_checkpoint(b'{"policyName":"none","entries":{"pod":null}}').entries == {"pod": {}}


def test_policy_mismatch_uses_kubelet_wording() -> None:
    blob = encode_cpu_checkpoint(CPUManagerCheckpoint("none", ""))
    message = r'^configured policy "static" differs from state checkpoint policy "none"$'
    with pytest.raises(PolicyMismatchError, match=message):
        decode_cpu_checkpoint(blob, policy_name="static")


def test_v1_migration_needs_every_container_id() -> None:
    v1 = (
        b'{"policyName":"static","defaultCpuSet":"7-9",'
        b'"entries":{"containerID1":"4-6","containerID2":"1-3"},"checksum":0}'
    )
    cp = decode_cpu_checkpoint(v1, initial_containers={"containerID1": ("p", "a"), "containerID2": ("p", "b")})
    assert (cp.version, cp.entries) == (1, {"p": {"a": "4-6", "b": "1-3"}})
    with pytest.raises(MigrationError, match="containerID 'containerID2' not found in initial containers list"):
        decode_cpu_checkpoint(v1, initial_containers={"containerID1": ("p", "a")})


def test_v1_with_bad_checksum_is_corrupt() -> None:
    v1 = b'{"policyName":"static","defaultCpuSet":"7-9","entries":{"c1":"4-6"},"checksum":99}'
    with pytest.raises(CorruptCheckpointError, match="as v1"):
        decode_cpu_checkpoint(v1, initial_containers={"c1": ("p", "a")})


def test_neither_v2_nor_v1_shape_reports_both() -> None:
    with pytest.raises(CheckpointDecodeError, match=r"not a v2 checkpoint .* nor a v1 one"):
        decode_cpu_checkpoint(b'{"policyName":7}')


def test_truncated_file() -> None:
    blob = encode_cpu_checkpoint(CPUManagerCheckpoint("static", "0-3"))
    with pytest.raises(CheckpointDecodeError, match="unexpected end of JSON input"):
        decode_cpu_checkpoint(blob[: len(blob) // 2])
