"""go-spew `%#v` formatting rules and FNV-1a-32, one rule per test."""

from __future__ import annotations

import pytest

from numalign.kubelet.checkpointmanager.checksum import checksum_of_text, fnv1a_32, go_checksum
from numalign.kubelet.checkpointmanager.gospew import (
    BOOL,
    BYTES,
    INT,
    INT64,
    STRING,
    UINT64,
    Field,
    Map,
    Ptr,
    Scalar,
    Slice,
    Struct,
    sprint_for_hash,
    type_string,
    zero_value,
)

_INNER = Struct("pkg.Inner", (Field("N", UINT64), Field("On", BOOL)))


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", 0x811C9DC5), (b"a", 0xE40C292C), (b"foobar", 0xBF9CF968)],  # published FNV-1a test vectors
)
def test_fnv1a_32_reference_vectors(data: bytes, expected: int) -> None:
    assert fnv1a_32(data) == expected


def test_checksum_of_text_hashes_utf8() -> None:
    assert checksum_of_text("é") == fnv1a_32("é".encode())


def test_type_strings() -> None:
    assert type_string(Map(STRING, Slice(STRING))) == "map[string][]string"
    assert type_string(Map(INT, Ptr(_INNER), "pkg.Named")) == "pkg.Named"
    assert type_string(BYTES) == "[]uint8"
    assert type_string(Ptr(_INNER)) == "*pkg.Inner"


def test_struct_fields_are_typed_and_named() -> None:
    assert sprint_for_hash(_INNER, {"N": 7, "On": True}) == "(pkg.Inner){N:(uint64)7 On:(bool)true}"


def test_top_level_pointer_prints_star_type_then_untyped_struct() -> None:
    assert sprint_for_hash(Ptr(_INNER), {"N": 0, "On": False}) == "(*pkg.Inner){N:(uint64)0 On:(bool)false}"


def test_nil_pointer_keeps_its_type_unless_inside_a_container() -> None:
    assert sprint_for_hash(Ptr(_INNER), None) == "(*pkg.Inner)<nil>"
    assert sprint_for_hash(Map(INT, Ptr(_INNER)), {1: None}) == "(map[int]*pkg.Inner)map[1:<nil>]"


def test_pointer_map_values_print_as_angle_star() -> None:
    t = Map(INT, Ptr(_INNER))
    expected = "(map[int]*pkg.Inner)map[0:<*>{N:(uint64)1 On:(bool)false}]"
    assert sprint_for_hash(t, {0: {"N": 1, "On": False}}) == expected


def test_nil_and_empty_collections_differ() -> None:
    assert sprint_for_hash(Slice(INT), None) == "([]int)<nil>"
    assert sprint_for_hash(Slice(INT), []) == "([]int)[]"
    assert sprint_for_hash(Map(STRING, STRING), None) == "(map[string]string)<nil>"
    assert sprint_for_hash(Map(STRING, STRING), {}) == "(map[string]string)map[]"


def test_slice_elements_and_map_entries_are_untyped() -> None:
    t = Map(STRING, Slice(Struct("pkg.E", (Field("S", STRING),))))
    got = sprint_for_hash(t, {"k": [{"S": "a"}, {"S": "b"}]})
    assert got == "(map[string][]pkg.E)map[k:[{S:(string)a} {S:(string)b}]]"


def test_int_keys_sort_numerically_string_keys_bytewise() -> None:
    assert sprint_for_hash(Map(INT64, STRING), {10: "x", -1: "y", 2: "z"}) == "(map[int64]string)map[-1:y 2:z 10:x]"
    assert sprint_for_hash(Map(STRING, INT), {"b": 1, "B": 2, "a": 3}) == "(map[string]int)map[B:2 a:3 b:1]"


def test_named_string_keys_and_values() -> None:
    rn = Scalar("v1.ResourceName", "string")
    assert sprint_for_hash(Struct("s.T", (Field("R", rn),)), {"R": "memory"}) == "(s.T){R:(v1.ResourceName)memory}"


def test_bytes_print_as_decimal_list() -> None:
    assert sprint_for_hash(BYTES, b"\x00\x0a\xff") == "([]uint8)[0 10 255]"
    assert sprint_for_hash(BYTES, b"") == "([]uint8)[]"
    assert sprint_for_hash(BYTES, None) == "([]uint8)<nil>"


def test_strings_are_not_quoted_or_escaped() -> None:
    assert sprint_for_hash(STRING, 'a "b"\n') == '(string)a "b"\n'


def test_pointer_to_pointer_is_refused() -> None:
    with pytest.raises(TypeError):
        sprint_for_hash(Ptr(Ptr(_INNER)), {"N": 0, "On": False})


def test_zero_values() -> None:
    assert zero_value(_INNER) == {"N": 0, "On": False}
    assert zero_value(Map(STRING, STRING)) is None
    assert zero_value(STRING) == ""


def test_go_checksum_is_fnv_of_the_dump() -> None:
    value = {"N": 3, "On": True}
    assert go_checksum(_INNER, value) == fnv1a_32(sprint_for_hash(_INNER, value).encode())
