"""Go encoding/json semantics that change the decoded value (and so the checksum) or the bytes."""

from __future__ import annotations

from typing import Any

import pytest

from numalign.kubelet.checkpointmanager.errors import CheckpointDecodeError
from numalign.kubelet.checkpointmanager.gojson import decode, encode, parse_json, quote
from numalign.kubelet.checkpointmanager.gospew import (
    BYTES,
    INT,
    INT64,
    STRING,
    UINT8,
    UINT64,
    Field,
    Map,
    Ptr,
    Slice,
    Struct,
)

_T = Struct(
    "pkg.T",
    (
        Field("Name", STRING, "name"),
        Field("DefaultCPUSet", STRING, "defaultCpuSet"),
        Field("Items", Map(STRING, STRING), "items", omitempty=True),
        Field("Count", UINT64, "count"),
    ),
)


def _decode(text: str, t: Struct = _T, initial: dict[str, Any] | None = None) -> Any:
    start = initial if initial is not None else {"Name": "", "DefaultCPUSet": "", "Items": {}, "Count": 0}
    return decode(t, parse_json(text.encode()), start, "T")


def test_keys_match_case_insensitively_exact_name_first() -> None:
    assert _decode('{"defaultCPUSet": "1-3"}')["DefaultCPUSet"] == "1-3"
    # Both spellings present: the later key wins, whichever matched.
    assert _decode('{"defaultCpuSet": "a", "DEFAULTCPUSET": "b"}')["DefaultCPUSet"] == "b"


def test_unknown_keys_are_ignored_and_absent_keys_keep_the_initial_value() -> None:
    got = _decode('{"other": 1}')
    assert got == {"Name": "", "DefaultCPUSet": "", "Items": {}, "Count": 0}


def test_null_makes_maps_nil_but_leaves_strings_alone() -> None:
    got = _decode('{"items": null, "name": null}', initial={"Name": "x", "DefaultCPUSet": "", "Items": {}, "Count": 0})
    assert got["Items"] is None
    assert got["Name"] == "x"


def test_null_top_level_is_a_no_op_for_structs() -> None:
    assert _decode("null") == {"Name": "", "DefaultCPUSet": "", "Items": {}, "Count": 0}


@pytest.mark.parametrize("count", ["-1", "-0", "1.5", "1e3", "true", '"7"', "18446744073709551616"])
def test_uint_fields_reject_what_go_rejects(count: str) -> None:
    with pytest.raises(CheckpointDecodeError, match=r"cannot unmarshal .* into T\.Count of type uint64"):
        _decode('{"count": ' + count + "}")


def test_uint_accepts_full_range() -> None:
    assert _decode('{"count": 18446744073709551615}')["Count"] == 2**64 - 1


def test_signed_ints_accept_minus_zero() -> None:
    assert decode(INT, parse_json(b"-0"), 5, "i") == 0


def test_int_map_keys_parse_like_parseint() -> None:
    t = Map(INT64, Slice(STRING))
    assert decode(t, parse_json(b'{"-1": ["a"], "+2": []}'), None, "m") == {-1: ["a"], 2: []}
    for bad in (b'{"x": []}', b'{" 1": []}', b'{"1.0": []}'):
        with pytest.raises(CheckpointDecodeError, match="object key"):
            decode(t, parse_json(bad), None, "m")


def test_map_elements_start_from_zero_and_pointers_allocate() -> None:
    inner = Struct("pkg.I", (Field("A", INT, "a"), Field("B", INT, "b")))
    got = decode(Map(INT, Ptr(inner)), parse_json(b'{"0": {"a": 1}, "1": null}'), None, "m")
    assert got == {0: {"A": 1, "B": 0}, 1: None}


def test_bytes_are_base64_and_invalid_base64_is_reported() -> None:
    assert decode(BYTES, parse_json(b'"AAr/"'), None, "b") == b"\x00\x0a\xff"
    assert decode(BYTES, parse_json(b'""'), None, "b") == b""
    with pytest.raises(CheckpointDecodeError, match="base64"):
        decode(BYTES, parse_json(b'"!!"'), None, "b")


def test_arrays_into_maps_are_type_errors() -> None:
    message = r"cannot unmarshal array into T\.Items of type map\[string\]string"
    with pytest.raises(CheckpointDecodeError, match=message):
        _decode('{"items": ["a"]}')


def test_truncated_and_empty_input() -> None:
    for text in (b"", b"{", b'{"name": "a"', b"  "):
        with pytest.raises(CheckpointDecodeError, match="unexpected end of JSON input"):
            parse_json(text)


def test_syntax_errors_name_the_position() -> None:
    with pytest.raises(CheckpointDecodeError, match="line 1 column 2"):
        parse_json(b"{]")
    with pytest.raises(CheckpointDecodeError):
        parse_json(b'{"a": NaN}')


def test_lone_surrogate_escape_becomes_replacement_char() -> None:
    assert decode(STRING, parse_json(b'"\\ud800x"'), "", "s") == "\ufffdx"


def test_encode_matches_go_marshal() -> None:
    value = {"Name": "a<b>&c", "DefaultCPUSet": "", "Items": {}, "Count": 5}
    assert encode(_T, value) == '{"name":"a\\u003cb\\u003e\\u0026c","defaultCpuSet":"","count":5}'
    value["Items"] = {"z": "1", "a": "2"}
    assert encode(_T, value).endswith('"items":{"a":"2","z":"1"},"count":5}')


def test_encode_sorts_int_keys_as_strings_like_go() -> None:
    assert encode(Map(INT, INT), {10: 1, 2: 2, -1: 3}) == '{"-1":3,"10":1,"2":2}'


def test_encode_nil_and_bytes() -> None:
    assert encode(Slice(STRING), None) == "null"
    assert encode(Slice(UINT8), b"\x00\xff") == '"AP8="'
    assert encode(Ptr(_T), None) == "null"


def test_quote_escapes_control_characters_like_go() -> None:
    assert quote("\b\f\n\r\t\x01\u2028") == '"\\b\\f\\n\\r\\t\\u0001\\u2028"'
    assert quote("é") == '"é"'
