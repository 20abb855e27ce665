"""ContainerAllocateResponse <-> its protobuf bytes, the `AllocResp` of kubelet_internal_checkpoint.

The kubelet keeps each container's Allocate answer in its device checkpoint as the serialized
v1beta1.ContainerAllocateResponse (podDevices.toCheckpointData marshals it, fromCheckpointData
unmarshals it). Reading and writing that file must not need the protobuf runtime (`numalign admit
--state-dir` loads no gRPC), so the five fields are written here by hand:

    map<string,string> envs = 1; repeated Mount mounts = 2; repeated DeviceSpec devices = 3;
    map<string,string> annotations = 4; repeated CDIDevice cdi_devices = 5;
    Mount {container_path = 1; host_path = 2; bool read_only = 3}
    DeviceSpec {container_path = 1; host_path = 2; permissions = 3}   CDIDevice {name = 1}

Encoding follows proto3: fields in number order, default values left out, a map entry always with
its key and value. Go writes map entries in random order; they are written sorted by key here, as
Go's deterministic marshalling does, so equal responses give equal bytes. Decoding accepts any field
order, skips unknown fields, and lets the last of repeated singular values win, as every protobuf
runtime does; anything that is not such a message raises AllocRespError.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from numalign.errors import CheckpointError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, DeviceSpec, Mount

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class AllocRespError(CheckpointError):
    """The bytes are not a serialized ContainerAllocateResponse."""


# ---- writing -------------------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LEN) + _varint(len(payload)) + payload


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode("utf-8")) if value else b""


def _map(number: int, values: Mapping[str, str]) -> bytes:
    return b"".join(
        _field(number, _field(1, k.encode("utf-8")) + _field(2, v.encode("utf-8"))) for k, v in sorted(values.items())
    )


def encode_allocate_response(resp: ContainerAllocateResponse) -> bytes:
    """The protobuf bytes of `resp` (see the module docstring for the order)."""
    out = [_map(1, resp.envs)]
    for m in resp.mounts:
        flag = _varint(3 << 3 | _VARINT) + b"\x01" if m.read_only else b""
        out.append(_field(2, _text(1, m.container_path) + _text(2, m.host_path) + flag))
    for d in resp.devices:
        out.append(_field(3, _text(1, d.container_path) + _text(2, d.host_path) + _text(3, d.permissions)))
    out.append(_map(4, resp.annotations))
    for name in resp.cdi_devices:
        out.append(_field(5, _text(1, name)))
    return b"".join(out)


# ---- reading -------------------------------------------------------------------------------------


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise AllocRespError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value & (1 << 64) - 1, pos
        shift += 7
        if shift >= 70:
            raise AllocRespError("varint longer than 10 bytes")


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field: varints as ints, everything else as bytes."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise AllocRespError("field number 0")
        if wire == _VARINT:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
            continue
        if wire == _LEN:
            size, pos = _read_varint(data, pos)
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
        else:
            raise AllocRespError(f"wire type {wire} (groups are not used by this message)")
        if pos + size > len(data):
            raise AllocRespError("a field runs past the end of the message")
        yield number, wire, data[pos:pos + size]
        pos += size


def _string(wire: int, value: int | bytes) -> str:
    if wire != _LEN or not isinstance(value, bytes):
        raise AllocRespError("a string field with a non length-delimited wire type")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise AllocRespError("a string field holds invalid UTF-8") from None


def _message(wire: int, value: int | bytes) -> bytes:
    if wire != _LEN or not isinstance(value, bytes):
        raise AllocRespError("a message field with a non length-delimited wire type")
    return value


def _strings(data: bytes, count: int) -> list[str]:
    """Fields 1..count of a message whose fields are all strings (a map entry, DeviceSpec, CDIDevice)."""
    out = [""] * count
    for number, wire, value in _fields(data):
        if 1 <= number <= count:
            out[number - 1] = _string(wire, value)
    return out


def _mount(data: bytes) -> Mount:
    paths, read_only = ["", ""], False
    for number, wire, value in _fields(data):
        if number in (1, 2):
            paths[number - 1] = _string(wire, value)
        elif number == 3:
            if wire != _VARINT:
                raise AllocRespError("Mount.read_only with a non-varint wire type")
            read_only = value != 0
    return Mount(paths[0], paths[1], read_only)


def decode_allocate_response(data: bytes) -> ContainerAllocateResponse:
    """The response serialized in `data`; AllocRespError when it is not one."""
    envs: dict[str, str] = {}
    annotations: dict[str, str] = {}
    mounts: list[Mount] = []
    devices: list[DeviceSpec] = []
    cdi: list[str] = []
    for number, wire, value in _fields(data):
        if number in (1, 4):
            key, val = _strings(_message(wire, value), 2)
            (envs if number == 1 else annotations)[key] = val
        elif number == 2:
            mounts.append(_mount(_message(wire, value)))
        elif number == 3:
            devices.append(DeviceSpec(*_strings(_message(wire, value), 3)))
        elif number == 5:
            cdi.append(_strings(_message(wire, value), 1)[0])
    return ContainerAllocateResponse(envs, tuple(mounts), tuple(devices), annotations, tuple(cdi))
