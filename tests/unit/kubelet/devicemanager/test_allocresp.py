"""The device checkpoint's AllocResp without protobuf: checked against the protobuf runtime itself."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from support.strategies import allocate_responses

from numalign.adapters.grpc.convert import allocate_response_from_pb, allocate_response_to_pb
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.k8s.deviceplugin import ContainerAllocateResponse, DeviceSpec, Mount
from numalign.kubelet.devicemanager.allocresp import AllocRespError, decode_allocate_response, encode_allocate_response


@given(allocate_responses())
def test_protobuf_reads_what_is_written_and_the_other_way(resp: ContainerAllocateResponse) -> None:
    ours = encode_allocate_response(resp)
    assert allocate_response_from_pb(pb.ContainerAllocateResponse.FromString(ours)) == resp
    assert decode_allocate_response(allocate_response_to_pb(resp).SerializeToString()) == resp
    assert decode_allocate_response(ours) == resp


@given(allocate_responses())
def test_one_entry_per_map_gives_protobufs_bytes(resp: ContainerAllocateResponse) -> None:
    # protobuf orders map entries by its hash table; with one entry per map there is only one order.
    one = ContainerAllocateResponse(dict(list(resp.envs.items())[:1]), resp.mounts, resp.devices,
                                    dict(list(resp.annotations.items())[:1]), resp.cdi_devices)
    assert encode_allocate_response(one) == allocate_response_to_pb(one).SerializeToString()


def test_a_kubelet_written_response_round_trips_byte_for_byte() -> None:
    raw = base64.b64decode("Ch8KFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSBXRlZ3Jh")  # a Jetson node's checkpoint
    resp = decode_allocate_response(raw)
    assert resp == ContainerAllocateResponse({"NVIDIA_VISIBLE_DEVICES": "tegra"})
    assert encode_allocate_response(resp) == raw


def test_map_entries_are_sorted_and_unknown_fields_skipped() -> None:
    resp = ContainerAllocateResponse({"b": "2", "a": "1"}, (Mount("/c", "/h", True),),
                                     (DeviceSpec("/dev/x", "/dev/y", "rw"),))
    raw = encode_allocate_response(resp)
    assert raw.index(b"\n\x01a") < raw.index(b"\n\x01b")
    unknown = b"\x30\x07" + b"\x3a\x02hi" + b"\x41" + bytes(8) + b"\x4d" + bytes(4)  # fields 6-9, every wire type
    assert decode_allocate_response(unknown + raw) == resp


@pytest.mark.parametrize(
    "raw",
    [b"\xff", b"\x0a\x05ab", b"\x0b", b"\x0a\x02\x0a\x01", b"\x2a\x03\x0a\x01\xff", b"\x12\x02\x18\x0a"[:3],
     b"\x00\x01", b"\x0a" + b"\xff" * 11],
)
def test_what_is_not_a_response_is_refused(raw: bytes) -> None:
    with pytest.raises(AllocRespError):
        decode_allocate_response(raw)
