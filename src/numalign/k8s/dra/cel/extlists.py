"""cel-go's lists extension at version 3 (k8s.io/apiserver's base environment from 1.34): `slice`,
`flatten`, `sort`, `distinct`, `reverse`, `lists.range`, and the optional library's `first`/`last`,
with cel-go's error texts and costs (the extension's own estimators and trackers: a call of 1, a list
allocation of 10, and the result's or the input's size times a factor).

Bounded: every call's cost is known from its inputs before anything is built, and program.py charges
it first, so a call over the cost limit stops before it allocates (`lists.range(1000000000)` builds no
list; upstream would build it and then stop)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

from numalign.k8s.dra.cel import library as lib
from numalign.k8s.dra.cel.values import MISSING, NO_SUCH_OVERLOAD, CelError, Optional, equal, map_get, type_name

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
    # insertion order among equal keys: a stable sort (Go's sort.Slice is not; equal keys of one type
    # are equal values, so the answer is the same)
    return sorted(items, key=functools.cmp_to_key(lib.compare))


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
    if name == "lists.range":
        return lambda v: _range_cost(v, minor)
    return None
