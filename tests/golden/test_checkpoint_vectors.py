"""Checkpoint checksums and bytes against files written (or accepted) by a real kubelet.

Provenance of the vectors:
* UPSTREAM_CPU: kubernetes/kubernetes pkg/kubelet/cm/cpumanager/state/state_checkpoint_test.go
  (the pre-PodLevelResourceManagers table, e.g. blob 3485946268 of the stored corpus): each JSON
  restores successfully in the upstream test, so its checksum is what the Go code computes.
* UPSTREAM_MEMORY: pkg/kubelet/cm/memorymanager/state/state_checkpoint_test.go, "Restore checkpoint
  from v1 (migration)" (the <= 1.35 layout).
* NODE_*: `cat` output of cpu_manager_state and device-plugins/kubelet_internal_checkpoint on real
  nodes, published in public write-ups (a GPU/NUMA alignment test on a 28-CPU, 3-GPU node; an
  nvidia device-plugin lab on kind; a cloud vendor's GPU troubleshooting page). They are the exact
  bytes a kubelet wrote, so encode(decode(bytes)) must reproduce them.
"""

from __future__ import annotations

import pytest

from numalign.kubelet.checkpointmanager.errors import CorruptCheckpointError, PolicyMismatchError
from numalign.kubelet.cpumanager.checkpoint import cpu_checkpoint_checksum, decode_cpu_checkpoint, encode_cpu_checkpoint
from numalign.kubelet.devicemanager.checkpoint import (
    decode_device_checkpoint,
    device_checkpoint_checksum,
    encode_device_checkpoint,
)
from numalign.kubelet.memorymanager.checkpoint import (
    decode_memory_checkpoint,
    encode_memory_checkpoint,
    memory_checkpoint_checksum,
)

# (policy, json) — upstream unit-test checkpoints that the Go code restores (v2 layout).
UPSTREAM_CPU_V2 = [
    ("none", '{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 354655845}'),
    (
        "none",
        '{"policyName": "none", "defaultCPUSet": "1-3", "entries": {"pod": '
        '{"container1": "4-6", "container2": "1-3"}}, "checksum": 3610638499}',
    ),
    # These two fail later in the kubelet (cpuset parse), after the checksum was accepted.
    ("none", '{"policyName": "none", "defaultCPUSet": "1.3", "entries": {}, "checksum": 3021697696}'),
    (
        "none",
        '{"policyName": "none", "defaultCPUSet": "1-3", "entries": {"pod": '
        '{"container1": "4-6", "container2": "asd"}}, "checksum": 962272150}',
    ),
]

# Exact bytes of cpu_manager_state on a real node (static policy, 28 CPUs).
NODE_CPU = [
    b'{"policyName":"static","defaultCpuSet":"0-27","checksum":273146150}',
    b'{"policyName":"static","defaultCpuSet":"0,14-27","entries":{"c0c5c4b3-3f63-4677-ba68-52da74012371":'
    b'{"app":"1-13"}},"checksum":1954249489}',
    b'{"policyName":"static","defaultCpuSet":"0-13","entries":{"6c5f3038-adfc-485d-9943-3fd5e825300d":'
    b'{"app":"14-27"}},"checksum":3451722052}',
    b'{"policyName":"static","defaultCpuSet":"0,13","entries":{"55784671-0e4e-49e2-b4d6-c0377ca14c81":'
    b'{"app":"1-12"},"6c5f3038-adfc-485d-9943-3fd5e825300d":{"app":"14-27"}},"checksum":3558029577}',
    b'{"policyName":"static","defaultCpuSet":"0,4-27","entries":{"513cb897-0262-4868-826f-aa943ee45a38":'
    b'{"app":"1-3"}},"checksum":1982473279}',
    b'{"policyName":"static","defaultCpuSet":"0,20-27","entries":{"9388acc6-a396-4f03-a353-ce153da46aaf":'
    b'{"app":"1-13,17-19"},"f21fe02b-e6e2-4d04-9a4a-9e57367fa324":{"app":"14-16"}},"checksum":4055801500}',
    # A 32-CPU node with strict reservation, as used in siderolabs/talos kubelet state tests.
    b'{"policyName":"static","defaultCpuSet":"1,3-15,17,19-31","checksum":1902567528}',
]

UPSTREAM_MEMORY = (
    b'{"policyName":"static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":'
    b'{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},'
    b'"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},"checksum":4215593881}'
)

_GPU_ALLOC_0 = (
    "CkIKFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSKEdQVS03N2E3MDJkYi1lMzdmLTNhNzQtZDQ2ZC1jNTcxM2Y2NjA1OGMaJAoOL2Rldi9u"
    "dmlkaWFjdGwSDi9kZXYvbnZpZGlhY3RsGgJydxomCg8vZGV2L252aWRpYS11dm0SDy9kZXYvbnZpZGlhLXV2bRoCcncaMgoVL2Rldi9u"
    "dmlkaWEtdXZtLXRvb2xzEhUvZGV2L252aWRpYS11dm0tdG9vbHMaAnJ3Gi4KEy9kZXYvbnZpZGlhLW1vZGVzZXQSEy9kZXYvbnZpZGlh"
    "LW1vZGVzZXQaAnJ3GiAKDC9kZXYvbnZpZGlhMBIML2Rldi9udmlkaWEwGgJydw=="
)
_GPU_ALLOC_2 = (
    "CkIKFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSKEdQVS1jMWU5ZjI0OS1iMzdiLTgxYzItYThkOS1iYTVjYTAyOTQ4NDEaJAoOL2Rldi9u"
    "dmlkaWFjdGwSDi9kZXYvbnZpZGlhY3RsGgJydxomCg8vZGV2L252aWRpYS11dm0SDy9kZXYvbnZpZGlhLXV2bRoCcncaMgoVL2Rldi9u"
    "dmlkaWEtdXZtLXRvb2xzEhUvZGV2L252aWRpYS11dm0tdG9vbHMaAnJ3Gi4KEy9kZXYvbnZpZGlhLW1vZGVzZXQSEy9kZXYvbnZpZGlh"
    "LW1vZGVzZXQaAnJ3GiAKDC9kZXYvbnZpZGlhMhIML2Rldi9udmlkaWEyGgJydw=="
)
_GPUS = (
    '["GPU-77a702db-e37f-3a74-d46d-c5713f66058c","GPU-9b341c59-f96b-ba85-c137-78c3652fea65",'
    '"GPU-c1e9f249-b37b-81c2-a8d9-ba5ca0294841"]'
)

# Exact bytes of kubelet_internal_checkpoint on real nodes.
NODE_DEVICES = [
    b'{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"nvidia.com/gpu":'
    b'["GPU-0650a168-e770-3ea8-8ac3-8a1d419763e0"]}},"Checksum":3952659280}',
    b'{"Data":{"PodDeviceEntries":[{"PodUID":"bf52b2cd-b611-4e79-86b1-280b283185c3","ContainerName":"check",'
    b'"ResourceName":"nvidia.com/gpu","DeviceIDs":{"-1":["tegra"]},'
    b'"AllocResp":"Ch8KFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSBXRlZ3Jh"}],'
    b'"RegisteredDevices":{"nvidia.com/gpu":["tegra"]}},"Checksum":3660592824}',
    (
        '{"Data":{"PodDeviceEntries":[{"PodUID":"513cb897-0262-4868-826f-aa943ee45a38","ContainerName":"app",'
        '"ResourceName":"nvidia.com/gpu","DeviceIDs":{"0":["GPU-77a702db-e37f-3a74-d46d-c5713f66058c"]},'
        f'"AllocResp":"{_GPU_ALLOC_0}"}}],"RegisteredDevices":{{"nvidia.com/gpu":{_GPUS}}}}},'
        '"Checksum":133412836}'
    ).encode(),
    (
        '{"Data":{"PodDeviceEntries":[{"PodUID":"f21fe02b-e6e2-4d04-9a4a-9e57367fa324","ContainerName":"app",'
        '"ResourceName":"nvidia.com/gpu","DeviceIDs":{"1":["GPU-c1e9f249-b37b-81c2-a8d9-ba5ca0294841"]},'
        f'"AllocResp":"{_GPU_ALLOC_2}"}}],"RegisteredDevices":{{"nvidia.com/gpu":{_GPUS}}}}},'
        '"Checksum":2941906560}'
    ).encode(),
    # Two entries: the checksum depends on their order, which the kubelet takes from map iteration.
    (
        '{"Data":{"PodDeviceEntries":[{"PodUID":"f21fe02b-e6e2-4d04-9a4a-9e57367fa324","ContainerName":"app",'
        '"ResourceName":"nvidia.com/gpu","DeviceIDs":{"1":["GPU-c1e9f249-b37b-81c2-a8d9-ba5ca0294841"]},'
        f'"AllocResp":"{_GPU_ALLOC_2}"}},'
        '{"PodUID":"78a1a5c8-39ee-47c3-8e95-9328f1398693","ContainerName":"app",'
        '"ResourceName":"nvidia.com/gpu","DeviceIDs":{"0":["GPU-77a702db-e37f-3a74-d46d-c5713f66058c"]},'
        f'"AllocResp":"{_GPU_ALLOC_0}"}}],"RegisteredDevices":{{"nvidia.com/gpu":{_GPUS}}}}},'
        '"Checksum":3193682924}'
    ).encode(),
]


@pytest.mark.parametrize(("policy", "text"), UPSTREAM_CPU_V2)
def test_upstream_cpu_v2_checksums_verify(policy: str, text: str) -> None:
    cp = decode_cpu_checkpoint(text.encode(), policy_name=policy)
    assert cp.version == 2
    assert cp.checksum != 0
    assert cpu_checkpoint_checksum(cp) == cp.checksum


def test_upstream_cpu_v1_checksum_is_accepted_through_the_v1_verifier() -> None:
    # "Restore checkpoint from checkpoint with v1 checksum": the v2 hash differs, the v1 hash matches.
    text = b'{"policyName": "none", "defaultCPUSet": "1-3", "checksum": 1694838852}'
    cp = decode_cpu_checkpoint(text, policy_name="none")
    assert (cp.version, cp.default_cpu_set, dict(cp.entries)) == (1, "1-3", {})


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        (
            b'{"policyName": "none", "defaultCPUSet": "1-3", "entries": {"containerID1": "4-6", '
            b'"containerID2": "1-3"}, "checksum": 3680390589}',
            "none",
        ),
        (
            b'{"policyName": "static", "defaultCPUSet": "7-9", "entries": {"containerID1": "4-6", '
            b'"containerID2": "1-3"}, "checksum": 2026311253}',
            "static",
        ),
    ],
)
def test_upstream_cpu_v1_migration(text: bytes, policy: str) -> None:
    containers = {"containerID1": ("pod", "container1"), "containerID2": ("pod", "container2")}
    cp = decode_cpu_checkpoint(text, policy_name=policy, initial_containers=containers)
    assert cp.version == 1
    assert cp.entries == {"pod": {"container1": "4-6", "container2": "1-3"}}


def test_upstream_cpu_invalid_checksum_and_policy() -> None:
    with pytest.raises(CorruptCheckpointError, match="checkpoint is corrupted"):
        decode_cpu_checkpoint(b'{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 1337}')
    other = b'{"policyName": "other", "defaultCPUSet": "1-3", "entries": {}, "checksum": 1394507217}'
    message = 'configured policy "none" differs from state checkpoint policy "other"'
    with pytest.raises(PolicyMismatchError, match=message):
        decode_cpu_checkpoint(other, policy_name="none")


@pytest.mark.parametrize("blob", NODE_CPU)
def test_node_cpu_state_round_trips_byte_for_byte(blob: bytes) -> None:
    cp = decode_cpu_checkpoint(blob, policy_name="static")
    assert encode_cpu_checkpoint(cp) == blob


def test_upstream_memory_checksum_and_bytes() -> None:
    cp = decode_memory_checkpoint(UPSTREAM_MEMORY, policy_name="static")
    assert cp.checksum == 4215593881 == memory_checkpoint_checksum(cp)
    assert encode_memory_checkpoint(cp) == UPSTREAM_MEMORY


def test_upstream_memory_invalid_checksum() -> None:
    bad = UPSTREAM_MEMORY.replace(b"4215593881", b"101010")
    with pytest.raises(CorruptCheckpointError) as info:
        decode_memory_checkpoint(bad)
    assert (info.value.expected, info.value.actual) == (101010, 4215593881)


@pytest.mark.parametrize("blob", NODE_DEVICES)
def test_node_device_checkpoint_round_trips_byte_for_byte(blob: bytes) -> None:
    cp = decode_device_checkpoint(blob)
    assert device_checkpoint_checksum(cp) == cp.checksum
    assert encode_device_checkpoint(cp) == blob


def test_node_device_checkpoint_decodes_alloc_resp_as_raw_protobuf() -> None:
    cp = decode_device_checkpoint(NODE_DEVICES[1])
    (entry,) = cp.pod_device_entries
    assert entry.device_ids == {-1: ["tegra"]}
    # field 1 (envs map entry): key NVIDIA_VISIBLE_DEVICES, value tegra
    assert entry.alloc_resp == b"\n\x1f\n\x16NVIDIA_VISIBLE_DEVICES\x12\x05tegra"
