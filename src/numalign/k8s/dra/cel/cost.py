"""The API server's cost estimate of a checked expression: cel-go v0.26's checker/cost.go (paths,
local and iteration variables, computed sizes and entry sizes) with k8s.io/apiserver's
library.CostEstimator, cel-go's sets estimator and the DRA environment's size estimates. Unknown sizes
are cel-go's [0, 2^64-1], so a traversal of a string of unknown length is estimated at ~1.8e18 and the
selector is refused as too complex, as the API server refuses it. All arithmetic saturates."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from numalign.k8s.dra.cel import types as t
from numalign.k8s.dra.cel.ast import BYTES, STRING, Expr
from numalign.k8s.dra.cel.checker import Checked
from numalign.k8s.dra.cel.sizes import dra_size

U64: Final = (1 << 64) - 1
Est = tuple[int, int]
UNKNOWN: Final[Est] = (0, U64)
ONE: Final[Est] = (1, 1)
ZERO: Final[Est] = (0, 0)
STRING_FACTOR: Final = 0.1
REGEX_FACTOR: Final = 0.25
_ACCUMULATORS: Final = frozenset({"@result", "__result__"})


def _add(a: Est, b: Est) -> Est:
    return min(a[0] + b[0], U64), min(a[1] + b[1], U64)


def _mul(a: Est, b: Est) -> Est:
    return min(a[0] * b[0], U64), min(a[1] * b[1], U64)


def _factor(x: int, f: float) -> int:
    xf = float(x)
    if xf > 0 and f > 0 and xf > U64 / f:
        return U64
    c = math.ceil(xf * f)
    return U64 if c >= 2.0 ** 64 else int(c)


def _by_factor(a: Est, f: float) -> Est:
    return _factor(a[0], f), _factor(a[1], f)


def _union(a: Est, b: Est) -> Est:
    return min(a[0], b[0]), max(a[1], b[1])


def _is_scalar(ty: t.Type) -> bool:
    if ty.kind in ("bool", "double", "int", "uint"):
        return True
    if ty.kind == "struct" and ty.name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        return True
    if ty.kind == "opaque" and ty.name == "optional_type":
        return _is_scalar(ty.params[0])
    return False


@dataclass(frozen=True)
class Entry:
    """entrySizeEstimate: a container's kind and the sizes of its keys (indices) and values."""

    container: str
    key: Est
    val: Est

    def union(self, other: Entry | None) -> Entry | None:
        if other is None:
            return None
        return Entry(self.container, _union(self.key, other.key), _union(self.val, other.val))


@dataclass(frozen=True)
class Local:
    path: list[str]
    size: Est | None
    entry: Entry | None


class Coster:
    def __init__(self, checked: Checked, minor: int) -> None:
        self.c = checked
        self.minor = minor
        self.sizes: dict[int, Est] = {}
        self.entries: dict[int, Entry] = {}
        self.paths: dict[int, list[str]] = {}
        self.locals: dict[str, list[Local]] = {}

    # ---- bookkeeping ---------------------------------------------------------------------------

    def type(self, e: Expr) -> t.Type:
        return self.c.types.get(e.id, t.DYN)

    def local(self, name: str) -> Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    def push(self, name: str, local: Local) -> None:
        self.locals.setdefault(name, []).append(local)

    def pop(self, name: str) -> None:
        stack = self.locals.get(name)
        if stack:
            stack.pop()

    def path(self, e: Expr) -> list[str]:
        if e.kind == "ident":
            v = self.local(e.name)
            if v is not None:
                return list(v.path)
        return list(self.paths.get(e.id, []))

    def push_local(self, name: str, e: Expr) -> None:
        self.push(name, Local(self.path(e), self.compute_size(e), self.entry(e)))

    def push_single(self, name: str, rng: Expr) -> None:
        entry = self.entry(rng)
        container = entry.container if entry is not None else self.type(rng).kind
        size = entry.key if entry is not None else None
        sub = "@keys"
        if container == "list":
            size = entry.val if entry is not None else None
            sub = "@items"
        self.push(name, Local([*self.path(rng), sub], size, None))

    def push_key(self, name: str, rng: Expr) -> None:
        entry = self.entry(rng)
        container = entry.container if entry is not None else self.type(rng).kind
        sub = "@indices" if container == "list" else "@keys"
        self.push(name, Local([*self.path(rng), sub], entry.key if entry is not None else None, None))

    def push_value(self, name: str, rng: Expr) -> None:
        entry = self.entry(rng)
        container = entry.container if entry is not None else self.type(rng).kind
        sub = "@items" if container == "list" else "@values"
        self.push(name, Local([*self.path(rng), sub], entry.val if entry is not None else None, None))

    def entry(self, e: Expr) -> Entry | None:
        found = self.entries.get(e.id)
        if found is not None:
            return found
        if e.kind == "ident":
            v = self.local(e.name)
            if v is not None:
                return v.entry
        return None

    # ---- sizes ---------------------------------------------------------------------------------

    def compute_size(self, e: Expr) -> Est | None:
        found = self.sizes.get(e.id)
        if found is not None:
            return found
        if e.kind == "lit":
            if e.lit_kind in (STRING, BYTES):
                return len(e.value), len(e.value)
            return ONE
        if e.kind == "list":
            return len(e.args), len(e.args)
        if e.kind == "map":
            return len(e.entries), len(e.entries)
        estimated = dra_size(self.path(e))
        if estimated is not None:
            self.sizes[e.id] = estimated
            return estimated
        if _is_scalar(self.type(e)):
            return ONE
        if e.kind == "ident":
            v = self.local(e.name)
            if v is not None and v.size is not None:
                return v.size
        return None

    def size(self, e: Expr) -> Est:
        found = self.compute_size(e)
        return found if found is not None else UNKNOWN

    def node_size(self, e: Expr) -> Est:
        """library.CostEstimator.sizeEstimate of an AST node (its path leaves out accumulators)."""
        found = self.compute_size(e)
        if found is not None:
            return found
        path = self.path(e)
        if path and path[0] in _ACCUMULATORS:
            return UNKNOWN
        estimated = dra_size(path)
        return estimated if estimated is not None else UNKNOWN

    def element_size(self, target: Expr) -> Est | None:
        """The size of a list's element (listElementNode), or None when the target is no list."""
        ty = self.type(target)
        if not ty.params:
            return None
        path = self.path(target)
        if path and path[0] not in _ACCUMULATORS:
            estimated = dra_size([*path, "@items"])
            if estimated is not None:
                return estimated
        return ONE if _is_scalar(ty.params[0]) else UNKNOWN

    # ---- costs ---------------------------------------------------------------------------------

    def cost(self, e: Expr) -> Est:
        k = e.kind
        if k == "lit":
            return ZERO
        if k == "ident":
            v = self.local(e.name)
            self.paths[e.id] = list(v.path) if v is not None else [e.name]
            return ONE
        if k == "select":
            return self._select(e)
        if k == "call":
            return self._call(e)
        if k == "list":
            return self._list(e)
        if k == "map":
            return self._map(e)
        if k == "struct":
            total = (40, 40)
            for _, value, _ in e.entries:
                total = _add(total, self.cost(value))
            return total
        if k == "comp":
            if self._is_bind(e):
                return self._bind(e)
            return self._comprehension(e)
        return ZERO

    def _select(self, e: Expr) -> Est:
        assert e.operand is not None
        if e.test_only:
            return self.cost(e.operand)  # has() costs nothing of its own (PresenceTestHasCost(false))
        total = self.cost(e.operand)
        if self.type(e.operand).kind in ("map", "struct", "param"):
            total = _add(total, ONE)
        self.paths[e.id] = [*self.path(e.operand), e.name]
        return total

    def _list(self, e: Expr) -> Est:
        total = ZERO
        item = (U64, 0) if e.args else (0, 0)
        for x in e.args:
            total = _add(total, self.cost(x))
            item = _union(item, self.size(x))
        self.entries[e.id] = Entry("list", ONE, item)
        return _add(total, (10, 10))

    def _map(self, e: Expr) -> Est:
        total = ZERO
        keys = (U64, 0) if e.entries else (0, 0)
        vals = (U64, 0) if e.entries else (0, 0)
        for key, value, _ in e.entries:
            total = _add(_add(total, self.cost(key)), self.cost(value))
            keys = _union(keys, self.size(key))
            vals = _union(vals, self.size(value))
        self.entries[e.id] = Entry("map", keys, vals)
        return _add(total, (30, 30))

    def _call(self, e: Expr) -> Est:
        name = self.c.functions.get(e.id, e.name)
        if name == "dyn" and e.args:
            arg_cost = self.cost(e.args[0])
            arg_size = self.compute_size(e.args[0])
            if arg_size is not None:
                self.sizes[e.id] = arg_size
            entry = self.entry(e.args[0])
            if entry is not None:
                self.entries[e.id] = entry
            return _add(ONE, arg_cost)
        args = e.args
        arg_costs = [self.cost(a) for a in args]
        ids = self.c.overloads.get(e.id)
        if not ids:
            return ZERO
        total = ZERO
        target = e.operand if e.operand is not None and "." not in name else None
        if target is not None:
            total = _add(total, self.cost(target))
        fn: Est = (U64, 0)
        size: Est | None = None
        for oid in ids:
            est, rsize = self._function(e, name, oid, target, args, arg_costs)
            fn = _union(fn, est)
            if rsize is not None:
                size = rsize if size is None else _union(size, rsize)
            if oid in ("index_list", "index_map") and args:
                entry = self.entry(args[0])
                size = entry.val if entry is not None else None
                self.paths[e.id] = [*self.path(args[0]), "@items" if oid == "index_list" else "@values"]
            if size is None:
                size = self.compute_size(e)
        if size is not None:
            self.sizes[e.id] = size
        return _add(total, fn)

    def _function(self, e: Expr, name: str, oid: str, target: Expr | None, args: list[Expr],
                  arg_costs: list[Est]) -> tuple[Est, Est | None]:
        arg_sum = ZERO
        for c in arg_costs:
            arg_sum = _add(arg_sum, c)
        if oid in _SETS and len(args) == 2:
            est = _add(_by_factor(_mul(self.node_size(args[0]), self.node_size(args[1])), _SETS[oid]), ONE)
            return _add(est, arg_sum), None
        ext = self._lists(oid, target, args) if target is not None or oid == "lists_range" else None
        if ext is not None:
            return _add(ext[0], arg_sum), ext[1]
        k8s = self._kubernetes(name, oid, target, args)
        if k8s is not None:
            return _add(k8s[0], arg_sum), k8s[1]
        if oid == "string_format" and target is not None:
            return _add(_by_factor(self.size(target), STRING_FACTOR), arg_sum), None
        if oid == "string_to_bytes" and args:
            sz = self.size(args[0])
            return _add(_by_factor(sz, STRING_FACTOR), arg_sum), (sz[0], min(sz[1] * 4, U64))
        if oid == "bytes_to_string" and args:
            sz = self.size(args[0])
            return _add(_by_factor(sz, STRING_FACTOR), arg_sum), (sz[0] // 4, sz[1])
        if oid == "strings_quote" and args:
            sz = self.size(args[0])
            return _add(_by_factor(sz, STRING_FACTOR), arg_sum), (sz[0] + 2, min(sz[1] * 2 + 2, U64))
        if oid in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return _add(_by_factor(self.size(args[0]), STRING_FACTOR), arg_sum), None
        if oid == "in_list" and len(args) == 2:
            return _add(self.size(args[1]), arg_sum), None
        if oid == "matches_string" and target is not None and len(args) == 1:
            str_cost = _by_factor(_add(self.size(target), ONE), STRING_FACTOR)
            return _add(_mul(str_cost, _by_factor(self.size(args[0]), REGEX_FACTOR)), arg_sum), None
        if oid == "contains_string" and target is not None and len(args) == 1:
            return _add(_mul(_by_factor(self.size(target), STRING_FACTOR),
                             _by_factor(self.size(args[0]), STRING_FACTOR)), arg_sum), None
        if oid in ("logical_or", "logical_and"):
            lhs, rhs = arg_costs
            return (lhs[0], _add(lhs, rhs)[1]), None
        if oid == "conditional":
            size = _union(self.size(args[1]), self.size(args[2]))
            a, b = self.entry(args[1]), self.entry(args[2])
            joined = a.union(b) if a is not None else None
            if joined is not None:
                self.entries[e.id] = joined
            return _add(arg_costs[0], _union(arg_costs[1], arg_costs[2])), size
        if oid in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            total = _add(self.size(args[0]), self.size(args[1]))
            a, b = self.entry(args[0]), self.entry(args[1])
            joined = a.union(b) if a is not None else None
            if joined is not None:
                self.entries[e.id] = joined
            if oid == "add_list":
                return _add(ONE, arg_sum), total
            return _add(_by_factor(total, STRING_FACTOR), arg_sum), total
        if oid in _ORDERED_BY_SIZE and len(args) == 2:
            lhs, rhs = self.size(args[0]), self.size(args[1])
            smallest = min(lhs[1], rhs[1])
            return _add(_by_factor((1 if smallest > 0 else 0, smallest), STRING_FACTOR), arg_sum), None
        return _add(ONE, arg_sum), None

    def _kubernetes(self, name: str, oid: str, target: Expr | None, args: list[Expr]) -> tuple[Est, Est | None] | None:
        """The DRA estimator's `includes`, then library.CostEstimator.EstimateCallCost."""
        if name == "includes" and target is not None and self.minor == 36:
            return _mul((0, MAX_LIST_VALUES), ONE), None
        traversals = ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes")
        if name in traversals and target is not None:
            el = self.element_size(target)
            if el is None and name == "includes":
                return _mul(self.node_size(target), ONE), None
            if el is not None:
                cost = ONE
                if self.type(target).params[0].kind in ("string", "bytes"):
                    cost = _add(cost, _by_factor(el, STRING_FACTOR))
                return _mul(self.node_size(target), cost), None
            return _by_factor(self.node_size(target), STRING_FACTOR), None
        if name == "url" and len(args) == 1:
            sz = self.node_size(args[0])
            return _by_factor(sz, STRING_FACTOR), sz
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            sz = self.node_size(target)
            return _by_factor(sz, STRING_FACTOR), sz
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace(self.node_size(target), self.node_size(args[0]), self.node_size(args[1]))
        if name == "split" and target is not None:
            sz = self.node_size(target)
            top = sz[1]
            if len(args) > 1 and args[1].kind == "lit" and args[1].lit_kind == "int":
                top = args[1].value % (1 << 64)
            return _by_factor(sz, 2 * STRING_FACTOR), (0, top)
        if name == "join" and target is not None:
            items = self.node_size(target)
            el = self.element_size(target)
            size = _mul(items, el) if el is not None else ZERO
            if args:
                seps = (max(items[0] - 1, 0), max(items[1] - 1, 0))
                size = _add(size, _mul(self.node_size(args[0]), seps))
            return _by_factor(size, STRING_FACTOR), size
        if name in ("find", "findAll") and target is not None and args:
            sz = self.node_size(target)
            str_cost = _by_factor(_add(sz, ONE), STRING_FACTOR)
            return _mul(str_cost, _by_factor(self.node_size(args[0]), REGEX_FACTOR)), (0, sz[1])
        if name in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver") and args:
            return _by_factor(self.node_size(args[0]), STRING_FACTOR), None
        if name == "ip.isCanonical" and args:
            return _by_factor(self.node_size(args[0]), 2 * STRING_FACTOR), None
        if name == "ip" and args:
            return _by_factor(self.node_size(args[0]), STRING_FACTOR), None
        if name in ("containsIP", "containsCIDR") and args:
            # two address byte lists of 4 or 16 bytes compared; containsCIDR also masks and compares
            # the bits; a string operand is parsed first
            addr: Est = (4, 16)
            est = _by_factor(_add(addr, addr), STRING_FACTOR)
            if name == "containsCIDR":
                est = _add(_add(est, _by_factor(addr, STRING_FACTOR)), ONE)
            if oid in ("cidr_contains_ip_string", "cidr_contains_cidr_string"):
                est = _add(est, _by_factor(self.node_size(args[0]), STRING_FACTOR))
            return est, None
        if name in ("family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
                    "isGlobalUnicast", "masked", "prefixLength"):
            return ONE, None
        if name in ("sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
                    "compareTo", "add", "sub", "major", "minor", "patch", "getScheme", "getHostname", "getHost",
                    "getPort", "getEscapedPath", "getQuery"):
            return ONE, None
        if name == "_==_" and len(args) == 2:
            lhs, rhs = self.type(args[0]), self.type(args[1])
            if t.exact(lhs, rhs) and lhs.name in _UNIT_EQUALITY:
                return ONE, None
            if t.exact(lhs, rhs) and lhs.name == t.URL.name:
                # A traversal of the right side's size, as upstream (which sizes both sides by the right one)
                right = self.compute_size(args[1])
                return _by_factor((1, right[1] if right is not None else 1), STRING_FACTOR), None
        return None

    def _lists(self, oid: str, target: Expr | None, args: list[Expr]) -> tuple[Est, Est] | None:
        """cel-go's lists extension (v3) estimators: a call and a list allocation, plus the size of the
        result (slice, reverse, lists.range), of the input times the depth (flatten) or of the input
        squared (sort, distinct: O(n^2) comparisons, a tenth more for strings and bytes)."""
        if oid == "lists_range" and len(args) == 1:
            n = _int_literal(args[0], U64)
            return _allocating(1.0, (n, n))
        if target is None:
            return None
        sz = self.node_size(target)
        if oid == "list_slice" and len(args) == 2:
            start, end = _int_literal(args[0], 0), _int_literal(args[1], sz[1])
            n = (end - start) % (1 << 64)  # uint64 arithmetic, as upstream
            return _allocating(1.0, (n, n))
        if oid == "list_reverse" and not args:
            return _allocating(1.0, sz)
        if oid in ("list_flatten", "list_flatten_int") and len(args) <= 1:
            depth = _int_literal(args[0], U64) if args else 1
            return _allocating(float(depth), sz)
        if oid == "list_distinct" and not args:
            return _allocating(2.0, _mul(sz, sz))
        if oid.endswith("_sort") and oid.startswith("list_") and not args:
            factor = 2.0 + (STRING_FACTOR if oid in ("list_string_sort", "list_bytes_sort") else 0.0)
            return _allocating(factor, _mul(sz, sz))
        if oid.endswith("_sortByAssociatedKeys") and len(args) == 1:  # the keys' size, squared
            keys = self.node_size(args[0])
            factor = 2.0 + (STRING_FACTOR if oid.startswith(("list_string_", "list_bytes_")) else 0.0)
            return _allocating(factor, _mul(keys, keys))
        return None

    @staticmethod
    def _replace(sz: Est, old: Est, new: Est) -> tuple[Est, Est]:
        count_max = retained_max = 0
        if old[0] == 0:
            count_max = sz[1] + 1 if sz[1] < U64 else sz[1]
            retained_max = sz[1]
        elif new[1] <= old[0]:
            retained_max = sz[1]
        else:
            count_max = min(math.ceil(float(sz[1]) / float(old[0])), U64)
        count_min = retained_min = 0
        if old[1] == 0:
            count_min = sz[0] + 1 if sz[0] < U64 else sz[0]
            retained_min = sz[0]
        elif old[1] <= new[0]:
            retained_min = sz[0]
        else:
            count_min = min(math.ceil(float(sz[0]) / float(old[1])), U64)
        size = _add(_mul((count_min, count_max), new), (retained_min, retained_max))
        return _by_factor(sz, 2 * STRING_FACTOR), size

    # ---- comprehensions --------------------------------------------------------------------------

    @staticmethod
    def _is_bind(e: Expr) -> bool:
        rng, cond = e.iter_range, e.loop_cond
        return (rng is not None and rng.kind == "list" and not rng.args and cond is not None
                and cond.kind == "lit" and cond.value is False and e.accu_var not in _ACCUMULATORS)

    def _bind(self, e: Expr) -> Est:
        assert e.iter_range and e.accu_init and e.result
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        self.push_local(e.accu_var, e.accu_init)
        total = _add(total, self.cost(e.result))
        self.pop(e.accu_var)
        size = self.compute_size(e.result)
        if size is not None:
            self.sizes[e.id] = size
        entry = self.entry(e.result)
        if entry is not None:
            self.entries[e.id] = entry
        return total

    def _comprehension(self, e: Expr) -> Est:
        assert e.iter_range and e.accu_init and e.loop_cond and e.loop_step and e.result
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        self.push_local(e.accu_var, e.accu_init)
        if e.iter_var2:
            self.push_key(e.iter_var, e.iter_range)
            self.push_value(e.iter_var2, e.iter_range)
        else:
            self.push_single(e.iter_var, e.iter_range)
        loop = self.cost(e.loop_cond)
        step = self.cost(e.loop_step)
        self.pop(e.iter_var)
        if e.iter_var2:
            self.pop(e.iter_var2)
        total = _add(total, self.cost(e.result))
        self.pop(e.accu_var)
        count = self.size(e.iter_range)
        total = _add(total, _mul(count, _add(step, loop)))
        if e.accu_init.kind == "lit":
            size = self.compute_size(e.accu_init)
            if size is not None:
                self.sizes[e.id] = size
        elif e.accu_init.kind in ("list", "map"):
            self.sizes[e.id] = count
            step_entry = self.entry(e.loop_step)
            if step_entry is not None:
                self.entries[e.id] = step_entry
        return total


MAX_LIST_VALUES: Final = 48  # ResourceSliceMaxAttributeValuesPerDevice
_SETS: Final = {"list_sets_contains_list": 1.0, "list_sets_intersects_list": 1.0, "list_sets_equivalent_list": 2.0}
_ORDERED_BY_SIZE: Final = frozenset({
    "less_string", "greater_string", "less_equals_string", "greater_equals_string", "less_bytes", "greater_bytes",
    "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals"})
_UNIT_EQUALITY: Final = frozenset({"kubernetes.Quantity", "kubernetes.Semver", "net.IP", "net.CIDR"})


def _int_literal(e: Expr, default: int) -> int:
    """nodeAsIntValue: an int literal (a negative one as 0), else the default."""
    if e.kind == "lit" and e.lit_kind == "int":
        return max(int(e.value), 0)
    return default


def _allocating(factor: float, size: Est) -> tuple[Est, Est]:
    """estimateAllocatingListCall: the size times the factor, a call (1) and a list allocation (10)."""
    return _add(_by_factor(size, factor), (11, 11)), size


def estimate(root: Expr, checked: Checked, minor: int) -> int:
    return Coster(checked, minor).cost(root)[1]
