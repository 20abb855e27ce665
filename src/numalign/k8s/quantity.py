"""Kubernetes `resource.Quantity` (k8s.io/apimachinery/pkg/api/resource), exact.

Theory of operation
-------------------
Upstream keeps either an int64 mantissa with a decimal scale or an arbitrary-precision decimal, and
rounds every parsed value *up* (away from zero) to nano precision. Because of that rounding every
Quantity is an integer number of nano-units, so we store exactly that: a Python int `nanos`, plus the
`format` (suffix family) that upstream uses to print it back. Arithmetic and comparison are exact
integer operations; no float ever touches a value.

Parsing follows upstream's hand-written scanner (`parseQuantityString`) rather than a regex, because
the scanner accepts a few forms a regex would not ("1.", ".5", "1.G", "+", "-", "."), and those are
accepted by a real API server.

Deviations, on purpose and harmless for decisions:
- `str()` always prints the canonical form. Upstream echoes the input text verbatim when it already
  "looks canonical" (e.g. "+1" or "01" print as given); values are equal either way.
- Decimal exponents beyond ±1000 are rejected (upstream would wrap int32 or build giant numbers).
- Printing past the largest suffixes follows the newest upstream: DecimalSI above "E" prints in
  exponent notation ("1000E" -> "1e21"), BinarySI above "Ei" prints exact decimal ("10e69").
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal
from enum import StrEnum
from typing import Final

from numalign.errors import InvalidInputError
from numalign.limits import MAX_QUANTITY_CHARS, quote

# Integers of at most MAX_QUANTITY_CHARS decimal digits (log2(10) = 3.32 bits a digit).
_MAX_INT_BITS = int(MAX_QUANTITY_CHARS * 3.32)

NANO: Final = 10**9
_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)
# Upstream caps BinarySI values at maxAllowed (int64 max) when parsing.
_BINARY_CAP_NANOS: Final = _INT64_MAX * NANO
_MAX_EXPONENT: Final = 1000

GRAMMAR: Final = (
    "<sign?><digits>[.<digits>]<suffix>, suffix one of Ki Mi Gi Ti Pi Ei (binary), "
    'n u m "" k M G T P E (decimal SI) or e<int>/E<int> (exponent); case-sensitive, no spaces'
)
_EXAMPLE: Final = 'e.g. "500m", "2", "1.5Gi", "128974848", "129e6", "123Mi"'


class QuantityFormat(StrEnum):
    """The suffix family a Quantity prints with (upstream `resource.Format`)."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_DECIMAL_SUFFIXES: Final = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT: Final = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER: Final = {0: "", **{p // 10: s for s, p in _BINARY_SUFFIXES.items()}}
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")
# strconv.ParseInt grammar for the exponent (Python's int() would also take "_" and spaces).
_EXPONENT_RE: Final = re.compile(r"[+-]?[0-9]+\Z")


def _div_away_from_zero(n: int, d: int) -> int:
    """n / d rounded away from zero, like upstream's Value()/MilliValue() ("rounded up"): the ceiling of
    |n| / d as -(-|n| // d), one floor division (divmod made a tuple per call; every pod read asks this of
    its requests)."""
    if n >= 0:
        return -(-n // d)
    return n // d  # a floor, away from zero below it


def _remove_factors(value: int, base: int) -> tuple[int, int]:
    """Divide out `base` while it divides `value`; return (rest, times). Upstream removeInt64Factors."""
    times = 0
    while value != 0 and value % base == 0:
        value //= base
        times += 1
    return value, times


def _go_json_float(value: float) -> str:
    """The text Go's encoding/json writes for a float64 (what the API server's YAML-to-JSON step
    hands to Quantity): shortest digits, positional unless |v| < 1e-6 or >= 1e21."""
    magnitude = abs(value)
    if magnitude == 0 or 1e-6 <= magnitude < 1e21:
        return format(Decimal(repr(value)), "f")
    return repr(value)


class _FormatError(Exception):
    """Internal: the text does not follow the quantity grammar (upstream ErrFormatWrong/ErrSuffix)."""


def _scan(text: str) -> tuple[bool, str, str, str]:
    """Upstream parseQuantityString: (positive, numerator digits, denominator digits, suffix)."""
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise _FormatError
    return positive, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, QuantityFormat]:
    """Upstream suffixHandler.interpret: (base, exponent, format); case-sensitive."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT_RE.match(suffix[1:]):
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise _FormatError
        return 10, exponent, QuantityFormat.DECIMAL_EXPONENT
    raise _FormatError


class Quantity:
    """An immutable, exact Kubernetes quantity. Compare, hash and add numerically ("1000m" == "1")."""

    __slots__ = ("_format", "_nanos")

    _nanos: int
    _format: QuantityFormat

    def __init__(self, nanos: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> None:
        """Build from an integer count of nano-units (10^-9). Prefer parse()/from_int()."""
        # object.__setattr__ past the refusing __setattr__: the slot's own setter in Python, and in the
        # compiled core (mypyc turns this very form, inside the class, into a native attribute store).
        object.__setattr__(self, "_nanos", int(nanos))
        object.__setattr__(self, "_format", fmt if type(fmt) is QuantityFormat else QuantityFormat(fmt))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    def __reduce__(self) -> tuple[type[Quantity], tuple[int, QuantityFormat]]:
        return (Quantity, (self._nanos, self._format))

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: object, where: str = "quantity") -> Quantity:
        """Parse a quantity as the API server does. `where` names the field in error messages.

        ints are exact; floats (what YAML makes of `cpu: 0.5`) are read from the text Go's JSON
        encoder would write for them, as the API server does. `text` is typed object: whatever a manifest
        holds gets here, and the compiled core checks a narrower type at the call, before this
        function's own one-line refusal could run.
        """
        if isinstance(text, bool) or not isinstance(text, str | int | float):
            raise InvalidInputError(
                f"{where}: invalid quantity {quote(text)} ({type(text).__name__}): expected a string or a "
                f"number in the quantity grammar {GRAMMAR}; {_EXAMPLE}"
            )
        if isinstance(text, int):
            if abs(text).bit_length() > _MAX_INT_BITS:
                raise InvalidInputError(
                    f"{where}: invalid quantity {quote(text, 40)}: more than {MAX_QUANTITY_CHARS} digits; "
                    f"expected {GRAMMAR}; {_EXAMPLE}"
                )
            return cls(text * NANO)
        if isinstance(text, float):
            if not math.isfinite(text):
                raise InvalidInputError(
                    f"{where}: invalid quantity {text!r}: expected a finite number; {_EXAMPLE}"
                )
            text = _go_json_float(text)
        if len(text) > MAX_QUANTITY_CHARS:
            raise InvalidInputError(
                f"{where}: invalid quantity {quote(text, 40)}: longer than {MAX_QUANTITY_CHARS} characters; "
                f"expected {GRAMMAR}; {_EXAMPLE}"
            )
        try:
            return _parse_cached(text)
        except _FormatError:
            raise InvalidInputError(
                f"{where}: invalid quantity {quote(text)}: expected {GRAMMAR}; {_EXAMPLE}"
            ) from None

    @staticmethod
    def _parse(text: str) -> Quantity:
        if not text:
            raise _FormatError
        positive, num, denom, suffix = _scan(text)
        base, exponent, fmt = _interpret(suffix)
        # magnitude = (num.denom) * base**exponent, as an exact fraction numer/den.
        numer = int(num + denom)
        den = 10 ** len(denom)
        if base == 2:
            numer <<= exponent
        elif exponent >= 0:
            numer *= 10**exponent
        else:
            den *= 10**-exponent
        # Round the magnitude up to nano precision (upstream inf.RoundUp on the absolute value).
        nanos = -(-(numer * NANO) // den)
        if fmt is QuantityFormat.BINARY_SI:
            nanos = min(nanos, _BINARY_CAP_NANOS)
            if 0 < nanos < NANO:
                # Upstream: a binary value below one prints as DecimalSI "to avoid confusion".
                fmt = QuantityFormat.DECIMAL_SI
        return _make(nanos if positive else -nanos, fmt)

    @classmethod
    def from_int(cls, value: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
        """resource.NewQuantity(value, fmt)."""
        return cls(value * NANO, fmt)

    @classmethod
    def from_milli(cls, milli: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
        """resource.NewMilliQuantity(milli, fmt)."""
        return cls(milli * 10**6, fmt)

    # ---- accessors -----------------------------------------------------------------------------

    @property
    def nanos(self) -> int:
        """The exact value in units of 10^-9."""
        return self._nanos

    @property
    def format(self) -> QuantityFormat:
        return self._format

    def value(self) -> int:
        """Upstream Value(): the value rounded up (away from zero) to an integer."""
        return _div_away_from_zero(self._nanos, NANO)

    def milli_value(self) -> int:
        """Upstream MilliValue(): value·1000 rounded up (away from zero)."""
        return _div_away_from_zero(self._nanos, 10**6)

    def as_int64(self) -> int | None:
        """Upstream AsInt64(): the value when it is an exact integer within int64, else None."""
        whole, rest = divmod(self._nanos, NANO)
        if rest or not _INT64_MIN <= whole <= _INT64_MAX:
            return None
        return whole

    def is_zero(self) -> bool:
        return self._nanos == 0

    def sign(self) -> int:
        return (self._nanos > 0) - (self._nanos < 0)

    # ---- arithmetic and comparison ---------------------------------------------------------------

    def _combine_format(self, other: Quantity) -> QuantityFormat:
        # Upstream Add/Sub keep the receiver's format, unless the receiver is zero.
        return other._format if self._nanos == 0 else self._format

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return _make(self._nanos + other._nanos, self._combine_format(other))

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return _make(self._nanos - other._nanos, self._combine_format(other))

    def __neg__(self) -> Quantity:
        return _make(-self._nanos, self._format)

    def cmp(self, other: Quantity) -> int:
        """Upstream Cmp: -1, 0 or 1."""
        return (self._nanos > other._nanos) - (self._nanos < other._nanos)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos == other._nanos

    def __hash__(self) -> int:
        return hash(self._nanos)

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos < other._nanos

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos <= other._nanos

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos > other._nanos

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos >= other._nanos

    # ---- printing ---------------------------------------------------------------------------------

    def __str__(self) -> str:
        """Upstream String()/CanonicalizeBytes: canonical text in the quantity's suffix family."""
        n = self._nanos
        if n == 0:
            return "0"
        fmt = self._format
        if fmt is QuantityFormat.BINARY_SI:
            # Below 1024 in magnitude, or not an integer: print as DecimalSI so nothing is rounded.
            if abs(n) < 1024 * NANO or n % NANO:
                fmt = QuantityFormat.DECIMAL_SI
            else:
                mantissa, power = _remove_factors(n // NANO, 1024)
                if power in _BINARY_BY_POWER:
                    return f"{mantissa}{_BINARY_BY_POWER[power]}"
                # Past "Ei" there is no binary suffix: exact decimal-exponent text instead.
                fmt = QuantityFormat.DECIMAL_EXPONENT
        mantissa, times = _remove_factors(n, 10)
        exponent = times - 9
        shift = exponent % 3  # Python's modulo floors, so this moves the exponent down to a multiple of 3
        mantissa *= 10**shift
        exponent -= shift
        if fmt is QuantityFormat.DECIMAL_SI and exponent in _DECIMAL_BY_EXPONENT:
            return f"{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
        # DecimalExponent, or DecimalSI past "E" (upstream falls back to exponent notation there).
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def _make(nanos: int, fmt: QuantityFormat) -> Quantity:
    """The constructor the hot paths (arithmetic, parsing) call: a plain constructor call, since a class
    compiled by mypyc (scripts/compiled-modules) cannot be made with object.__new__."""
    return Quantity(nanos, fmt)


# Quantities are immutable, so parsing the same text twice may return the same object; manifests
# and vectors repeat a handful of values many times.
_parse_cached: Final = functools.lru_cache(maxsize=4096)(Quantity._parse)

ZERO: Final = Quantity(0)
