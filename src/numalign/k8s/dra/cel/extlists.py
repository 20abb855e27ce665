"""cel-go's lists extension at version 3 (k8s.io/apiserver's base environment from 1.34): `slice`,
`flatten`, `sort`, `distinct`, `reverse`, `lists.range`, and the optional library's `first`/`last`,
with cel-go's error texts and costs (the extension's own estimators and trackers: a call of 1, a list
allocation of 10, and the result's or the input's size times a factor).

Bounded: every call's cost is known from its inputs before anything is built, and program.py charges
it first, so a call over the cost limit stops before it allocates (`lists.range(1000000000)` builds no
list; upstream would build it and then stop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from numalign.k8s.dra.cel import library as lib
from numalign.k8s.dra.cel.values import (
    MISSING,
    NO_SUCH_OVERLOAD,
    CelError,
    Duration,
    Optional,
    Timestamp,
    equal,
    map_get,
    type_name,
)

CALL_COST: Final = 1
LIST_CREATE_COST: Final = 10  # common.ListCreateBaseCost
STRING_FACTOR: Final = 0.1
MAX_RANGE_1_37: Final = 1_000_000  # cel-go 0.29's default ListsMaxRangeSize


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise CelError(NO_SUCH_OVERLOAD)
    return v


def _int(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or type_name(v) != "int":
        raise CelError(NO_SUCH_OVERLOAD)
    return v


def list_slice(target: Any, first_index: Any, end_index: Any) -> list[Any]:
    items, start, end = _list(target), _int(first_index), _int(end_index)
    if start < 0 or end < 0:
        raise CelError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise CelError(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if len(items) < end:
        raise CelError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return items[start:end]


def flatten(target: Any, levels: Any = 1) -> list[Any]:
    items, depth = _list(target), _int(levels)
    if depth < 0:
        raise CelError("level must be non-negative")
    return _flatten(items, depth)


def _flatten(items: list[Any], depth: int) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if isinstance(x, list) and depth > 0:
            out.extend(_flatten(x, depth - 1))
        else:
            out.append(x)
    return out


_COMPARABLE: Final = frozenset({"int", "uint", "double", "bool", "string", "bytes", "google.protobuf.Duration",
                                "google.protobuf.Timestamp"})


def sort(target: Any) -> list[Any]:
    items = _list(target)
    if not items:
        return items
    kind = type_name(items[0])
    if kind not in _COMPARABLE:
        raise CelError("list elements must be comparable")
    if any(type_name(x) != kind for x in items):
        raise CelError("list elements must have the same type")
    if kind in ("int", "uint", "string", "bytes", "bool"):
        return sorted(items)  # equal elements are the same value: any sort gives Go's answer
    # in Go's order: elements that compare equal may still differ (-0.0 and 0.0, offsets of an instant)
    return [items[i] for i in go_sort_indices(items)]


class _GoSort:
    """Go's sort.Slice over the positions of `keys` (pattern-defeating quicksort, not stable): cel-go sorts
    a list's indices by their keys with it, so elements of equal keys come out in the order Go's
    algorithm leaves them (its insertion sort up to 12 elements, which is stable; partitions, a
    deterministic pattern breaker and a heapsort fallback beyond)."""

    def __init__(self, keys: list[Any]) -> None:
        self.keys = keys
        self.idx = list(range(len(keys)))

    def less(self, i: int, j: int) -> bool:
        try:
            return bool(lib.compare(self.keys[self.idx[i]], self.keys[self.idx[j]]) < 0)
        except CelError:  # a comparison that fails (NaN) is not "less"
            return False

    def swap(self, i: int, j: int) -> None:
        self.idx[i], self.idx[j] = self.idx[j], self.idx[i]

    def insertion(self, a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and self.less(j, j - 1):
                self.swap(j, j - 1)
                j -= 1

    def sift_down(self, lo: int, hi: int, first: int) -> None:
        root = lo
        while True:
            child = 2 * root + 1
            if child >= hi:
                return
            if child + 1 < hi and self.less(first + child, first + child + 1):
                child += 1
            if not self.less(first + root, first + child):
                return
            self.swap(first + root, first + child)
            root = child

    def heap(self, a: int, b: int) -> None:
        hi = b - a
        for i in range((hi - 1) // 2, -1, -1):
            self.sift_down(i, hi, a)
        for i in range(hi - 1, -1, -1):
            self.swap(a, a + i)
            self.sift_down(0, i, a)

    def partition(self, a: int, b: int, pivot: int) -> tuple[int, bool]:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while i <= j and self.less(i, a):
            i += 1
        while i <= j and not self.less(j, a):
            j -= 1
        if i > j:
            self.swap(j, a)
            return j, True
        self.swap(i, j)
        i, j = i + 1, j - 1
        while True:
            while i <= j and self.less(i, a):
                i += 1
            while i <= j and not self.less(j, a):
                j -= 1
            if i > j:
                break
            self.swap(i, j)
            i, j = i + 1, j - 1
        self.swap(j, a)
        return j, False

    def partition_equal(self, a: int, b: int, pivot: int) -> int:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while True:
            while i <= j and not self.less(a, i):
                i += 1
            while i <= j and self.less(a, j):
                j -= 1
            if i > j:
                return i
            self.swap(i, j)
            i, j = i + 1, j - 1

    def partial_insertion(self, a: int, b: int) -> bool:
        i = a + 1
        for _ in range(5):  # at most five out-of-order pairs shifted
            while i < b and not self.less(i, i - 1):
                i += 1
            if i == b:
                return True
            if b - a < 50:  # no shifting on short ranges
                return False
            self.swap(i, i - 1)
            if i - a >= 2:
                for j in range(i - 1, 0, -1):
                    if not self.less(j, j - 1):
                        break
                    self.swap(j, j - 1)
            if b - i >= 2:
                for j in range(i + 1, b):
                    if not self.less(j, j - 1):
                        break
                    self.swap(j, j - 1)
        return False

    def break_patterns(self, a: int, b: int) -> None:
        length = b - a
        if length < 8:
            return
        state = length  # Go's xorshift, seeded with the length: the same swaps on every run
        modulus = 1 << length.bit_length()
        mask = (1 << 64) - 1
        for idx in range(a + (length // 4) * 2 - 1, a + (length // 4) * 2 + 2):
            state ^= (state << 13) & mask
            state ^= state >> 7
            state ^= (state << 17) & mask
            other = state & (modulus - 1)
            if other >= length:
                other -= length
            self.swap(idx, a + other)

    def median(self, a: int, b: int, c: int, swaps: list[int]) -> int:
        def order(x: int, y: int) -> tuple[int, int]:
            if self.less(y, x):
                swaps[0] += 1
                return y, x
            return x, y
        a, b = order(a, b)
        b, c = order(b, c)
        a, b = order(a, b)
        return b

    def choose_pivot(self, a: int, b: int) -> tuple[int, int]:
        """The pivot and a hint: 0 increasing, 1 decreasing, 2 unknown."""
        n = b - a
        swaps = [0]
        i, j, k = a + n // 4, a + n // 4 * 2, a + n // 4 * 3
        if n >= 8:
            if n >= 50:  # Tukey's ninther
                i = self.median(i - 1, i, i + 1, swaps)
                j = self.median(j - 1, j, j + 1, swaps)
                k = self.median(k - 1, k, k + 1, swaps)
            j = self.median(i, j, k, swaps)
        return j, 0 if swaps[0] == 0 else 1 if swaps[0] == 12 else 2

    def pdqsort(self, a: int, b: int, limit: int) -> None:
        balanced = partitioned = True
        while True:
            length = b - a
            if length <= 12:
                self.insertion(a, b)
                return
            if limit == 0:
                self.heap(a, b)
                return
            if not balanced:
                self.break_patterns(a, b)
                limit -= 1
            pivot, hint = self.choose_pivot(a, b)
            if hint == 1:
                i, j = a, b - 1
                while i < j:
                    self.swap(i, j)
                    i, j = i + 1, j - 1
                pivot = (b - 1) - (pivot - a)
                hint = 0
            if balanced and partitioned and hint == 0 and self.partial_insertion(a, b):
                return
            if a > 0 and not self.less(a - 1, pivot):
                a = self.partition_equal(a, b, pivot)
                continue
            mid, partitioned = self.partition(a, b, pivot)
            left, right = mid - a, b - mid
            if left < right:
                balanced = left >= length // 8
                self.pdqsort(a, mid, limit)
                a = mid + 1
            else:
                balanced = right >= length // 8
                self.pdqsort(mid + 1, b, limit)
                b = mid


def _native_order(keys: list[Any]) -> list[Any] | None:
    """Keys (all of one comparable type) as values Python orders as CEL does, or None: numbers, strings
    (code points: Go's byte order of UTF-8), bytes and bools as they are, durations and timestamps by
    their instant; None with a NaN (which no order places)."""
    first = keys[0]
    if isinstance(first, (Duration, Timestamp)):
        return [k.nanos for k in keys]
    if isinstance(first, float) and any(k != k for k in keys):
        return None
    return keys


def go_sort_indices(keys: list[Any]) -> list[int]:
    """The positions of `keys` (of one comparable type) in the order Go's sort.Slice puts them (by `<`
    on the keys). Where no two keys are equal the order is the sorted one whatever the algorithm, and
    Python's own sort gives it fast (a list up to the cost limit's million entries); only ties run Go's
    algorithm, which places them."""
    n = len(keys)
    native = _native_order(keys) if n else None
    if native is not None and len(set(native)) == n:
        return sorted(range(n), key=native.__getitem__)
    sorter = _GoSort(keys)
    sorter.pdqsort(0, n, n.bit_length())
    return sorter.idx


def sort_by_keys(target: Any, keys: Any) -> list[Any]:
    """@sortByAssociatedKeys (sortBy's expansion): the list in the order of its keys, which must be
    comparable and of one type."""
    items, order = _list(target), _list(keys)
    if len(items) != len(order):
        raise CelError("@sortByAssociatedKeys() expected a list of the same size as the associated keys list, "
                       f"but got {len(items)} and {len(order)} elements respectively")
    if not items:
        return items
    kind = type_name(order[0])
    if kind not in _COMPARABLE:
        raise CelError("list elements must be comparable")
    if any(type_name(k) != kind for k in order):
        raise CelError("list elements must have the same type")
    ranked = go_sort_indices(order)
    return [items[i] for i in ranked]


def distinct(target: Any) -> list[Any]:
    items = _list(target)
    out: list[Any] = []
    for x in items:
        if not any(_quiet_equal(x, y) for y in out):
            out.append(x)
    return out


def _quiet_equal(a: Any, b: Any) -> bool:
    try:
        return equal(a, b)
    except CelError:
        return False


def reverse(items: Any) -> Any:
    if isinstance(items, list):
        return items[::-1]
    raise CelError(NO_SUCH_OVERLOAD)


def _range_refused(n: int, minor: int) -> str | None:
    """cel-go 0.29 (1.37) refuses a negative size and one past its maximum; 0.26 gives [] for a negative."""
    if minor >= 37:
        if n < 0:
            return f"lists.range: size must be non-negative, got {n}"
        if n > MAX_RANGE_1_37:
            return f"lists.range: size {n} exceeds maximum allowed ({MAX_RANGE_1_37})"
    return None


def lists_range(size: Any, minor: int) -> list[Any]:
    n = _int(size)
    refused = _range_refused(n, minor)
    if refused is not None:
        raise CelError(refused)
    return list(range(max(n, 0)))


def first(target: Any) -> Optional:
    items = _list(target)
    return Optional(items[0]) if items else Optional()


def last(target: Any) -> Optional:
    items = _list(target)
    return Optional(items[-1]) if items else Optional()


def map_insert(target: Any, key: Any, *value: Any) -> dict[Any, Any]:
    """cel.@mapInsert of the two-variable comprehensions: a key and its value, or every entry of a map;
    a key already there is an error (types.InsertMapKeyValue)."""
    if not isinstance(target, dict):
        raise CelError(NO_SUCH_OVERLOAD)
    if value:
        entries = [(key, value[0])]
    elif isinstance(key, dict):
        entries = list(key.items())
    else:
        raise CelError(NO_SUCH_OVERLOAD)
    out = dict(target)
    for k, v in entries:
        if map_get(out, k) is not MISSING:
            raise CelError(f"insert failed: key {lib.to_string(k) if not isinstance(k, str) else k} already exists")
        out[k] = v
    return out


FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "cel.@mapInsert": map_insert,
    "slice": list_slice, "flatten": flatten, "sort": sort, "distinct": distinct, "reverse": reverse,
    "@sortByAssociatedKeys": sort_by_keys,
    "first": first, "last": last,
}


def _allocating(size: int, factor: float) -> int:
    """trackAllocatingListCall: the size times the factor (truncated), a call and a list allocation."""
    return min(int(float(size) * factor) + CALL_COST + LIST_CREATE_COST, (1 << 64) - 1)


def _self_compare(items: Any) -> int:
    """trackListSelfCompare: sort and distinct, O(n^2) comparisons (a tenth more for strings, bytes)."""
    if not isinstance(items, list) or not items:
        return _allocating(0, 2.0)
    factor = 2.0 + (STRING_FACTOR if isinstance(items[0], (str, bytes)) else 0.0)
    return _allocating(len(items) * len(items), factor)


def _slice_size(v: list[Any]) -> int:
    """The result's size; an error result is of size 1, as cel-go's actualSize of a value that is no list."""
    items, start, end = v
    if isinstance(items, list) and isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(items):
        return end - start
    return 1


def _flatten_cost(v: list[Any]) -> int:
    depth = v[1] if len(v) > 1 and isinstance(v[1], int) else 1
    return _allocating(len(v[0]) if isinstance(v[0], list) else 0, float(depth))


def _range_cost(v: list[Any], minor: int) -> int:
    n = v[0] if isinstance(v[0], int) else 0
    if _range_refused(n, minor) is not None:
        return _allocating(1, 1.0)
    return _allocating(max(n, 0), 1.0)


def cost_before(name: str, minor: int) -> Callable[[list[Any]], int] | None:
    """The call's runtime cost from its arguments alone (each equals cel-go's tracker on the result),
    charged before the call runs; None for a name this module does not cost."""
    if name == "slice":
        return lambda v: _allocating(_slice_size(v), 1.0)
    if name == "reverse":
        return lambda v: _allocating(len(v[0]) if isinstance(v[0], list) else 0, 1.0)
    if name == "flatten":
        return _flatten_cost
    if name in ("sort", "distinct"):
        return lambda v: _self_compare(v[0])
    if name == "@sortByAssociatedKeys":  # O(n^2) over the keys
        return lambda v: _self_compare(v[1])
    if name == "lists.range":
        return lambda v: _range_cost(v, minor)
    return None
