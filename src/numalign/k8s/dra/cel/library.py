"""The functions behind the declarations, with cel-go's and the Kubernetes libraries' semantics and
error texts: strings in code points, Go's integer overflow and division rules, RE2 regular expressions
(linear time: no selector can backtrack), semver and quantity as k8s.io/apiserver's libraries."""

from __future__ import annotations

import functools
import ipaddress
import itertools
import math
from collections.abc import Callable
from typing import Any, Final

import re2

from numalign.k8s.dra.cel import gourl
from numalign.k8s.dra.cel.netip import NetipError, go_strconv_quote, parse_netip_addr
from numalign.k8s.dra.cel.values import (
    INT64_MAX,
    INT64_MIN,
    NO_SUCH_OVERLOAD,
    UINT64_MAX,
    CelError,
    CostLimitExceededError,
    Duration,
    Opaque,
    Optional,
    Timestamp,
    TypeValue,
    UInt,
    equal,
    type_name,
)
from numalign.k8s.dra.cel.zones import load_location
from numalign.k8s.dra.semver import Semver, SemverError, parse_semver
from numalign.k8s.quantity import Quantity

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_REGEX_CACHE: dict[str, Any] = {}
# RE2's error codes -> Go regexp's wording (cel-go and the Kubernetes regex library compile with Go).
_GO_REGEX_ERRORS: Final = {
    "missing ]": "missing closing ]", "missing )": "missing closing )", "unexpected )": "unexpected )",
    "bad repetition operator": "invalid nested repetition operator", "missing argument to repetition operator":
    "missing argument to repetition operator", "invalid escape sequence": "invalid escape sequence",
    "invalid character class range": "invalid character class range", "invalid character class":
    "invalid character class", "invalid repetition size": "invalid repeat count",
    "bad named capture group": "invalid named capture", "invalid named capture group": "invalid named capture",
    "trailing \\": "trailing backslash at end of expression",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
}


def _go_refused_escape(pattern: str) -> str | None:
    """An escape RE2 takes and Go's regexp refuses: \\C (any byte), outside \\Q...\\E."""
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] == "\\":
            if pattern[i + 1] == "Q":  # quoted up to \\E: nothing inside is an escape
                end = pattern.find("\\E", i + 2)
                if end < 0:
                    return None
                i = end + 2
                continue
            if pattern[i + 1] == "C":
                return "error parsing regexp: invalid escape sequence: `\\C`"
            i += 2
            continue
        i += 1
    return None


def regex(pattern: str) -> Any:
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is None:
        refused = _go_refused_escape(pattern)
        if refused is not None:
            raise CelError(refused)
        try:
            compiled = re2.compile(pattern, options=_RE2_OPTIONS)  # type: ignore[no-untyped-call]
        except re2.error as exc:
            raise CelError(go_regex_error(exc, pattern)) from None
        if len(_REGEX_CACHE) > 1024:
            _REGEX_CACHE.clear()
        _REGEX_CACHE[pattern] = compiled
    return compiled


def go_regex_error(exc: Exception, pattern: str) -> str:
    raw = exc.args[0] if exc.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    code, _, arg = text.partition(": ")
    word = _GO_REGEX_ERRORS.get(code, code)
    return f"error parsing regexp: {word}: `{arg or pattern}`"


def _int(v: int) -> int:
    if v < INT64_MIN or v > INT64_MAX:
        raise CelError("integer overflow")
    return v


def _uint(v: int) -> UInt:
    if v < 0 or v > UINT64_MAX:
        raise CelError("unsigned integer overflow")
    return UInt(v)


def _go_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _go_mod(a: int, b: int) -> int:
    return a - b * _go_div(a, b)


def _num_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, UInt):
        return "uint"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    return type_name(v)


def add(a: Any, b: Any) -> Any:
    ka, kb = _num_kind(a), _num_kind(b)
    if ka != kb:
        if ka == "google.protobuf.Timestamp" and kb == "google.protobuf.Duration":
            return _timestamp_in_range(a.nanos + b.nanos, a.offset)
        if kb == "google.protobuf.Timestamp" and ka == "google.protobuf.Duration":
            return _timestamp_in_range(a.nanos + b.nanos, b.offset)
        raise CelError(NO_SUCH_OVERLOAD)
    if ka == "int":
        return _int(a + b)
    if ka == "uint":
        return _uint(a + b)
    if ka in ("double", "string", "bytes", "list"):
        return a + b
    if ka == "google.protobuf.Duration":
        return Duration(_int(a.nanos + b.nanos))
    raise CelError(NO_SUCH_OVERLOAD)


def arith(op: str, a: Any, b: Any) -> Any:
    ka, kb = _num_kind(a), _num_kind(b)
    if op == "_-_" and ka == kb == "google.protobuf.Timestamp":
        # subtractTimeChecked: the seconds scaled to nanoseconds must fit before the nanoseconds are added
        seconds = a.nanos // 1_000_000_000 - b.nanos // 1_000_000_000
        _int(seconds * 1_000_000_000)
        return Duration(_int(a.nanos - b.nanos))
    if op == "_-_" and ka == "google.protobuf.Timestamp" and kb == "google.protobuf.Duration":
        # subtractTimeDurationChecked negates the duration first: -(-2^63) overflows
        return _timestamp_in_range(a.nanos + _int(-b.nanos), a.offset)
    if op == "_-_" and ka == kb == "google.protobuf.Duration":
        return Duration(_int(a.nanos - b.nanos))
    if ka != kb or ka not in ("int", "uint", "double"):
        raise CelError(NO_SUCH_OVERLOAD)
    if ka == "double":
        if op == "_-_":
            return a - b
        if op == "_*_":
            return a * b
        if op == "_/_":
            if b == 0:
                return math.copysign(math.inf, a) * math.copysign(1, b) if a != 0 else math.nan
            return a / b
        raise CelError(NO_SUCH_OVERLOAD)
    wrap = _int if ka == "int" else _uint
    if op == "_-_":
        return wrap(a - b)
    if op == "_*_":
        return wrap(a * b)
    if op == "_/_":
        if b == 0:
            raise CelError("division by zero")
        return wrap(_go_div(a, b))
    if op == "_%_":
        if b == 0:
            raise CelError("modulus by zero")
        if ka == "int" and a == INT64_MIN and b == -1:
            raise CelError("integer overflow")
        return wrap(_go_mod(a, b))
    raise CelError(NO_SUCH_OVERLOAD)


def negate(a: Any) -> Any:
    k = _num_kind(a)
    if k == "int":
        return _int(-a)
    if k == "double":
        return -a
    raise CelError(NO_SUCH_OVERLOAD)


def compare(a: Any, b: Any) -> int:
    ka, kb = _num_kind(a), _num_kind(b)
    if ka in ("int", "uint", "double") and kb in ("int", "uint", "double"):
        if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
            raise CelError(NO_SUCH_OVERLOAD)
        return int((a > b) - (a < b))
    if ka != kb:
        raise CelError(NO_SUCH_OVERLOAD)
    if ka in ("bool", "string", "bytes"):
        if ka == "string":
            x, y = a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass")
            return int((x > y) - (x < y))
        return int((a > b) - (a < b))
    if ka in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        return int((a.nanos > b.nanos) - (a.nanos < b.nanos))
    raise CelError(NO_SUCH_OVERLOAD)


# ---- conversions ----------------------------------------------------------------------------------


def _conversion_error(target: str) -> CelError:
    """String.ConvertToType's one text for every string that does not convert (cel-go 0.23-0.29): the
    strconv/time error itself is not shown."""
    return CelError(f"type conversion error from 'string' to '{target}'")


def _syntax(pattern: str) -> Any:
    """A fixed pattern on RE2 (linear in the text, as every pattern numalign runs on a CEL string)."""
    return re2.compile(pattern, options=_RE2_OPTIONS)  # type: ignore[no-untyped-call]


# strconv.ParseInt/ParseUint in base 10: ASCII digits only (Python's int() takes blanks, underscores and
# other scripts' digits), a sign for ParseInt only
_GO_INT: Final = _syntax(r"[+-]?[0-9]+")
_GO_UINT: Final = _syntax(r"[0-9]+")


def decimal_value(digits: str) -> int:
    """The value of an ASCII digit string (an optional sign first) of any length: past 20 significant
    digits it is only known to be beyond 64 bits (Python's int() refuses over 4,300 digits)."""
    sign = -1 if digits[:1] == "-" else 1
    significant = digits.lstrip("+-").lstrip("0") or "0"
    return sign * (1 << 70 if len(significant) > 20 else int(significant))


def to_int(v: Any) -> int:
    k = _num_kind(v)
    if k == "int":
        return int(v)
    if k == "uint":
        return _int(int(v))
    if k == "double":
        if not (-9223372036854775809.0 < v < 9223372036854775808.0) or math.isnan(v):
            raise CelError("integer overflow")
        return int(v)
    if k == "string":
        if _GO_INT.fullmatch(v) is None or not INT64_MIN <= decimal_value(v) <= INT64_MAX:
            raise _conversion_error("int")
        return decimal_value(v)
    if k == "google.protobuf.Timestamp":
        return int(v.nanos // 1_000_000_000)
    if k == "google.protobuf.Duration":  # cel-go's Duration.ConvertToType(IntType): its nanoseconds
        return int(v.nanos)
    raise CelError(NO_SUCH_OVERLOAD)


def to_uint(v: Any) -> UInt:
    k = _num_kind(v)
    if k == "uint":
        return UInt(v)
    if k == "int":
        return _uint(int(v))
    if k == "double":
        # cel-go's doubleToUint64Checked refuses any v < 0, so (-1, 0) overflows rather than truncating
        # to 0; -0.0 is not below 0 and NaN fails the comparison
        if not 0.0 <= v < 18446744073709551616.0:
            raise CelError("unsigned integer overflow")
        return UInt(int(v))
    if k == "string":
        if _GO_UINT.fullmatch(v) is None or decimal_value(v) > UINT64_MAX:
            raise _conversion_error("uint")
        return UInt(decimal_value(v))
    raise CelError(NO_SUCH_OVERLOAD)


def _go_underscores_ok(s: str) -> bool:
    """strconv's underscoreOK: each underscore between digits (or right after a base prefix)."""
    saw = "^"
    i = 1 if s[:1] in ("+", "-") else 0
    hexadecimal = False
    if len(s) >= i + 2 and s[i] == "0" and s[i + 1] in "bBoOxX":
        saw, hexadecimal = "0", s[i + 1] in "xX"
        i += 2
    for ch in s[i:]:
        if "0" <= ch <= "9" or (hexadecimal and ch in "abcdefABCDEF"):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def _go_float_text(text: str) -> str | None:
    """strconv.ParseFloat's syntax (readFloat): a sign, a decimal or 0x-hexadecimal mantissa with one
    point, an exponent (e, or p for hexadecimal, which must have one) of one or more digits, underscores
    between digits; the whole text. The same number in a form Python reads, or None."""
    i = 1 if text[:1] in ("+", "-") else 0
    hexadecimal = text[i:i + 2] in ("0x", "0X")
    if hexadecimal:
        i += 2
    digits = "0123456789abcdefABCDEF" if hexadecimal else "0123456789"
    saw_digits = saw_dot = False
    while i < len(text):
        ch = text[i]
        if ch == "." and not saw_dot:
            saw_dot = True
        elif ch in digits:
            saw_digits = True
        elif ch != "_":
            break
        i += 1
    if not saw_digits:
        return None
    if i < len(text) and text[i] in ("pP" if hexadecimal else "eE"):
        i += 1
        if i < len(text) and text[i] in "+-":
            i += 1
        if i >= len(text) or not "0" <= text[i] <= "9":
            return None
        while i < len(text) and ("0" <= text[i] <= "9" or text[i] == "_"):
            i += 1
    elif hexadecimal:
        return None
    if i != len(text) or ("_" in text and not _go_underscores_ok(text)):
        return None
    return text.replace("_", "")


def parse_go_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64), or None where it fails (a syntax error, or a finite number beyond
    the double range: ErrRange)."""
    lowered = text.lower()
    unsigned = lowered[1:] if lowered[:1] in ("+", "-") else lowered
    if unsigned in ("inf", "infinity"):
        return -math.inf if lowered.startswith("-") else math.inf
    if lowered == "nan":
        return math.nan
    cleaned = _go_float_text(text)
    if cleaned is None:
        return None
    try:
        value = float.fromhex(cleaned) if cleaned.lstrip("+-")[:2] in ("0x", "0X") else float(cleaned)
    except (OverflowError, ValueError):
        return None
    return None if math.isinf(value) else value


def to_double(v: Any) -> float:
    k = _num_kind(v)
    if k in ("int", "uint", "double"):
        return float(v)
    if k == "string":
        value = parse_go_float(v)
        if value is None:
            raise _conversion_error("double")
        return value
    raise CelError(NO_SUCH_OVERLOAD)


def format_double(v: float) -> str:
    """fmt's %g (strconv.FormatFloat(v, 'g', -1, 64)): the shortest digits, in exponent form when the
    decimal exponent is below -4 or at least 6 (string(1000000.0) is "1e+06")."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "-0" if math.copysign(1, v) < 0 else "0"
    text = repr(v)
    mantissa, _, exp = text.partition("e")
    digits = mantissa.replace("-", "").replace(".", "").lstrip("0")
    exponent = int(exp) if exp else (len(mantissa.replace("-", "").split(".")[0]) - 1 if abs(v) >= 1 else
                                      -(len(mantissa.split(".")[1]) - len(mantissa.split(".")[1].lstrip("0")) + 1))
    if exponent < -4 or exponent >= 6:
        d = digits.rstrip("0") or "0"
        m = d[0] + ("." + d[1:] if len(d) > 1 else "")
        return f"{'-' if v < 0 else ''}{m}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return text.removesuffix(".0") if "e" not in text else f"{v:f}".rstrip("0").rstrip(".")


def to_string(v: Any) -> str:
    k = _num_kind(v)
    if k == "string":
        return str(v)
    if k in ("int", "uint"):
        return str(int(v))
    if k == "double":
        return format_double(v)
    if k == "bool":
        return "true" if v else "false"
    if k == "bytes":
        try:
            return str(v.decode("utf-8"))
        except UnicodeDecodeError:
            raise CelError("invalid UTF-8 in bytes, cannot convert to string") from None
    if k == "google.protobuf.Timestamp":
        return timestamp_text(v.nanos, v.offset)
    if k == "google.protobuf.Duration":
        return duration_text(v.nanos)
    raise CelError(NO_SUCH_OVERLOAD)


def shortest_fixed(v: float) -> str:
    """strconv.FormatFloat(v, 'f', -1, 64): the shortest digits that read back as v, never an exponent."""
    if v == 0:
        return "-0" if math.copysign(1, v) < 0 else "0"
    mantissa, _, exp = repr(abs(v)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0") or "0"
    point = len(whole) + (int(exp) if exp else 0) - (len(whole + frac) - len((whole + frac).lstrip("0")))
    digits = digits.rstrip("0") or "0"
    if point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if v < 0 else "") + text


def duration_text(nanos: int) -> str:
    """A duration's string: Duration.Seconds() (whole seconds plus the rest, each through a double, as
    Go truncates the division) in the shortest fixed form, then "s"."""
    whole = abs(nanos) // 1_000_000_000 * (-1 if nanos < 0 else 1)
    return shortest_fixed(float(whole) + float(nanos - whole * 1_000_000_000) / 1e9) + "s"


def timestamp_text(nanos: int, offset: int = 0) -> str:
    """A timestamp's string: RFC3339Nano at the offset it was read with (the fraction without its
    trailing zeros; Z for UTC)."""
    seconds, fraction = divmod(nanos + offset * 1_000_000_000, 1_000_000_000)
    days, rest = divmod(seconds, 86400)
    year, month, day = _civil_from_days(days)
    text = f"{year:04d}-{month:02d}-{day:02d}T{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    if fraction:
        text += "." + f"{fraction:09d}".rstrip("0")
    if offset == 0:
        return text + "Z"
    return text + f"{'-' if offset < 0 else '+'}{abs(offset) // 3600:02d}:{abs(offset) % 3600 // 60:02d}"


_CEL_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                       "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def cel_quote(s: str) -> str:
    """strings.quote (cel-go's own, not strconv.Quote): the escapes \\a \\b \\f \\n \\r \\t \\v \\\\ \\"
    only, every other character as it is (a control character too)."""
    return '"' + "".join(_CEL_ESCAPES.get(ch, ch) for ch in s) + '"'


def go_quote(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_DURATION_UNITS: Final = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 1_000_000, "s": 1_000_000_000,
                          "m": 60_000_000_000, "h": 3_600_000_000_000}
_NANOS_LIMIT: Final = 1 << 63


def parse_go_duration(text: str) -> int | None:
    """time.ParseDuration in nanoseconds, or None where it fails: Go's grammar (one optional sign, then
    numbers each with a unit; "0" alone) and its overflow checks, in Go's integer arithmetic (a fraction
    is added through a double, as Go adds it)."""
    s = text
    neg = s[:1] == "-"
    if s[:1] in ("-", "+"):
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        return None
    total = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            return None
        i = 0
        whole = 0
        while i < len(s) and "0" <= s[i] <= "9":
            whole = whole * 10 + ord(s[i]) - 48
            if whole > _NANOS_LIMIT:
                return None  # leadingInt's overflow
            i += 1
        pre = i > 0
        fraction, scale, post = 0, 1.0, False
        if i < len(s) and s[i] == ".":
            i += 1
            start = i
            overflow = False
            while i < len(s) and "0" <= s[i] <= "9":
                if not overflow:
                    if fraction > (_NANOS_LIMIT - 1) // 10:
                        overflow = True  # leadingFraction drops the digits it cannot hold
                    else:
                        fraction = fraction * 10 + ord(s[i]) - 48
                        scale *= 10
                i += 1
            post = i > start
        if not pre and not post:
            return None
        start = i
        while i < len(s) and s[i] != "." and not "0" <= s[i] <= "9":
            i += 1
        unit = _DURATION_UNITS.get(s[start:i])
        if unit is None:
            return None  # a missing or unknown unit
        s = s[i:]
        if whole > _NANOS_LIMIT // unit:
            return None
        value = whole * unit
        if fraction > 0:
            value += int(float(fraction) * (float(unit) / scale))
            if value > _NANOS_LIMIT:
                return None
        total += value
        if total > _NANOS_LIMIT:
            return None
    if neg:
        return -total
    return None if total > _NANOS_LIMIT - 1 else total


def to_duration(v: Any) -> Duration:
    if isinstance(v, Duration):
        return v
    if not isinstance(v, str):
        raise CelError(NO_SUCH_OVERLOAD)
    nanos = parse_go_duration(v)
    if nanos is None:
        raise _conversion_error("google.protobuf.Duration")
    return Duration(nanos)


# the range of a CEL timestamp: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, in Unix seconds
_MIN_UNIX: Final = -62135596800
_MAX_UNIX: Final = 253402300799
_DAYS_IN_MONTH: Final = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (year 0 included)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def parse_rfc3339(text: str) -> tuple[int, int] | None:
    """time.Parse(time.RFC3339, text): Unix nanoseconds and the zone offset in seconds, or None where it
    fails. Go tries a strict fast path first and, when that fails, walks the layout
    2006-01-02T15:04:05Z07:00 with its general parser, which takes more (the fast path's every answer is
    also the general parser's, so only the general rules are needed here): a 4-digit year; 2-digit month,
    day, minute, second in their ranges; a 1- or 2-digit hour 0-23 (stdHour); after the seconds a fraction
    led by '.' or ',' (digits past the ninth dropped); then Z or a sign, 2-digit hour, ':' and 2-digit
    minute, where Go allows hour 24 and minute 60 ("some people do write offsets of 24 hours or 60
    minutes"); nothing after it."""
    if not text.isascii():
        return None

    def digits(at: int, count: int) -> int | None:
        part = text[at:at + count]
        return int(part) if len(part) == count and part.isdigit() else None

    year, month = digits(0, 4), digits(5, 2)
    if year is None or month is None or text[4:5] != "-" or text[7:8] != "-" or not 1 <= month <= 12:
        return None
    day = digits(8, 2)
    if day is None or text[10:11] != "T":
        return None
    # stdHour takes one digit, or two when a second digit follows
    hour_width = 2 if text[12:13].isdigit() else 1
    hour = digits(11, hour_width)
    at = 11 + hour_width
    if hour is None or hour > 23 or text[at:at + 1] != ":":
        return None
    minute, second = digits(at + 1, 2), digits(at + 4, 2)
    if minute is None or minute > 59 or text[at + 3:at + 4] != ":" or second is None or second > 59:
        return None
    at += 6
    nanos = 0
    if text[at:at + 1] in (".", ",") and text[at + 1:at + 2].isdigit():
        end = at + 1
        while end < len(text) and text[end].isdigit():
            end += 1
        nanos = int(text[at + 1:end][:9].ljust(9, "0"))
        at = end
    rest = text[at:]
    offset = 0
    if rest != "Z":
        if len(rest) != 6 or rest[0] not in "+-" or rest[3] != ":":
            return None
        hours, minutes = digits(at + 1, 2), digits(at + 4, 2)
        if hours is None or minutes is None or hours > 24 or minutes > 60:
            return None
        offset = (hours * 60 + minutes) * 60 * (-1 if rest[0] == "-" else 1)
    # the day is checked last in Go too (after the whole layout), against the parsed month and year
    if not 1 <= day <= _DAYS_IN_MONTH[month - 1] + (1 if month == 2 and _leap(year) else 0):
        return None
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
    return seconds * 1_000_000_000 + nanos, offset


def to_timestamp(v: Any) -> Timestamp:
    if isinstance(v, Timestamp):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise CelError(NO_SUCH_OVERLOAD)
    parsed = (int(v) * 1_000_000_000, 0) if isinstance(v, int) else parse_rfc3339(v)
    if parsed is None:
        raise _conversion_error("google.protobuf.Timestamp")
    nanos, offset = parsed
    if not _MIN_UNIX <= nanos // 1_000_000_000 <= _MAX_UNIX:
        raise CelError("timestamp overflow")
    return Timestamp(nanos, offset)


def _timestamp_in_range(nanos: int, offset: int) -> Timestamp:
    """addTimeDurationChecked's last check: the sum's Unix seconds within years 1-9999 (the zone kept)."""
    if not _MIN_UNIX <= nanos // 1_000_000_000 <= _MAX_UNIX:
        raise CelError("timestamp overflow")
    return Timestamp(nanos, offset)


# ---- timestamp and duration accessors (cel-go's Timestamp.Receive and Duration.Receive) ---------------

_DURATION_ACCESSOR_UNITS: Final = {"getHours": 3_600_000_000_000, "getMinutes": 60_000_000_000,
                                   "getSeconds": 1_000_000_000}


def duration_field(nanos: int, name: str) -> int:
    """A duration's accessor: its whole length in the unit (cel-go's Int(d.Hours()) etc.), not a clock part.
    Go's Hours()/Minutes()/Seconds() add the remainder as a float fraction before Int() truncates, so a
    remainder a hair under the unit can round the total up: the same double arithmetic here."""
    if name == "getMilliseconds":
        return _go_div(nanos, 1_000_000)
    unit = _DURATION_ACCESSOR_UNITS[name]
    whole = _go_div(nanos, unit)
    return int(float(whole) + float(nanos - whole * unit) / float(unit))


def timestamp_field(nanos: int, offset: int, name: str) -> int:
    """A timestamp's accessor at a zone offset (seconds east of UTC), as Go's time.Time methods answer;
    cel-go's month, day of year and getDayOfMonth are 0-based, getDate 1-based, getDayOfWeek 0 = Sunday."""
    seconds, fraction = divmod(nanos, 1_000_000_000)
    days, rest = divmod(seconds + offset, 86400)
    if name == "getHours":
        return rest // 3600
    if name == "getMinutes":
        return rest % 3600 // 60
    if name == "getSeconds":
        return rest % 60
    if name == "getMilliseconds":
        return fraction // 1_000_000
    if name == "getDayOfWeek":
        return (days + 4) % 7  # 1970-01-01 was a Thursday
    year, month, day = _civil_from_days(days)
    if name == "getFullYear":
        return year
    if name == "getMonth":
        return month - 1
    if name == "getDate":
        return day
    if name == "getDayOfMonth":
        return day - 1
    # getDayOfYear
    return days - _days_from_civil(year, 1, 1)


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian date of days since 1970-01-01 (the inverse of _days_from_civil)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day


def _go_atoi(text: str) -> int:
    """strconv.Atoi, its error in its words."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise CelError(f"strconv.Atoi: parsing {go_strconv_quote(text)}: invalid syntax")
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise CelError(f"strconv.Atoi: parsing {go_strconv_quote(text)}: value out of range")
    return value


def zone_offset(tz: str, nanos: int) -> int:
    """cel-go's inTimeZone(): the offset (seconds east of UTC) at the instant of an IANA name, or of a
    numeric hh:mm (Atoi of each side, any values: the stdlib's getters, unlike Timestamp.Receive, check
    no range)."""
    colon = tz.find(":")
    if colon < 0:
        import datetime

        zone = load_location(tz)
        # an instant inside Python's datetime range: years 1 and 9999 see no zone transition at their edge
        seconds = min(max(nanos // 1_000_000_000, _MIN_UNIX + 2 * 86400), _MAX_UNIX - 2 * 86400)
        delta = datetime.datetime.fromtimestamp(seconds, zone).utcoffset()
        return int(delta.total_seconds()) if delta is not None else 0
    hours, minutes = _go_atoi(tz[:colon]), _go_atoi(tz[colon + 1:])
    offset = hours * 60 - minutes if tz[0] == "-" else hours * 60 + minutes
    # int((time.Duration(offset) * time.Minute).Seconds()): the product wraps at 64 bits as Go's does
    d = (offset * 60_000_000_000 + 2**63) % 2**64 - 2**63
    whole = _go_div(d, 1_000_000_000)
    return int(float(whole) + float(d - whole * 1_000_000_000) / 1e9)


def time_accessor(name: str, v: Any, zone: tuple[Any, ...]) -> int:
    """The accessor `name` of a timestamp (in UTC, or in the zone given) or a duration (its total)."""
    if isinstance(v, Timestamp):
        if not zone:
            return timestamp_field(v.nanos, 0, name)  # the stdlib's zero-argument form passes "UTC"
        if len(zone) == 1 and isinstance(zone[0], str):
            return timestamp_field(v.nanos, zone_offset(zone[0], v.nanos), name)
    elif isinstance(v, Duration) and not zone and name in _DURATION_ACCESSORS:
        return duration_field(v.nanos, name)
    raise CelError(NO_SUCH_OVERLOAD)


_DURATION_ACCESSORS: Final = frozenset(("getHours", "getMinutes", "getSeconds", "getMilliseconds"))
TIME_ACCESSORS: Final = _DURATION_ACCESSORS | {"getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate",
                                               "getDayOfWeek"}


# ---- strings (cel-go ext.Strings), in code points -----------------------------------------------------


def char_at(s: str, i: int) -> str:
    if i < 0 or i > len(s):
        raise CelError(f"index out of range: {i}")
    return s[i] if i < len(s) else ""


def index_of(s: Any, sub: Any, *start: int) -> int:
    if isinstance(s, list):
        return next((i for i, v in enumerate(s) if equal(v, sub)), -1)
    offset = start[0] if start else 0
    if offset < 0 or offset > len(s):
        raise CelError(f"index out of range: {offset}")
    return int(s.find(sub, offset))


def last_index_of(s: Any, sub: Any, *start: int) -> int:
    if isinstance(s, list):
        return next((i for i in range(len(s) - 1, -1, -1) if equal(s[i], sub)), -1)
    if not start:
        return int(s.rfind(sub))
    offset = start[0]
    if offset < 0 or offset > len(s):
        raise CelError(f"index out of range: {offset}")
    return int(s.rfind(sub, 0, offset + len(sub)))


def substring(s: str, start: int, *end: int) -> str:
    stop = end[0] if end else len(s)
    if start < 0 or start > len(s):
        raise CelError(f"index out of range: {start}")
    if end and (stop < 0 or stop > len(s)):
        raise CelError(f"index out of range: {stop}")
    if start > stop:
        raise CelError(f"invalid substring range. start: {start}, end: {stop}")
    return s[start:stop]


def split(s: str, sep: str, *n: int) -> list[str]:
    limit = n[0] if n else -1
    if limit == 0:
        return []
    if sep == "":
        chars = list(s)
        if 0 < limit < len(chars):
            return [*chars[:limit - 1], "".join(chars[limit - 1:])]
        return chars
    if limit < 0:
        return s.split(sep)
    return s.split(sep, limit - 1)


MAX_STRING: Final = 64 << 20  # code points: past this a value can only feed calls over the cost limit


def replace(s: str, old: str, new: str, *n: int) -> str:
    limit = n[0] if n else -1
    count = (len(s) + 1 if old == "" else s.count(old)) if limit < 0 else limit
    if len(s) + count * (len(new) - len(old)) > MAX_STRING:
        raise CostLimitExceededError("operation cancelled: actual cost limit exceeded")
    if old == "":
        # Go's strings.Replace: with an empty old string, insert `new` around every code point.
        count = len(s) + 1 if limit < 0 else min(limit, len(s) + 1)
        out = []
        for i, ch in enumerate(s):
            out.append((new if i < count else "") + ch)
        out.append(new if len(s) < count else "")
        return "".join(out)
    return s.replace(old, new, limit)


_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
                "\u2028\u2029\u202f\u205f\u3000"


def lower_ascii(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def upper_ascii(s: str) -> str:
    return "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in s)


def join(items: list[Any], sep: str = "") -> str:
    if not all(isinstance(x, str) for x in items):
        raise CelError(NO_SUCH_OVERLOAD)
    return sep.join(items)


# ---- regex (k8s library) ---------------------------------------------------------------------------


def matches(s: str, pattern: str) -> bool:
    return regex(pattern).search(s) is not None


def _library_regex(pattern: str) -> Any:
    """The Kubernetes regex library's compile: its errors say "Illegal regex" first."""
    try:
        return regex(pattern)
    except CelError as exc:
        raise CelError(f"Illegal regex: {exc}") from None


def find(s: str, pattern: str) -> str:
    m = _library_regex(pattern).search(s)
    return m.group(0) if m else ""


def find_all(s: str, pattern: str, *n: int) -> list[str]:
    limit = n[0] if n else -1
    if limit == 0:
        return []
    out: list[str] = []
    compiled = _library_regex(pattern)
    pos, prev_end = 0, -1
    while pos <= len(s):
        m = compiled.search(s, pos)
        if m is None:
            break
        start, end = m.span()
        if end == start == prev_end:
            # Go ignores an empty match right after the previous match
            pos = start + 1
            continue
        out.append(m.group(0))
        if 0 < limit <= len(out):
            break
        prev_end = end
        pos = end if end > start else end + 1
    return out


# ---- lists (k8s library) -----------------------------------------------------------------------------


def _ordered(items: list[Any]) -> None:
    for a, b in itertools.pairwise(items):
        compare(a, b)


def is_sorted(items: list[Any]) -> bool:
    return all(compare(a, b) <= 0 for a, b in itertools.pairwise(items))


def list_sum(items: list[Any]) -> Any:
    if not items:
        return 0
    total = items[0]
    for x in items[1:]:
        total = add(total, x)
    return total


def list_min_max(items: list[Any], want: int, name: str) -> Any:
    if not items:
        raise CelError(f"{name} called on empty list")
    best = items[0]
    for x in items[1:]:
        if compare(x, best) == want:
            best = x
    return best


# ---- sets (cel-go ext.Sets) -------------------------------------------------------------------------


def _has(items: list[Any], x: Any) -> bool:
    return any(equal(y, x) for y in items)


def sets_contains(a: list[Any], b: list[Any]) -> bool:
    return all(_has(a, x) for x in b)


def sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(_has(a, x) for x in b)


# ---- quantity and semver (k8s libraries) --------------------------------------------------------------

QUANTITY_SYNTAX: Final = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


@functools.lru_cache(maxsize=4096)
def quantity(text: str) -> Quantity:
    try:
        return Quantity.parse(text)
    except ValueError:
        raise CelError(QUANTITY_SYNTAX) from None


def is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except ValueError:
        return False
    return True


def q_operand(v: Any) -> Quantity:
    if isinstance(v, Quantity):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return Quantity.from_int(v)
    raise CelError(NO_SUCH_OVERLOAD)


def as_integer(q: Quantity) -> int:
    value = q.as_int64()
    if value is None:
        raise CelError("cannot convert value to integer")
    return value


def semver(text: str, *normalize: bool) -> Semver:
    try:
        return parse_semver(text, bool(normalize and normalize[0]))
    except SemverError as exc:
        raise CelError(str(exc)) from None


def is_semver(text: str, *normalize: bool) -> bool:
    try:
        parse_semver(text, bool(normalize and normalize[0]))
    except SemverError:
        return False
    return True


def ordered_compare(a: Any, b: Any) -> int:
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.cmp(b)
    raise CelError(NO_SUCH_OVERLOAD)


# ---- URL and IP (k8s libraries) ----------------------------------------------------------------------


def url(text: str) -> Opaque:
    # As the Kubernetes URL library: url.ParseRequestURI's check, url.Parse's URL, compared by its String()
    # form as cel-go's kubernetes.URL values are (gourl.py: Go's net/url, not urllib's reading).
    try:
        return Opaque("kubernetes.URL", gourl.parse(text))
    except gourl.URLError as e:
        raise CelError(f"URL parse error during conversion from string: parse {go_quote(text)}: {e}") from None


def url_part(u: Opaque, part: str) -> Any:
    value: gourl.GoURL = u.value
    return value.query() if part == "getQuery" else value.part(part)


def ip(text: str) -> Opaque:
    """The Kubernetes IP library's parseIPAddr: netip's parse (its error wrapped), then a zone and an
    IPv4-mapped IPv6 address refused with the library's own texts."""
    try:
        addr, zone = parse_netip_addr(text)
    except NetipError as exc:
        raise CelError(f"IP Address {go_strconv_quote(text)} parse error during conversion from string: "
                       f"{exc}") from None
    if zone:
        raise CelError(f"IP address {go_strconv_quote(text)} with zone value is not allowed")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise CelError(f"IPv4-mapped IPv6 address {go_strconv_quote(text)} is not allowed")
    return Opaque("net.IP", addr)


def is_ip(text: str) -> bool:
    try:
        ip(text)
    except CelError:
        return False
    return True


def optional_zero(v: Any) -> bool:
    if v is None or v is False:
        return True
    return bool(isinstance(v, (int, float, str, bytes, list, dict)) and not v and not isinstance(v, bool))


def _typed(fn: Callable[..., Any], *kinds: type) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        for a, k in zip(args, kinds, strict=False):
            if not isinstance(a, k) or (k is int and isinstance(a, bool)):
                raise CelError(NO_SUCH_OVERLOAD)
        return fn(*args)
    return call


S, N, L = str, int, list


# The functions below are named rather than lambdas inside lambdas in FUNCTIONS: mypyc (scripts/setup's
# compiled build) fails on a lambda nested in a module-level lambda. Each answers as the lambda did.
_ADD: Final = _typed(lambda a, b: a + q_operand(b), Quantity)
_SUB: Final = _typed(lambda a, b: a - q_operand(b), Quantity)
_ENCODE: Final = _typed(lambda s: s.encode("utf-8", "surrogatepass"), S)
_STRING_TO_BOOL: Final = _typed(lambda s: _to_bool(s), S)


def _quantity_add(q: Any, x: Any) -> Any:
    return _ADD(q, x)


def _quantity_sub(q: Any, x: Any) -> Any:
    return _SUB(q, x)


def _to_bytes(v: Any) -> Any:
    return v if isinstance(v, bytes) else _ENCODE(v)


def _bool_of(v: Any) -> Any:
    return v if isinstance(v, bool) else _STRING_TO_BOOL(v)


def _or_value(o: Any, v: Any) -> Any:
    if not isinstance(o, Optional):
        raise CelError(NO_SUCH_OVERLOAD)
    return o.value if o.present else v


def _or(o: Any, p: Any) -> Any:
    if not isinstance(o, Optional):
        raise CelError(NO_SUCH_OVERLOAD)
    return o if o.present else p


FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "charAt": _typed(char_at, S, N), "indexOf": index_of, "lastIndexOf": last_index_of,
    "lowerAscii": _typed(lower_ascii, S), "upperAscii": _typed(upper_ascii, S),
    "replace": _typed(replace, S, S, S, N), "split": _typed(split, S, S, N), "substring": _typed(substring, S, N, N),
    "trim": _typed(lambda s: s.strip(_SPACE), S), "join": _typed(join, L, S),
    "strings.quote": _typed(lambda s: cel_quote(s), S),
    "contains": _typed(lambda s, x: x in s, S, S), "startsWith": _typed(lambda s, x: s.startswith(x), S, S),
    "endsWith": _typed(lambda s, x: s.endswith(x), S, S), "matches": _typed(matches, S, S),
    "find": _typed(find, S, S), "findAll": _typed(find_all, S, S, N),
    "isSorted": _typed(is_sorted, L), "sum": _typed(list_sum, L),
    "min": _typed(lambda v: list_min_max(v, -1, "min"), L), "max": _typed(lambda v: list_min_max(v, 1, "max"), L),
    "reverse": _typed(lambda v: v[::-1], L),
    "sets.contains": _typed(sets_contains, L, L), "sets.equivalent": _typed(sets_equivalent, L, L),
    "sets.intersects": _typed(sets_intersects, L, L),
    "quantity": _typed(quantity, S), "isQuantity": _typed(is_quantity, S),
    "sign": _typed(lambda q: q.sign(), Quantity), "isInteger": _typed(lambda q: q.as_int64() is not None, Quantity),
    "asInteger": _typed(as_integer, Quantity), "asApproximateFloat": _typed(lambda q: q.nanos / 1e9, Quantity),
    "add": _quantity_add, "sub": _quantity_sub,
    "isGreaterThan": lambda a, b: ordered_compare(a, b) > 0, "isLessThan": lambda a, b: ordered_compare(a, b) < 0,
    "compareTo": ordered_compare,
    "semver": _typed(semver, S, bool), "isSemver": _typed(is_semver, S, bool),
    "major": _typed(lambda v: v.major, Semver), "minor": _typed(lambda v: v.minor, Semver),
    "patch": _typed(lambda v: v.patch, Semver),
    "url": _typed(url, S), "isURL": _typed(lambda s: _ok(url, s), S),
    "getScheme": lambda u: url_part(u, "getScheme"), "getHost": lambda u: url_part(u, "getHost"),
    "getHostname": lambda u: url_part(u, "getHostname"), "getPort": lambda u: url_part(u, "getPort"),
    "getEscapedPath": lambda u: url_part(u, "getEscapedPath"), "getQuery": lambda u: url_part(u, "getQuery"),
    "ip": _typed(ip, S), "isIP": _typed(is_ip, S), "family": lambda v: v.value.version,
    "isLoopback": lambda v: v.value.is_loopback, "isUnspecified": lambda v: v.value.is_unspecified,
    "ip.isCanonical": _typed(lambda s: str(ip(s).value) == s, S),
    "int": to_int, "uint": to_uint, "double": to_double, "string": to_string,
    "bytes": _to_bytes, "bool": _bool_of,
    "dyn": lambda v: v, "type": lambda v: TypeValue(type_name(v)),
    "duration": to_duration, "timestamp": to_timestamp,
    "optional.of": lambda v: Optional(v), "optional.none": lambda: Optional(),
    "optional.ofNonZeroValue": lambda v: Optional() if optional_zero(v) else Optional(v),
    "hasValue": _typed(lambda o: o.present, Optional),
    "value": _typed(lambda o: o.value if o.present else _raise("optional.none() dereference"), Optional),
    "orValue": _or_value, "or": _or,
}


def _to_bool(s: str) -> bool:
    if s in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if s in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise CelError("type conversion error from 'string' to 'bool'")


def _ok(fn: Callable[[str], Any], s: str) -> bool:
    try:
        fn(s)
    except CelError:
        return False
    return True


def _raise(message: str) -> Any:
    raise CelError(message)
