"""Go encoding/json, as the kubelet's checkpoints use it, over the GoType descriptors of gospew.

Why not plain `json`: the checksum is computed over the *Go value* that json.Unmarshal produced, so
decoding must reproduce Go's rules exactly where they change that value:

* `null` makes a map, slice or pointer nil (spew prints `<nil>`, not `map[]`/`[]`), and is a no-op
  for strings, numbers and structs;
* an absent key leaves the field as it was (the kubelet pre-initializes some maps to empty);
* keys match struct fields by exact JSON name first, then case-insensitively (so `defaultCPUSet`
  fills `defaultCpuSet`); unknown keys are ignored; a repeated key: the last one wins;
* map elements are decoded into fresh zero values; `[]byte` is base64 text;
* integers must be integer literals within the Go type's range.

Encoding mirrors json.Marshal: struct fields in declaration order, map keys sorted by their string
form (so int keys order as "-1" < "0" < "10" < "2"), `omitempty`, nil as `null`, `<`, `>`, `&`,
U+2028 and U+2029 escaped, and no whitespace.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from numalign.kubelet.checkpointmanager.errors import CheckpointDecodeError
from numalign.kubelet.checkpointmanager.gospew import (
    GoType,
    Map,
    Ptr,
    Scalar,
    Slice,
    Struct,
    is_bytes,
    type_string,
    zero_value,
)


class _Object(list[tuple[str, Any]]):
    """A JSON object as its ordered (key, value) pairs, duplicates kept (Go applies each in turn)."""


class _IntLiteral(int):
    """An integer that remembers its JSON spelling: Go's ParseUint rejects "-0", ParseInt takes it."""

    text: str

    def __new__(cls, text: str) -> _IntLiteral:
        value = super().__new__(cls, int(text))
        value.text = text
        return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON literal {name}")


def parse_json(data: bytes) -> Any:
    """Parse JSON bytes; objects become _Object pair lists. Invalid UTF-8 becomes U+FFFD as in Go."""
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(
            text, object_pairs_hook=_Object, parse_constant=_reject_constant, parse_int=_IntLiteral
        )
    except json.JSONDecodeError as e:
        # Python names the open string or the missing value; Go calls any cut-short input this.
        if e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string"):
            raise CheckpointDecodeError(
                "unexpected end of JSON input (the file is empty or was cut short)"
            ) from e
        raise CheckpointDecodeError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    except (ValueError, RecursionError) as e:
        raise CheckpointDecodeError(f"invalid JSON: {e}") from e


def from_python(doc: Any) -> Any:
    """A JSON-shaped Python value (dicts, lists, str, int, bool, None; bytes for []byte fields) as
    parse_json would have returned it, so documents built in Python go through the same checks."""
    if isinstance(doc, Mapping):
        return _Object((str(k), from_python(v)) for k, v in doc.items())
    if isinstance(doc, list | tuple):
        return [from_python(v) for v in doc]
    if isinstance(doc, bytes | bytearray):
        return base64.b64encode(bytes(doc)).decode("ascii")
    return doc  # floats stay floats: integer fields reject them, as Go rejects 1.0


def is_object(j: Any) -> bool:
    return isinstance(j, _Object)


def object_pairs(j: Any) -> list[tuple[str, Any]]:
    return list(j) if isinstance(j, _Object) else []


def object_of(pairs: list[tuple[str, Any]]) -> Any:
    """A parsed JSON object with these (key, value) pairs, as parse_json returns objects."""
    return _Object(pairs)


def _json_kind(j: Any) -> str:
    if isinstance(j, _Object):
        return "object"
    if isinstance(j, list):
        return "array"
    if isinstance(j, bool):
        return "bool"
    if isinstance(j, _IntLiteral):
        return f"number {j.text}"
    if isinstance(j, int | float):
        return f"number {j}"
    return "string"


def _type_error(j: Any, t: GoType, path: str) -> CheckpointDecodeError:
    return CheckpointDecodeError(f"cannot unmarshal {_json_kind(j)} into {path} of type {type_string(t)}")


def _fix_surrogates(s: str) -> str:
    # Go decodes an unpaired \\uD800-style escape to U+FFFD; Python keeps a lone surrogate.
    if any("\ud800" <= ch <= "\udfff" for ch in s):
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return s


def _int_in_range(t: Scalar, v: int) -> bool:
    if t.kind == "uint":
        return 0 <= v < (1 << t.bits)
    return -(1 << (t.bits - 1)) <= v < (1 << (t.bits - 1))


def _decode_scalar(t: Scalar, j: Any, path: str) -> Any:
    if t.kind == "string":
        if not isinstance(j, str):
            raise _type_error(j, t, path)
        return _fix_surrogates(j)
    if t.kind == "bool":
        if not isinstance(j, bool):
            raise _type_error(j, t, path)
        return j
    if isinstance(j, bool) or not isinstance(j, int) or not _int_in_range(t, j):
        raise _type_error(j, t, path)
    if t.kind == "uint" and isinstance(j, _IntLiteral) and j.text.startswith("-"):
        raise _type_error(j, t, path)  # "-0"
    return int(j)


def _decode_map_key(t: Scalar, key: str, path: str) -> Any:
    if t.kind == "string":
        return _fix_surrogates(key)
    try:
        v = int(key, 10)
    except ValueError:
        v = None
    # strconv.ParseInt: optional sign then digits only (no spaces, no underscores).
    if v is None or not key.lstrip("+-").isdigit() or not key.isascii() or not _int_in_range(t, v):
        raise CheckpointDecodeError(f"cannot unmarshal object key {key!r} into {path} of type {type_string(t)}")
    return v


def _find_field(t: Struct, key: str) -> str | None:
    for f in t.fields:
        if f.json_name == key:
            return f.name
    folded = key.casefold()
    for f in t.fields:
        if f.json_name.casefold() == folded:
            return f.name
    return None


def decode(t: GoType, j: Any, current: Any, path: str) -> Any:
    """json.Unmarshal of the parsed value `j` into a Go value of type `t` that holds `current`."""
    if j is None:
        return None if isinstance(t, Ptr | Map | Slice) else current
    if isinstance(t, Scalar):
        return _decode_scalar(t, j, path)
    if isinstance(t, Ptr):
        start = current if current is not None else zero_value(t.elem)
        return decode(t.elem, j, start, path)
    if isinstance(t, Slice):
        if is_bytes(t):
            if not isinstance(j, str):
                raise _type_error(j, t, path)
            try:
                return base64.b64decode(j.replace("\r", "").replace("\n", ""), validate=True)
            except (binascii.Error, ValueError) as e:
                raise CheckpointDecodeError(f"{path}: invalid base64 data: {e}") from e
        if not isinstance(j, list) or isinstance(j, _Object):
            raise _type_error(j, t, path)
        return [decode(t.elem, x, zero_value(t.elem), f"{path}[{i}]") for i, x in enumerate(j)]
    if not isinstance(j, _Object):
        raise _type_error(j, t, path)
    if isinstance(t, Map):
        out = dict(current) if current is not None else {}
        for key, x in j:
            out[_decode_map_key(t.key, key, path)] = decode(t.elem, x, zero_value(t.elem), f"{path}[{key}]")
        return out
    value = dict(current)
    for key, x in j:
        name = _find_field(t, key)
        if name is None:
            continue  # Go ignores unknown fields
        ftype = next(f.type for f in t.fields if f.name == name)
        value[name] = decode(ftype, x, value[name], f"{path}.{name}")
    return value


_HTML_SAFE = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def quote(s: str) -> str:
    """A JSON string exactly as Go's encoder writes it (HTML-safe escaping on, Go >= 1.22)."""
    out = json.dumps(s, ensure_ascii=False)
    for raw, esc in _HTML_SAFE:
        out = out.replace(raw, esc)
    return out


def _is_empty(t: GoType, v: Any) -> bool:
    if v is None:
        return True
    if isinstance(t, Scalar):
        return not v
    if isinstance(t, Slice | Map):
        return len(v) == 0
    return False


def _map_key_text(t: Scalar, key: Any) -> str:
    return str(key) if t.kind == "string" else str(int(key))


def encode(t: GoType, v: Any) -> str:
    """json.Marshal of a Go value of type `t`."""
    if isinstance(t, Scalar):
        if t.kind == "string":
            return quote(str(v))
        if t.kind == "bool":
            return "true" if v else "false"
        return str(int(v))
    if isinstance(t, Ptr):
        return "null" if v is None else encode(t.elem, v)
    if isinstance(t, Slice):
        if v is None:
            return "null"
        if is_bytes(t):
            return quote(base64.b64encode(bytes(v)).decode("ascii"))
        return "[" + ",".join(encode(t.elem, x) for x in v) + "]"
    if isinstance(t, Map):
        if v is None:
            return "null"
        items = sorted(((_map_key_text(t.key, k), x) for k, x in _as_mapping(v).items()), key=lambda kv: kv[0])
        return "{" + ",".join(quote(k) + ":" + encode(t.elem, x) for k, x in items) + "}"
    parts = []
    for f in t.fields:
        fv = v[f.name]
        if f.omitempty and _is_empty(f.type, fv):
            continue
        parts.append(quote(f.json_name) + ":" + encode(f.type, fv))
    return "{" + ",".join(parts) + "}"


def _as_mapping(v: Any) -> Mapping[Any, Any]:
    if not isinstance(v, Mapping):
        raise TypeError(f"gojson: expected a mapping, got {type(v).__name__}")
    return v
