"""The state files as each kubelet release writes and reads them. Expected bytes are what the real
1.37.2 / 1.36.3 state code wrote for the same state (scripts/conformance --areas checkpoint)."""

from __future__ import annotations

import pytest

from numalign.kubelet.checkpointmanager.errors import (
    CheckpointDecodeError,
    CorruptCheckpointError,
    PolicyMismatchError,
)
from numalign.kubelet.cpumanager.checkpoint import CPUManagerCheckpoint, decode_cpu_checkpoint, encode_cpu_checkpoint
from numalign.kubelet.memorymanager.checkpoint import decode_memory_checkpoint, encode_memory_checkpoint
from numalign.kubelet.memorymanager.state import Block, MemoryManagerState, MemoryTable, NUMANodeState

CPU = CPUManagerCheckpoint("static", "0,3", {"p": {"c": "1-2"}})
CPU_137 = (
    b'{"policyName":"static","defaultCpuSet":"0,3","entries":{"p":{"c":"1-2"}},"checksum":4070187320,'
    b'"data":"{\\"policyName\\":\\"static\\",\\"defaultCpuSet\\":\\"0,3\\",\\"entries\\":{\\"p\\":{\\"c\\":\\"1-2\\"}}}",'
    b'"dataChecksum":3667103681}'
)
CPU_V2 = b'{"policyName":"static","defaultCpuSet":"0,3","entries":{"p":{"c":"1-2"}},"checksum":4070187320}'

MEMORY = MemoryManagerState(
    "Static",
    {0: NUMANodeState(1, {"memory": MemoryTable(1024, 24, 1000, 100, 900)}, [0])},
    {"p": {"c": [Block([0], "memory", 100)]}},
)
MEMORY_137 = (
    b'{"policyName":"Static","machineState":{"0":{"numberOfAssignments":1,"memoryMap":{"memory":{"total":1024,'
    b'"systemReserved":24,"allocatable":1000,"reserved":100,"free":900}},"cells":[0]}},"entries":{"p":{"c":'
    b'[{"numaAffinity":[0],"type":"memory","size":100}]}},"checksum":3405196461,"data":"{\\"policyName\\":'
    b'\\"Static\\",\\"machineState\\":{\\"0\\":{\\"numberOfAssignments\\":1,\\"memoryMap\\":{\\"memory\\":'
    b'{\\"total\\":1024,\\"systemReserved\\":24,\\"allocatable\\":1000,\\"reserved\\":100,\\"free\\":900}},'
    b'\\"cells\\":[0]}},\\"entries\\":{\\"p\\":{\\"c\\":[{\\"numaAffinity\\":[0],\\"type\\":\\"memory\\",'
    b'\\"size\\":100}]}}}","dataChecksum":2863833368}'
)


def test_cpu_137_writes_the_data_envelope() -> None:
    assert encode_cpu_checkpoint(CPU, version=(1, 37)) == CPU_137
    assert encode_cpu_checkpoint(CPU, version=(1, 36)) == CPU_V2
    assert encode_cpu_checkpoint(CPU) == CPU_V2


def test_cpu_137_reads_the_data_and_refuses_a_wrong_data_checksum() -> None:
    cp = decode_cpu_checkpoint(CPU_137, policy_name="static", version=(1, 37))
    assert (cp.default_cpu_set, cp.entries) == ("0,3", {"p": {"c": "1-2"}})
    # the outer fields are not read back: only data counts, and its checksum is never "absent"
    outer_changed = CPU_137.replace(b'"defaultCpuSet":"0,3","entries"', b'"defaultCpuSet":"0-3","entries"')
    assert decode_cpu_checkpoint(outer_changed, version=(1, 37)).default_cpu_set == "0,3"
    with pytest.raises(CorruptCheckpointError):
        decode_cpu_checkpoint(CPU_137.replace(b"3667103681", b"5"), version=(1, 37))
    # a file without the envelope is read by the v2 loader
    assert decode_cpu_checkpoint(CPU_V2, version=(1, 37)).entries == {"p": {"c": "1-2"}}


def test_cpu_136_reports_the_v1_attempt_error() -> None:
    bad = CPU_V2.replace(b"4070187320", b"7")
    with pytest.raises(CorruptCheckpointError):
        decode_cpu_checkpoint(bad)
    with pytest.raises(CheckpointDecodeError):
        decode_cpu_checkpoint(bad, version=(1, 36))


def test_memory_137_writes_and_reads_the_data_envelope() -> None:
    assert encode_memory_checkpoint(MEMORY, version=(1, 37)) == MEMORY_137
    assert decode_memory_checkpoint(MEMORY_137, version=(1, 37)).state() == MEMORY
    with pytest.raises(CorruptCheckpointError):
        decode_memory_checkpoint(MEMORY_137.replace(b"2863833368", b"2863833369"), version=(1, 37))


def test_memory_137_reads_a_file_without_checksum_as_the_legacy_layout() -> None:
    # "null" decodes to nothing: the legacy v1 loader accepts its 0 checksum, the empty policy differs
    with pytest.raises(PolicyMismatchError):
        decode_memory_checkpoint(b"null", policy_name="Static", version=(1, 37))
    with pytest.raises(CorruptCheckpointError):
        decode_memory_checkpoint(b"null", policy_name="Static")
