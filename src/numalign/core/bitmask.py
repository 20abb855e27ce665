"""NUMA node masks of any width, with upstream's ordering.

Upstream's bitmask is a mutable uint64 capped at 64 nodes. Ours is an immutable Python int, so the
width is unbounded; the ordering semantics are the same: a mask is *narrower* than another when it
has fewer bits set, and with equal counts when it is numerically smaller (upstream's IsLessThan is a
plain integer compare, whatever its doc comment says).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import combinations

from numalign.errors import InvalidInputError


def mask_of(bits: Iterable[int]) -> int:
    """The int mask with the given NUMA ids set. Negative ids are invalid input."""
    value = 0
    for b in bits:
        if b < 0:
            raise InvalidInputError(f"NUMA node id {b} is negative; expected an id >= 0")
        value |= 1 << b
    return value


def bits_of(mask: int) -> list[int]:
    """Ascending NUMA ids set in `mask`."""
    out: list[int] = []
    m = mask
    while m:
        low = m & -m
        out.append(low.bit_length() - 1)
        m ^= low
    return out


def narrower_key(mask: int) -> tuple[int, int]:
    """Sort key of upstream's IsNarrowerThan: fewer bits first, then numerically smaller."""
    return (mask.bit_count(), mask)


def is_narrower(a: int, b: int) -> bool:
    """Upstream BitMask.IsNarrowerThan (strict; false for equal masks)."""
    ca, cb = a.bit_count(), b.bit_count()
    if ca == cb:
        return a < b
    return ca < cb


def iterate_bitmasks(bits: list[int]) -> Iterator[int]:
    """Upstream bitmask.IterateBitMasks: every non-empty subset of `bits`, by size, then in
    lexicographic order of the input positions."""
    for k in range(1, len(bits) + 1):
        for combo in combinations(bits, k):
            yield mask_of(combo)


def mask_string(mask: int) -> str:
    """Upstream BitMask.String(), quirks included (used as a map key by the memory manager)."""
    for shift in range(62, 0, -2):
        if mask > (1 << shift):
            return format(mask, f"0{shift + 2}b")
    return format(mask, "02b")


class BitMask:
    """An immutable set of NUMA node ids; a thin, typed face over an int for library users."""

    __slots__ = ("_v",)

    def __init__(self, value: int = 0) -> None:
        if value < 0:
            raise InvalidInputError(f"bit mask value {value} is negative; expected a non-negative int")
        self._v = value

    @classmethod
    def of(cls, *bits: int) -> BitMask:
        return cls(mask_of(bits))

    @property
    def value(self) -> int:
        return self._v

    def bits(self) -> list[int]:
        return bits_of(self._v)

    def count(self) -> int:
        return self._v.bit_count()

    def is_empty(self) -> bool:
        return self._v == 0

    def is_set(self, bit: int) -> bool:
        return bit >= 0 and bool(self._v >> bit & 1)

    def is_narrower_than(self, other: BitMask) -> bool:
        return is_narrower(self._v, other._v)

    def is_less_than(self, other: BitMask) -> bool:
        return self._v < other._v

    def __and__(self, other: BitMask) -> BitMask:
        return BitMask(self._v & other._v)

    def __or__(self, other: BitMask) -> BitMask:
        return BitMask(self._v | other._v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BitMask) and other._v == self._v

    def __hash__(self) -> int:
        return hash(self._v)

    def __repr__(self) -> str:
        return f"BitMask({self.bits()})"

    def __str__(self) -> str:
        return mask_string(self._v)
