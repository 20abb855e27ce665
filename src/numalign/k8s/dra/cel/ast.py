"""The parsed expression: cel-cpp's parser (the same ANTLR grammar and macro expansion as cel-go, so
the same syntax errors, ids and positions) gives a `cel.expr.ParsedExpr`; this module reads its
protobuf wire form into small Python nodes. Reading the wire form directly keeps numalign free of the
cel.expr protobuf descriptors; the field numbers are those of cel/expr/syntax.proto."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

# Literal kinds (Constant's oneof).
NULL, BOOL, INT, UINT, DOUBLE, STRING, BYTES = "null", "bool", "int", "uint", "double", "string", "bytes"


@dataclass(eq=False)
class Expr:
    id: int
    kind: str  # lit | ident | select | call | list | map | struct | comp
    # lit
    lit_kind: str = ""
    value: Any = None
    # ident / select field / call function / struct message
    name: str = ""
    operand: Expr | None = None  # select operand / call target
    test_only: bool = False
    args: list[Expr] = field(default_factory=list)  # call args / list elements
    optional_indices: frozenset[int] = frozenset()
    entries: list[tuple[Expr, Expr, bool]] = field(default_factory=list)  # map entries (key, value, optional)
    # comprehension
    iter_var: str = ""
    iter_var2: str = ""
    accu_var: str = ""
    iter_range: Expr | None = None
    accu_init: Expr | None = None
    loop_cond: Expr | None = None
    loop_step: Expr | None = None
    result: Expr | None = None


@dataclass
class Parsed:
    expr: Expr
    positions: dict[int, int]  # expression id -> offset in code points
    line_offsets: list[int]


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message; nested messages stay bytes."""
    out: list[tuple[int, int, Any]] = []
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value = buf[i:i + 8]
            i += 8
        elif wire == 2:
            length, i = _varint(buf, i)
            value = buf[i:i + length]
            i += length
        elif wire == 5:
            value = buf[i:i + 4]
            i += 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        out.append((number, wire, value))
    return out


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogatepass")


def _constant(buf: bytes, e: Expr) -> None:
    e.kind = "lit"
    e.lit_kind, e.value = NULL, None
    for number, _, v in _fields(buf):
        if number == 1:
            e.lit_kind, e.value = NULL, None
        elif number == 2:
            e.lit_kind, e.value = BOOL, bool(v)
        elif number == 3:
            e.lit_kind, e.value = INT, _signed(v)
        elif number == 4:
            e.lit_kind, e.value = UINT, v
        elif number == 5:
            e.lit_kind, e.value = DOUBLE, struct.unpack("<d", v)[0]
        elif number == 6:
            e.lit_kind, e.value = STRING, _text(v)
        elif number == 7:
            e.lit_kind, e.value = BYTES, bytes(v)


def read_expr(buf: bytes) -> Expr:
    e = Expr(0, "")
    for number, _, v in _fields(buf):
        if number == 2:
            e.id = v
        elif number == 3:
            _constant(v, e)
        elif number == 4:
            e.kind = "ident"
            e.name = next((_text(x) for n, _, x in _fields(v) if n == 1), "")
        elif number == 5:
            e.kind = "select"
            for n, _, x in _fields(v):
                if n == 1:
                    e.operand = read_expr(x)
                elif n == 2:
                    e.name = _text(x)
                elif n == 3:
                    e.test_only = bool(x)
        elif number == 6:
            e.kind = "call"
            for n, _, x in _fields(v):
                if n == 1:
                    e.operand = read_expr(x)
                elif n == 2:
                    e.name = _text(x)
                elif n == 3:
                    e.args.append(read_expr(x))
        elif number == 7:
            e.kind = "list"
            optional: set[int] = set()
            for n, w, x in _fields(v):
                if n == 1:
                    e.args.append(read_expr(x))
                elif n == 2:
                    if w == 2:  # packed
                        j = 0
                        while j < len(x):
                            k, j = _varint(x, j)
                            optional.add(k)
                    else:
                        optional.add(x)
            e.optional_indices = frozenset(optional)
        elif number == 8:
            e.kind = "map"
            for n, _, x in _fields(v):
                if n == 1:
                    e.kind, e.name = "struct", _text(x)
                elif n == 2:
                    key: Expr | None = None
                    value: Expr | None = None
                    optional_entry = False
                    for m, _, y in _fields(x):
                        if m == 2:
                            key = Expr(0, "lit", lit_kind=STRING, value=_text(y))
                        elif m == 3:
                            key = read_expr(y)
                        elif m == 4:
                            value = read_expr(y)
                        elif m == 5:
                            optional_entry = bool(y)
                    assert key is not None and value is not None
                    e.entries.append((key, value, optional_entry))
        elif number == 9:
            e.kind = "comp"
            for n, _, x in _fields(v):
                if n == 1:
                    e.iter_var = _text(x)
                elif n == 2:
                    e.iter_range = read_expr(x)
                elif n == 3:
                    e.accu_var = _text(x)
                elif n == 4:
                    e.accu_init = read_expr(x)
                elif n == 5:
                    e.loop_cond = read_expr(x)
                elif n == 6:
                    e.loop_step = read_expr(x)
                elif n == 7:
                    e.result = read_expr(x)
                elif n == 8:
                    e.iter_var2 = _text(x)
    if not e.kind:
        e.kind = "lit"  # an unset expression: cel-cpp leaves none in a successful parse
    return e


def read_parsed(any_bytes: bytes) -> Parsed:
    """`Expression.serialize()` of cel-expr-python: a google.protobuf.Any holding a ParsedExpr."""
    payload = next((v for n, _, v in _fields(any_bytes) if n == 2), b"")
    expr: Expr | None = None
    positions: dict[int, int] = {}
    line_offsets: list[int] = []
    for number, _, v in _fields(payload):
        if number == 2:
            expr = read_expr(v)
        elif number == 3:
            for n, w, x in _fields(v):
                if n == 3:
                    if w == 2:
                        j = 0
                        while j < len(x):
                            k, j = _varint(x, j)
                            line_offsets.append(k)
                    else:
                        line_offsets.append(x)
                elif n == 4:
                    key = val = 0
                    for m, _, y in _fields(x):
                        if m == 1:
                            key = y
                        elif m == 2:
                            val = _signed(y) if y >= 1 << 31 else y
                    positions[key] = val
    if expr is None:
        raise ValueError("the parser returned no expression")
    return Parsed(expr, positions, line_offsets)
