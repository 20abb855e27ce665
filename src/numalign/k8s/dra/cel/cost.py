"""The API server's cost estimate of a checked expression: cel-go's checker/cost.go with the
Kubernetes library's EstimateCallCost and the DRA environment's size estimates. Unknown sizes are
cel-go's [0, 2^64-1], so a traversal of a string of unknown length is estimated at ~1.8e18 and such a
selector is refused as too complex, exactly as the API server refuses it. All arithmetic saturates."""

from __future__ import annotations

import math
from typing import Final

from numalign.k8s.dra.cel import types as t
from numalign.k8s.dra.cel.ast import BYTES, STRING, Expr
from numalign.k8s.dra.cel.checker import Checked
from numalign.k8s.dra.cel.decls import MAX_ATTRIBUTES

U64: Final = (1 << 64) - 1
Est = tuple[int, int]
UNKNOWN: Final[Est] = (0, U64)
STRING_FACTOR: Final = 0.1
REGEX_FACTOR: Final = 0.25


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


ONE: Final[Est] = (1, 1)
_SCALARS: Final = frozenset({"bool", "int", "uint", "double", "google.protobuf.Timestamp", "google.protobuf.Duration"})
_K8S_OPAQUE: Final = frozenset({"kubernetes.Quantity", "kubernetes.Semver", "kubernetes.URL", "net.IP", "net.CIDR"})
ZERO: Final[Est] = (0, 0)


MAX_DRIVER_LENGTH: Final = 63  # DriverNameMaxLength
MAX_DOMAIN_LENGTH: Final = 63
MAX_ID_LENGTH: Final = 32  # an attribute or capacity name (a C identifier of at most 32 characters)
MAX_ATTRIBUTE_VALUE_LENGTH: Final = 64  # DeviceAttributeMaxValueLength
_DEVICE_FIELD_SIZES: Final[dict[str, Est]] = {"driver": (1, MAX_DRIVER_LENGTH), "attributes": (0, MAX_ATTRIBUTES),
                                               "capacity": (0, MAX_ATTRIBUTES)}


class Coster:
    def __init__(self, checked: Checked) -> None:
        self.c = checked
        self.sizes: dict[int, Est] = {}
        self.paths: dict[int, list[str]] = {}
        self.ranges: list[tuple[str, Expr]] = []
        self.locals: list[tuple[str, Expr]] = []

    def type(self, e: Expr) -> t.Type:
        return self.c.types.get(e.id, t.DYN)

    # ---- sizes ---------------------------------------------------------------------------------

    def size(self, e: Expr) -> Est:
        found = self.sizes.get(e.id)
        if found is not None:
            return found
        if e.kind == "lit":
            if e.lit_kind == STRING:
                return len(e.value), len(e.value)
            if e.lit_kind == BYTES:
                return len(e.value), len(e.value)
            return ONE
        if e.kind == "list":
            return len(e.args), len(e.args)
        if e.kind == "map":
            return len(e.entries), len(e.entries)
        estimated = self.estimate_size(e)
        if estimated is not None:
            return estimated
        ty = self.type(e)
        if ty.kind in _SCALARS or ty.name in _SCALARS:
            return ONE
        return UNKNOWN

    def estimate_size(self, e: Expr) -> Est | None:
        """The DRA environment's sizeEstimator: the attribute and capacity maps are bounded."""
        path = self.paths.get(e.id)
        if not path or path[0] != "device":
            return None
        if len(path) == 2:
            return _DEVICE_FIELD_SIZES.get(path[1])
        if len(path) == 3 and path[1] in ("attributes", "capacity"):
            return (0, MAX_DOMAIN_LENGTH) if path[2] == "@keys" else (0, MAX_ATTRIBUTES)
        if len(path) == 4 and path[1] == "attributes" and path[2] == "@values":
            return (0, MAX_ID_LENGTH) if path[3] == "@keys" else (0, MAX_ATTRIBUTE_VALUE_LENGTH)
        if len(path) == 4 and path[1] == "capacity" and path[2] == "@values" and path[3] == "@keys":
            return 0, MAX_ID_LENGTH
        return None

    # ---- costs ---------------------------------------------------------------------------------

    def cost(self, e: Expr) -> Est:
        k = e.kind
        if k == "lit":
            return ZERO
        if k == "ident":
            return self._ident(e)
        if k == "select":
            return self._select(e)
        if k == "call":
            return self._call(e)
        if k == "list":
            total = (10, 10)
            for x in e.args:
                total = _add(total, self.cost(x))
            return total
        if k == "map":
            total = (30, 30)
            for key, value, _ in e.entries:
                total = _add(_add(total, self.cost(key)), self.cost(value))
            return total
        if k == "comp":
            return self._comprehension(e)
        return ZERO

    def _ident(self, e: Expr) -> Est:
        for name, rng in reversed(self.locals):
            if name == e.name:
                if rng.id in self.paths:
                    self.paths[e.id] = list(self.paths[rng.id])
                if rng.id in self.sizes or rng.kind in ("lit", "list", "map"):
                    self.sizes[e.id] = self.size(rng)
                return ONE
        for name, rng in reversed(self.ranges):
            if name == e.name:
                rt = self.type(rng)
                base = self.paths.get(rng.id)
                if base is not None and rt.kind == "list":
                    self.paths[e.id] = [*base, "@items"]
                elif base is not None and rt.kind == "map":
                    self.paths[e.id] = [*base, "@keys"]
                return ONE
        self.paths[e.id] = [e.name]
        return ONE

    def _select(self, e: Expr) -> Est:
        assert e.operand is not None
        if e.test_only:
            return self.cost(e.operand)
        total = self.cost(e.operand)
        if self.type(e.operand).kind in ("map", "struct", "param"):
            total = _add(total, ONE)
        base = self.paths.get(e.operand.id)
        if base is not None:
            self.paths[e.id] = [*base, e.name]
        return total

    def _call(self, e: Expr) -> Est:
        args = e.args
        arg_costs = [self.cost(a) for a in args]
        ids = self.c.overloads.get(e.id)
        if not ids:
            return ZERO
        total = ZERO
        name = self.c.functions.get(e.id, e.name)
        target = e.operand if e.operand is not None and "." not in name else None
        if target is not None:
            total = _add(total, self.cost(target))
        fn: Est = (U64, 0)
        size: Est | None = None
        for oid in ids:
            est, rsize = self._function(name, oid, target, args, arg_costs)
            fn = _union(fn, est)
            if rsize is not None:
                size = rsize if size is None else _union(size, rsize)
            if oid == "index_list" and args:
                if args[0].id in self.paths:
                    self.paths[e.id] = [*self.paths[args[0].id], "@items"]
            elif oid == "index_map" and args and args[0].id in self.paths:
                self.paths[e.id] = [*self.paths[args[0].id], "@values"]
        if size is not None:
            self.sizes[e.id] = size
        return _add(total, fn)

    def _function(self, name: str, oid: str, target: Expr | None, args: list[Expr],
                  arg_costs: list[Est]) -> tuple[Est, Est | None]:
        arg_sum = ZERO
        for c in arg_costs:
            arg_sum = _add(arg_sum, c)
        k8s = self._kubernetes(name, target, args)
        if k8s is not None:
            return _add(k8s[0], arg_sum), k8s[1]
        if oid in ("starts_with_string", "ends_with_string") and args:
            return _add(_by_factor(self.size(args[0]), STRING_FACTOR), arg_sum), None
        if oid in ("string_to_bytes",) and args:
            sz = self.size(args[0])
            return _add(_by_factor(sz, STRING_FACTOR), arg_sum), (sz[0], min(sz[1] * 4, U64))
        if oid in ("bytes_to_string",) and args:
            sz = self.size(args[0])
            return _add(_by_factor(sz, STRING_FACTOR), arg_sum), (sz[0] // 4, sz[1])
        if oid == "strings_quote" and args:
            sz = self.size(args[0])
            return _add(_by_factor(sz, STRING_FACTOR), arg_sum), (sz[0] + 2, min(sz[1] * 2 + 2, U64))
        if oid == "string_format" and target is not None:
            return _add(_by_factor(self.size(target), STRING_FACTOR), arg_sum), None
        if oid == "in_list" and len(args) == 2:
            return _add(self.size(args[1]), arg_sum), None
        if oid in ("matches", "matches_string"):
            s, p = (target, args[0]) if target is not None else (args[0], args[1])
            str_cost = _by_factor(_add(self.size(s), ONE), STRING_FACTOR)
            return _add(_mul(str_cost, _by_factor(self.size(p), REGEX_FACTOR)), arg_sum), None
        if oid == "contains_string" and target is not None:
            return _add(_mul(_by_factor(self.size(target), STRING_FACTOR),
                             _by_factor(self.size(args[0]), STRING_FACTOR)), arg_sum), None
        if oid in ("logical_or", "logical_and"):
            lhs, rhs = arg_costs
            return (lhs[0], _add(lhs, rhs)[1]), None
        if oid == "conditional":
            sz = _union(self.size(args[1]), self.size(args[2]))
            return _add(arg_costs[0], _union(arg_costs[1], arg_costs[2])), sz
        if oid in ("add_string", "add_bytes", "add_list"):
            sz = _add(self.size(args[0]), self.size(args[1]))
            if oid == "add_list":
                return _add(ONE, arg_sum), sz
            return _add(_by_factor(sz, STRING_FACTOR), arg_sum), sz
        if oid in ("less_string", "greater_string", "less_equals_string", "greater_equals_string", "less_bytes",
                   "greater_bytes", "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals"):
            lhs, rhs = self.size(args[0]), self.size(args[1])
            smallest = min(lhs[1], rhs[1])
            low = 1 if smallest > 0 else 0
            return _add(_by_factor((low, smallest), STRING_FACTOR), arg_sum), None
        return _add(ONE, arg_sum), None

    def _kubernetes(self, name: str, target: Expr | None, args: list[Expr]) -> tuple[Est, Est | None] | None:
        """library.CostEstimator.EstimateCallCost."""
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target is not None:
            tt = self.type(target)
            if tt.kind == "list":
                el = ONE
                if tt.params[0].kind in ("string", "bytes"):
                    el = _add(el, _by_factor(UNKNOWN, STRING_FACTOR))
                return _mul(self.size(target), el), None
            return _by_factor(self.size(target), STRING_FACTOR), None
        if name == "url" and len(args) == 1:
            return _by_factor(self.size(args[0]), STRING_FACTOR), None
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            sz = self.size(target)
            return _by_factor(sz, STRING_FACTOR), sz
        if name == "replace" and target is not None and len(args) >= 2:
            sz = self.size(target)
            old, new = self.size(args[0]), self.size(args[1])
            # every occurrence of the old text replaced: at most size/old_min (all of it if 0) times
            if old[0] == 0:
                count = min(sz[1] + 1, U64)
                grown = min(sz[1] + count * new[1], U64)
            else:
                count = sz[1] // old[0]
                grown = min(sz[1] - count * old[0] + count * new[1], U64)
            return _by_factor(sz, 2 * STRING_FACTOR), (0, max(grown, sz[1]))
        if name == "split" and target is not None:
            sz = self.size(target)
            top = sz[1]
            if len(args) > 1 and args[1].kind == "lit" and args[1].lit_kind == "int":
                top = args[1].value
            return _by_factor(sz, 2 * STRING_FACTOR), (0, top)
        if name == "join" and target is not None:
            items = self.size(target)
            sep = self.size(args[0]) if args else ZERO
            total = _add(_mul(items, UNKNOWN), _mul(items, sep))
            return _by_factor(total, STRING_FACTOR), total
        if name in ("find", "findAll") and target is not None and args:
            sz = self.size(target)
            str_cost = _by_factor(_add(sz, ONE), STRING_FACTOR)
            regex_cost = _by_factor(self.size(args[0]), REGEX_FACTOR)
            return _mul(str_cost, regex_cost), (0, sz[1])
        if name in ("quantity", "isQuantity", "semver", "isSemver", "ip", "isIP", "isURL") and args:
            return _by_factor(self.size(args[0]), STRING_FACTOR), None
        if name in ("sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
                    "compareTo", "add", "sub", "major", "minor", "patch", "getScheme", "getHostname", "getHost",
                    "getPort", "getEscapedPath", "getQuery", "family", "isLoopback", "isUnspecified"):
            return ONE, None
        if name in ("_==_", "_!=_") and len(args) == 2 and self.type(args[0]).kind == "opaque" and \
                self.type(args[0]).name in _K8S_OPAQUE:
            return ONE, None
        if name in ("sets.contains", "sets.equivalent", "sets.intersects") and len(args) == 2:
            factor = 2.0 if name == "sets.equivalent" else 1.0
            return _add(_by_factor(_mul(self.size(args[0]), self.size(args[1])), factor), ONE), None
        return None

    def _comprehension(self, e: Expr) -> Est:
        assert e.iter_range and e.accu_init and e.loop_cond and e.loop_step and e.result
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        if e.iter_var == "#unused":  # cel.bind: the bound value behaves like a local variable
            self.locals.append((e.accu_var, e.accu_init))
            total = _add(total, self.cost(e.result))
            self.locals.pop()
            return total
        self.ranges.append((e.iter_var, e.iter_range))
        loop = self.cost(e.loop_cond)
        step = self.cost(e.loop_step)
        self.ranges.pop()
        total = _add(total, self.cost(e.result))
        count = self.size(e.iter_range)
        self.sizes[e.id] = count
        return _add(total, _mul(count, _add(step, loop)))


def estimate(root: Expr, checked: Checked) -> int:
    return Coster(checked).cost(root)[1]
