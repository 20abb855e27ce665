"""The baseline CPUs of the resize preview (KEP-5554) in cpu_manager_state: written only when a container
was resized, shaped as merged k/k PR #140314 checkpoints them, and invisible to the v2 checksum."""

from __future__ import annotations

import json

import pytest

from numalign.kubelet.checkpointmanager.errors import CorruptCheckpointError
from numalign.kubelet.cpumanager.checkpoint import CPUManagerCheckpoint, decode_cpu_checkpoint, encode_cpu_checkpoint
from numalign.kubelet.cpumanager.state import CPUManagerState

PLAIN = CPUManagerCheckpoint("static", "0,5-7", {"pod-a": {"app": "1-4"}})
RESIZED = CPUManagerCheckpoint("static", "0,5-7", {"pod-a": {"app": "1-4"}}, baselines={"pod-a": {"app": "1-2"}})


def test_the_checkpoint_round_trips_with_the_baseline_field() -> None:
    data = encode_cpu_checkpoint(RESIZED)
    assert json.loads(data)["baselines"] == {"pod-a": {"app": {"baseline": "1-2"}}}
    back = decode_cpu_checkpoint(data, policy_name="static")
    assert back.baselines == {"pod-a": {"app": "1-2"}} and back.entries == RESIZED.entries
    assert encode_cpu_checkpoint(back) == data


def test_without_a_resize_the_file_is_the_kubelets_v2_byte_for_byte() -> None:
    data = encode_cpu_checkpoint(PLAIN)
    assert b"baselines" not in data
    assert data == (b'{"policyName":"static","defaultCpuSet":"0,5-7","entries":{"pod-a":{"app":"1-4"}},'
                    b'"checksum":' + str(json.loads(data)["checksum"]).encode() + b"}")
    assert decode_cpu_checkpoint(data).baselines == {}


def test_the_checksum_covers_the_v2_fields_only_so_released_kubelets_verify_the_file() -> None:
    # a 1.33-1.37 kubelet ignores the unknown key and checks the same checksum as without it
    checksums = {json.loads(encode_cpu_checkpoint(cp))["checksum"] for cp in (RESIZED, PLAIN)}
    assert len(checksums) == 1
    doctored = json.loads(encode_cpu_checkpoint(RESIZED))
    doctored["entries"]["pod-a"]["app"] = "1-3"
    with pytest.raises(CorruptCheckpointError, match="checksum"):  # the v2 content is still protected
        decode_cpu_checkpoint(json.dumps(doctored).encode())


def test_the_state_parses_and_copies_the_baselines() -> None:
    state = CPUManagerState.from_strings("static", "0,5-7", {"pod-a": {"app": "1-4"}},
                                         baselines={"pod-a": {"app": "1-2"}})
    assert state.baselines == {"pod-a": {"app": frozenset({1, 2})}}
    copy = state.copy()
    copy.baselines["pod-a"]["app"] = frozenset({1})
    assert state.baselines["pod-a"]["app"] == frozenset({1, 2})
    assert state.baseline_strings() == {"pod-a": {"app": "1-2"}}
