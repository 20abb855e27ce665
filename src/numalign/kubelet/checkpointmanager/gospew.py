"""go-spew `%#v` emulation for the few Go types the kubelet checkpoints hold.

Theory of operation
-------------------
The kubelet's checkpoint checksum is FNV-1a-32 over `dump.ForHash(value)`, which is go-spew's
`ConfigState{Indent: " ", SortKeys, DisableMethods, SpewKeys, DisablePointerAddresses,
DisableCapacities}.Sprintf("%#v", value)` (go-spew v1.1.x, spew/format.go). For `%#v` only these
rules matter (Indent, DisablePointerAddresses and DisableCapacities affect Dump, not Sprintf):

* every value is prefixed by `(<Go type string>)` unless the formatter was told to skip the type
  ("ignoreNextType"), which happens for slice elements, map keys, map values and the value a
  pointer points to;
* a non-nil pointer prints `(*T)` (or `<*>` where the type is skipped) then the pointee without
  its type; a nil pointer prints `(*T)<nil>` (or `<nil>`);
* strings print raw (no quotes), integers in decimal, bools as true/false;
* slices print `[a b c]` (nil: `<nil>`, so nil and empty differ), `[]byte` included (decimal bytes);
* maps print `map[k:v k:v]` with keys sorted (ints numerically, strings bytewise), nil: `<nil>`;
* structs print `{Name:(type)value Name:(type)value}` with every field typed.

Values are plain Python data described by a GoType: str/int/bool for scalars, `bytes` for
[]byte, list for slices, dict for maps, dict keyed by Go field name for structs, and None for a
nil pointer, slice or map. A pointer's value is the pointee itself (or None).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ScalarKind = Literal["string", "int", "uint", "bool"]


@dataclass(frozen=True, slots=True)
class Scalar:
    """A Go basic type or a named type over one (string, int, uint64, v1.ResourceName…)."""

    name: str
    kind: ScalarKind
    bits: int = 64


@dataclass(frozen=True, slots=True)
class Slice:
    elem: GoType
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Map:
    key: Scalar
    elem: GoType
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Ptr:
    elem: GoType


@dataclass(frozen=True, slots=True)
class Field:
    """A struct field: Go name (what spew prints), JSON key (what encoding/json writes)."""

    name: str
    type: GoType
    json: str | None = None
    omitempty: bool = False

    @property
    def json_name(self) -> str:
        return self.name if self.json is None else self.json


@dataclass(frozen=True, slots=True)
class Struct:
    name: str
    fields: tuple[Field, ...]


GoType = Scalar | Slice | Map | Ptr | Struct

# Go's predeclared types used by the checkpoints.
STRING = Scalar("string", "string")
INT = Scalar("int", "int")
INT64 = Scalar("int64", "int")
UINT64 = Scalar("uint64", "uint")
UINT8 = Scalar("uint8", "uint", 8)
BOOL = Scalar("bool", "bool")
BYTES = Slice(UINT8)  # reflect names []byte "[]uint8"
CHECKSUM = Scalar("checksum.Checksum", "uint")


def type_string(t: GoType) -> str:
    """reflect.Type.String(): package-qualified names for named types, literals otherwise."""
    if isinstance(t, Scalar | Struct):
        return t.name
    if isinstance(t, Slice):
        return t.name if t.name is not None else "[]" + type_string(t.elem)
    if isinstance(t, Map):
        if t.name is not None:
            return t.name
        return f"map[{type_string(t.key)}]{type_string(t.elem)}"
    return "*" + type_string(t.elem)


def is_bytes(t: GoType) -> bool:
    return isinstance(t, Slice) and t.elem == UINT8 and t.name is None


def zero_value(t: GoType) -> Any:
    """The Go zero value: "" / 0 / false, nil for pointers, slices and maps, zeroed structs."""
    if isinstance(t, Scalar):
        return {"string": "", "int": 0, "uint": 0, "bool": False}[t.kind]
    if isinstance(t, Struct):
        return {f.name: zero_value(f.type) for f in t.fields}
    return None


def key_sort_key(t: Scalar, key: Any) -> Any:
    # spew's valueSortLess: numeric for ints, Go string comparison (UTF-8 bytes) for strings.
    if t.kind == "string":
        return str(key).encode("utf-8")
    return key


def sprint_for_hash(t: GoType, value: Any) -> str:
    """dump.ForHash(value): go-spew `%#v` text of a value of Go type `t`."""
    out: list[str] = []
    _format(t, value, False, out)
    return "".join(out)


def _format_scalar(t: Scalar, value: Any) -> str:
    if t.kind == "string":
        return str(value)
    if t.kind == "bool":
        return "true" if value else "false"
    return str(int(value))


def _format(t: GoType, value: Any, ignore_type: bool, out: list[str]) -> None:
    if isinstance(t, Ptr):
        _format_ptr(t, value, ignore_type, out)
        return
    if not ignore_type:
        out.append(f"({type_string(t)})")
    if isinstance(t, Scalar):
        out.append(_format_scalar(t, value))
    elif isinstance(t, Slice):
        _format_slice(t, value, out)
    elif isinstance(t, Map):
        _format_map(t, value, out)
    else:
        _format_struct(t, value, out)


def _format_ptr(t: Ptr, value: Any, ignore_type: bool, out: list[str]) -> None:
    if isinstance(t.elem, Ptr):
        # Checkpoints never hold pointers to pointers; refusing beats printing a wrong count.
        raise TypeError("gospew: pointer-to-pointer types are not supported")
    if value is None:
        out.append("<nil>" if ignore_type else f"({type_string(t)})<nil>")
        return
    out.append("<*>" if ignore_type else f"(*{type_string(t.elem)})")
    _format(t.elem, value, True, out)


def _format_slice(t: Slice, value: Sequence[Any] | bytes | None, out: list[str]) -> None:
    if value is None:
        out.append("<nil>")
        return
    out.append("[")
    for i, item in enumerate(value):
        if i:
            out.append(" ")
        _format(t.elem, item, True, out)
    out.append("]")


def _format_map(t: Map, value: Mapping[Any, Any] | None, out: list[str]) -> None:
    if value is None:
        out.append("<nil>")
        return
    out.append("map[")
    keys = sorted(value, key=lambda k: key_sort_key(t.key, k))
    for i, key in enumerate(keys):
        if i:
            out.append(" ")
        out.append(_format_scalar(t.key, key))
        out.append(":")
        _format(t.elem, value[key], True, out)
    out.append("]")


def _format_struct(t: Struct, value: Mapping[str, Any], out: list[str]) -> None:
    out.append("{")
    for i, f in enumerate(t.fields):
        if i:
            out.append(" ")
        out.append(f.name)
        out.append(":")
        _format(f.type, value[f.name], False, out)
    out.append("}")
