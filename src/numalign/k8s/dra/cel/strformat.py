"""`<string>.format(<list>)` of cel-go's strings extension at version 2 (the base environment's
ext.Strings(StringsVersion(2)) in every DRA release, cel-go 0.23-0.29, which format alike): the clauses
%s %d %f %e %b %x %X %o and %%, a precision `.N` on any clause, the errors' texts, and the validator that
checks a constant format string against a literal argument list when the expression is compiled.

Two formatters stand behind the clauses: Go's fmt for %d %b %x %X %o and for the doubles inside a list
or a map (%.6f), and golang.org/x/text's message printer in the en_US locale for %f and %e, which groups
thousands (1,234.500000), writes an exponent as ×10 and superscript digits (2.718280×10⁰⁰), and keeps
cel-go's quirks: %e takes the precision as a field width (%.3e pads to 3 and shows 6 decimals) and
%f's precision is held in 8 bits as the minimum and in 16 bits as the maximum of fraction digits. Every
output is bounded by the format string (a precision over a million is fmt's %!(NOVERB)); formatting is
charged a tenth of the format string's length, as cel-go charges it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from numalign.k8s.dra.cel import library as lib
from numalign.k8s.dra.cel import netip
from numalign.k8s.dra.cel import types as t
from numalign.k8s.dra.cel.ast import Expr
from numalign.k8s.dra.cel.values import (
    INT64_MAX,
    CelError,
    CostLimitExceededError,
    Duration,
    Timestamp,
    TypeValue,
    type_name,
)

_NO_VERB: Final = "%!(NOVERB)"  # what fmt prints when a width or precision does not parse
_SUPERSCRIPT: Final = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_STRING_CLAUSE: Final = ("string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
                         "types, durations, and timestamps, was given ")


class FormatError(Exception):
    """A clause refused its argument: the message, and the expression the validator reports it at (None:
    the call)."""

    def __init__(self, message: str, expr_id: int | None = None) -> None:
        super().__init__(message)
        self.expr_id = expr_id


# ---- the clause parser, shared by the runtime and the validator ------------------------------------


Clause = Callable[[str, int | None, int], str]  # (verb, precision, argument index) -> text


def _interpolate(fmt: str, count: int, clause: Clause, runtime: bool) -> tuple[str, int]:
    """parseFormatString: the text with each clause's substitution, and how many arguments were asked
    for. Errors come in cel-go's order per clause: the argument (at run time only), the end of the
    string, the argument count, the clause's syntax, then the clause's own check."""
    out: list[str] = []
    i = arg = total = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        if i + 1 < len(fmt) and fmt[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        if runtime and arg >= count:
            raise FormatError(f"index {arg} out of range")
        if i + 1 >= len(fmt):
            raise FormatError("unexpected end of string")
        if arg >= count:
            raise FormatError(f"index {arg} out of range")
        j = i + 1
        precision: int | None = None
        if fmt[j] == ".":
            j += 1
            start = j
            while True:
                if j >= len(fmt):
                    raise FormatError("could not parse formatting clause: error while parsing precision: "
                                      "could not find end of precision specifier")
                if not "0" <= fmt[j] <= "9":
                    break
                j += 1
            digits = fmt[start:j]
            if not digits or lib.decimal_value(digits) > INT64_MAX:
                reason = "invalid syntax" if not digits else "value out of range"
                raise FormatError("could not parse formatting clause: error while parsing precision: error "
                                  f"while converting precision to integer: strconv.Atoi: parsing "
                                  f"{lib.go_quote(digits)}: {reason}")
            precision = lib.decimal_value(digits)
        verb = fmt[j]
        if verb not in "sdfebxXo":
            # Go reads the clause's byte: a character beyond ASCII shows as its first UTF-8 byte's rune
            shown = chr(verb.encode("utf-8", "surrogatepass")[0])
            raise FormatError(f'could not parse formatting clause: unrecognized formatting clause "{shown}"')
        try:
            piece = clause(verb, precision, arg)
        except FormatError as exc:
            raise FormatError(f"error during formatting: {exc}", exc.expr_id) from None
        out.append(piece)
        total += len(piece)
        if total > lib.MAX_STRING:
            # as for replace(): a result past 64 Mi code points stops (cel-go would build it: a format
            # string of a million clauses of 65,535 characters each)
            raise CostLimitExceededError("operation cancelled: actual cost limit exceeded")
        i = j + 1
        arg += 1
    return "".join(out), arg


# ---- run time ----------------------------------------------------------------------------------------


def format_call(fmt: Any, args: Any) -> str:
    """The function at run time; a refused clause is the CEL error with cel-go's text."""
    if not isinstance(fmt, str) or not isinstance(args, list):
        raise CelError("no such overload")

    def clause(verb: str, precision: int | None, index: int) -> str:
        return _substitute(verb, precision, args[index])
    try:
        return _interpolate(fmt, len(args), clause, runtime=True)[0]
    except FormatError as exc:
        raise CelError(str(exc)) from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _substitute(verb: str, precision: int | None, v: Any) -> str:
    if verb == "s":
        return _as_string(v)
    if verb == "d":
        if not _is_int(v):
            raise FormatError(f"decimal clause can only be used on integers, was given {type_name(v)}")
        return str(int(v))
    if verb in "fe":
        if not (isinstance(v, float) or v in ("NaN", "Infinity", "-Infinity")):
            kind = "fixed-point" if verb == "f" else "scientific"
            raise FormatError(f"{kind} clause can only be used on doubles, was given {type_name(v)}")
        x = float(v)
        return _fixed(x, 6 if precision is None else precision) if verb == "f" else _scientific(x, precision)
    if verb == "b":
        if isinstance(v, bool):
            return "1" if v else "0"
        if not _is_int(v):
            raise FormatError(f"only integers and bools can be formatted as binary, was given {type_name(v)}")
        return format(int(v), "b")
    if verb in "xX":
        if isinstance(v, (str, bytes)):
            data = v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v
            text = data.hex()
        elif _is_int(v):
            text = format(int(v), "x")
        else:
            raise FormatError("only integers, byte buffers, and strings can be formatted as hex, was given "
                              f"{type_name(v)}")
        return text.upper() if verb == "X" else text
    if not _is_int(v):  # o
        raise FormatError(f"octal clause can only be used on integers, was given {type_name(v)}")
    return format(int(v), "o")


def _scalar_text(v: Any) -> str | None:
    """ConvertToType(StringType) of a scalar (None: not a scalar %s takes); a bytes value that is not
    UTF-8 fails as FormatString words it."""
    if isinstance(v, (bool, int, float, str, Timestamp, Duration)):
        return lib.to_string(v)
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError('could not convert argument "invalid UTF-8 in bytes, cannot convert to string" '
                              "to string") from None
    if isinstance(v, TypeValue):
        return v.name
    if v is None:
        return "null"
    return None


def _as_string(v: Any) -> str:
    """FormatString: the %s of a value (a list or a map as a CEL literal)."""
    if isinstance(v, list):
        return _list_text(v)
    if isinstance(v, dict):
        return _map_text(v)
    text = _scalar_text(v)
    if text is None:
        raise FormatError(_STRING_CLAUSE + type_name(v))
    return text


def _member_text(v: Any) -> str:
    """An element of a list or a value of a map (clauseForType, then quoteForCEL): strings and bytes
    quoted, doubles as Go's %.6f (not the locale's), timestamps and durations as their literals."""
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return netip.go_strconv_quote("NaN" if math.isnan(v) else "+Inf" if v > 0 else "-Inf")
        return f"{v:.6f}"
    if isinstance(v, Timestamp):
        return f"timestamp({netip.go_strconv_quote(lib.timestamp_text(v.nanos, v.offset))})"
    if isinstance(v, Duration):
        return f"duration({netip.go_strconv_quote(lib.duration_text(v.nanos))})"
    if isinstance(v, (list, dict)):
        return _as_string(v)
    text = _scalar_text(v)
    if text is None:
        raise FormatError(f"no formatting function for {type_name(v)}")
    if isinstance(v, str):
        return netip.go_strconv_quote(text)
    if isinstance(v, bytes):
        return "b" + netip.go_strconv_quote(text)
    return text


def _list_text(items: list[Any]) -> str:
    return "[" + ", ".join(_member_text(x) for x in items) + "]"


def _map_text(m: dict[Any, Any]) -> str:
    """formatMap: each key (a string or a bool as %s, an integer as %d) and value quoted for CEL, in the
    order of the quoted keys (cel-go sorts them: Go walks a map in no fixed order)."""
    pairs = []
    for key, value in m.items():
        if isinstance(key, (str, bool)):
            key_text = _as_string(key)
        elif _is_int(key):
            key_text = str(int(key))
        else:
            raise FormatError(f"no formatting function for map key of type {type_name(key)}")
        if isinstance(key, str):
            key_text = netip.go_strconv_quote(key_text)
        pairs.append((key_text, _member_text(value)))
    pairs.sort(key=lambda p: p[0].encode("utf-8", "surrogatepass"))
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


# ---- golang.org/x/text/message in en_US: %f and %e ------------------------------------------------


def _digits(text: str) -> tuple[str, int]:
    """A non-negative decimal number's significant digits and the position of its point (x/text's
    Decimal after normalize: no leading or trailing zeros; no digits and position 0 for zero)."""
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    point = len(whole) + (int(exp) if exp else 0)
    digits = whole + frac
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    return (digits, point) if digits else ("", 0)


def _grouped(integer: str) -> str:
    """The en pattern's grouping: a comma every three integer digits."""
    head = len(integer) % 3 or 3
    return ",".join([integer[:head]] + [integer[i:i + 3] for i in range(head, len(integer), 3)])


def _fixed(x: float, precision: int) -> str:
    """message.Printer(en_US).Sprintf("%.<precision>f", x)."""
    if precision // 10 > 1_000_000:  # fmt's parser stops at a number past a million: no verb
        return _NO_VERB
    if math.isnan(x):
        return "NaN"
    negative = x < 0  # -0.0 shows no sign
    if math.isinf(x):
        return "-∞" if negative else "∞"
    min_frac = precision & 0xFF  # a uint8 field
    max_frac = ((precision + 0x8000) & 0xFFFF) - 0x8000  # an int16 field
    digits, point = _digits(f"{abs(x):.{max_frac}f}" if max_frac >= 0 else repr(abs(x)))
    end = len(digits)
    if end == 0:
        point = 0
        end = min_frac
    else:
        end = max(end, point + min_frac)
    integer = digits[:point].ljust(point, "0") if point > 0 else "0"
    fraction = ("0" * -point + digits if point < 0 else digits[point:]).ljust(end - point, "0")
    return ("-" if negative else "") + _grouped(integer) + ("." + fraction if end - point > 0 else "")


def _scientific(x: float, precision: int | None) -> str:
    """message.Printer(en_US).Sprintf("%<precision>e", x): cel-go writes the precision where fmt reads a
    width, so six decimals always, padded with spaces to the width (a precision of 0 is fmt's zero flag,
    no width)."""
    width = 6 if precision is None else precision
    if width // 10 > 1_000_000:
        return _NO_VERB
    if math.isnan(x):
        body = "NaN"
    elif math.isinf(x):
        body = "-∞" if x < 0 else "∞"
    else:
        mantissa, _, exp = f"{abs(x):.6e}".partition("e")
        exponent = int(exp)
        shown = "".join(_SUPERSCRIPT[int(d)] for d in f"{abs(exponent):02d}")
        body = ("-" if x < 0 else "") + mantissa + "×10" + ("⁻" if exponent < 0 else "") + shown
    if width == 0:
        return body
    return body.rjust(width & 0xFFFF)  # a uint16 field


# ---- the validator -----------------------------------------------------------------------------------


_STRING_KINDS: Final = frozenset({"list", "map", "int", "uint", "double", "bool", "string", "bytes", "type", "null"})
_CLAUSE_KINDS: Final = {"d": frozenset({"int", "uint"}), "f": frozenset({"double", "string"}),
                        "e": frozenset({"double", "string"}), "b": frozenset({"int", "uint", "bool"}),
                        "x": frozenset({"int", "uint", "string", "bytes"}),
                        "X": frozenset({"int", "uint", "string", "bytes"}), "o": frozenset({"int", "uint"})}
_CLAUSE_NAMES: Final = {"d": "decimal clause can only be used on integers",
                        "f": "fixed-point clause can only be used on doubles",
                        "e": "scientific clause can only be used on doubles",
                        "b": "only integers and bools can be formatted as binary",
                        "x": "only integers, byte buffers, and strings can be formatted as hex",
                        "X": "only integers, byte buffers, and strings can be formatted as hex",
                        "o": "octal clause can only be used on integers"}
_TEMPORAL: Final = frozenset({"google.protobuf.Timestamp", "google.protobuf.Duration"})


def _kind(ty: t.Type) -> str:
    """The checked type's kind as cel-go's Kind() groups them (dyn alone passes every clause)."""
    if ty.kind == "struct" and ty.name in _TEMPORAL:
        return "temporal"
    return ty.kind


def _type_name(ty: t.Type) -> str:
    """*types.Type TypeName(): the runtime type's name, without parameters."""
    names = {"null": "null_type", "any": "google.protobuf.Any", "error": "*error*"}
    if ty.kind in names:
        return names[ty.kind]
    return ty.name if ty.kind in ("opaque", "struct", "param") else ty.kind


def check_format_call(call: Expr, types: dict[int, t.Type]) -> tuple[int, str] | None:
    """stringFormatValidator on one `"<constant>".format([<literal list>])`: the first problem, as (the
    expression it is reported at, the message), or None."""
    assert call.operand is not None
    elements = call.args[0].args

    def type_of(e: Expr) -> t.Type:
        return types.get(e.id, t.DYN)

    def string_ok(e: Expr) -> int | None:
        """verifyString: the expression whose type %s refuses, looking into list and map literals."""
        ty = type_of(e)
        if ty.kind != "dyn" and _kind(ty) not in _STRING_KINDS and _kind(ty) != "temporal":
            return e.id
        children = e.args if e.kind == "list" else [x for k, v, _ in e.entries for x in (k, v)]
        for child in children:
            bad = string_ok(child)
            if bad is not None:
                return bad
        return None

    def clause(verb: str, precision: int | None, index: int) -> str:
        arg = elements[index]
        if verb == "s":
            bad = string_ok(arg)
            if bad is not None:
                raise FormatError(_STRING_CLAUSE + _type_name(types.get(bad, t.DYN)), bad)
            return ""
        ty = type_of(arg)
        if ty.kind != "dyn" and _kind(ty) not in _CLAUSE_KINDS[verb]:
            raise FormatError(f"{_CLAUSE_NAMES[verb]}, was given {_type_name(ty)}", arg.id)
        return ""
    try:
        _, requested = _interpolate(str(call.operand.value), len(elements), clause, runtime=False)
    except FormatError as exc:
        return (call.id if exc.expr_id is None else exc.expr_id, str(exc))
    if len(elements) > requested:
        return call.id, f"too many arguments supplied to string.format (expected {requested}, got {len(elements)})"
    return None


def is_checked_format_call(e: Expr, function: str) -> bool:
    """matchConstantFormatStringWithListLiteralArgs: a member format() on a string literal with one list
    literal argument."""
    return (e.kind == "call" and function == "format" and e.operand is not None and e.operand.kind == "lit"
            and e.operand.lit_kind == "string" and len(e.args) == 1 and e.args[0].kind == "list")


__all__ = ["FormatError", "check_format_call", "format_call", "is_checked_format_call"]

