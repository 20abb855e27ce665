"""The evaluator: cel-go's semantics (errors as values that `&&`, `||`, the ternary and the macros'
accumulators may absorb, the left operand's error reported first) and its runtime cost tracking
(interpreter/runtimecost.go plus the Kubernetes library's CallCost), stopped by the cost limit the way
cel-go stops a program: "operation cancelled: actual cost limit exceeded"."""

from __future__ import annotations

import math
from typing import Any, Final

from numalign.k8s.dra.cel import library as lib
from numalign.k8s.dra.cel.ast import Expr
from numalign.k8s.dra.cel.decls import runtime_match
from numalign.k8s.dra.cel.types import Type
from numalign.k8s.dra.cel.values import (
    MISSING,
    NO_SUCH_OVERLOAD,
    CelError,
    CostLimitExceededError,
    DomainMap,
    Optional,
    TypeValue,
    equal,
    map_get,
    type_name,
)
from numalign.k8s.dra.semver import Semver
from numalign.k8s.quantity import Quantity

STRING_FACTOR: Final = 0.1
REGEX_FACTOR: Final = 0.25
_TYPE_IDENTS: Final = {"bool", "int", "uint", "double", "string", "bytes", "null_type", "list", "map", "type"}
_RELATIONS: Final = {"_<_": lambda c: c < 0, "_<=_": lambda c: c <= 0, "_>_": lambda c: c > 0,
                     "_>=_": lambda c: c >= 0}


def size_of(v: Any) -> int:
    """actualSize: the length of strings (code points), bytes, lists and maps; 1 otherwise."""
    if isinstance(v, (str, bytes, list, dict)):
        return len(v)
    return 1


def _ceil(x: float) -> int:
    return math.ceil(x)


def _traversal(v: Any) -> int:
    if isinstance(v, str):
        return _ceil(len(v.encode("utf-8", "surrogatepass")) * STRING_FACTOR)
    if isinstance(v, list):
        return sum(_traversal(x) for x in v)
    return 1


class Interpreter:
    def __init__(self, functions: dict[int, str], limit: int, minor: int,
                 guarded: dict[int, tuple[tuple[Type, ...], ...]]) -> None:
        self.functions = functions
        self.guarded = guarded
        self.limit = limit
        self.minor = minor
        self.cost = 0

    def charge(self, n: int) -> None:
        self.cost += n
        if self.cost > self.limit:
            raise CostLimitExceededError("operation cancelled: actual cost limit exceeded")

    def eval(self, e: Expr, scope: dict[str, Any]) -> Any:
        kind = e.kind
        if kind == "lit":
            return e.value
        if kind == "ident":
            self.charge(1)
            if e.name in scope:
                return scope[e.name]
            if e.name in _TYPE_IDENTS:
                return TypeValue(e.name)
            raise CelError(f"no such attribute: {e.name}")
        if kind == "select":
            return self._select(e, scope)
        if kind == "call":
            return self._call(e, scope)
        if kind == "list":
            items = []
            for i, x in enumerate(e.args):
                v = self.eval(x, scope)
                if i in e.optional_indices:
                    if isinstance(v, Optional) and v.present:
                        items.append(v.value)
                    continue
                items.append(v)
            if not all(x.kind == "lit" for x in e.args):
                self.charge(10)
            return items
        if kind == "map":
            out: dict[Any, Any] = {}
            for k, x, optional in e.entries:
                key = self.eval(k, scope)
                value = self.eval(x, scope)
                if map_get(out, key) is not MISSING:
                    raise CelError(f"insert failed: key {lib.to_string(key) if not isinstance(key, str) else key} "
                                   "already exists")
                if optional:
                    if isinstance(value, Optional) and value.present:
                        out[key] = value.value
                    continue
                out[key] = value
            self.charge(30)
            return out
        if kind == "comp":
            return self._comprehension(e, scope)
        raise CelError(f"unsupported expression kind {kind}")

    # ---- selection ------------------------------------------------------------------------------

    def _select(self, e: Expr, scope: dict[str, Any]) -> Any:
        assert e.operand is not None
        if e.test_only:
            # cel-go's test-only attribute: its qualifiers cost, the presence test itself does not
            # (PresenceTestHasCost(false)); the field tested is one more qualifier.
            target = self.eval(e.operand, scope)
            return _has_field(target, e.name)
        target = self.eval(e.operand, scope)
        self.charge(1)
        return _field(target, e.name)

    # ---- calls ----------------------------------------------------------------------------------

    def _call(self, e: Expr, scope: dict[str, Any]) -> Any:
        name = self.functions.get(e.id, e.name)
        args = e.args
        if name == "_&&_" or name == "_||_":
            return self._logical(name == "_&&_", args, scope)
        if name == "_?_:_":
            cond = self.eval(args[0], scope)
            if not isinstance(cond, bool):
                raise CelError(NO_SUCH_OVERLOAD)
            return self.eval(args[1] if cond else args[2], scope)
        if name == "@not_strictly_false":
            try:
                v = self.eval(args[0], scope)
            except CelError:
                v = True
            self.charge(1)
            return v if isinstance(v, bool) else True
        if name == "_?._":
            target = self.eval(args[0], scope)
            self.charge(1)
            return _optional_field(target, args[1].value)
        if name == "_[_]" or name == "_[?_]":
            target = self.eval(args[0], scope)
            key = self.eval(args[1], scope)
            self.charge(1)
            return _index(target, key, name == "_[?_]")
        values = []
        if e.operand is not None and not _qualified(name, e):
            values.append(self.eval(e.operand, scope))
        values.extend(self.eval(a, scope) for a in args)
        if name == "join":
            result = self._apply(name, values)
            self.charge(self._call_cost(name, values, result))
            return result
        guards = self.guarded.get(e.id)
        if guards and not any(len(g) == len(values) and all(runtime_match(d, v) for d, v in zip(g, values, strict=True))
                              for g in guards):
            raise CelError(f"no such overload: {name}({', '.join(type_name(v) for v in values)})")
        # The cost of every other call depends on its arguments only: charge it before the call, so
        # that a call over the limit never runs (cel-go charges right after; the answer is the same).
        self.charge(self._call_cost(name, values, None))
        return self._apply(name, values)

    def _logical(self, is_and: bool, args: list[Expr], scope: dict[str, Any]) -> Any:
        err: CelError | None = None
        for a in args:
            try:
                v = self.eval(a, scope)
            except CelError as exc:
                if err is None:
                    err = exc
                continue
            if isinstance(v, bool):
                if v is not is_and:
                    return v
            elif err is None:
                err = CelError(NO_SUCH_OVERLOAD)
        if err is not None:
            raise err
        return is_and

    def _apply(self, name: str, v: list[Any]) -> Any:
        if name == "_==_":
            return equal(v[0], v[1])
        if name == "_!=_":
            return not equal(v[0], v[1])
        if name in _RELATIONS:
            return _RELATIONS[name](lib.compare(v[0], v[1]))
        if name == "!_":
            if not isinstance(v[0], bool):
                raise CelError(NO_SUCH_OVERLOAD)
            return not v[0]
        if name == "_+_":
            return lib.add(v[0], v[1])
        if name in ("_-_", "_*_", "_/_", "_%_"):
            return lib.arith(name, v[0], v[1])
        if name == "-_":
            return lib.negate(v[0])
        if name == "@in":
            return _contains(v[1], v[0])
        if name == "size":
            if isinstance(v[0], (str, bytes, list, dict)):
                return len(v[0])
            raise CelError(NO_SUCH_OVERLOAD)
        if name == "includes":
            target, item = v
            if isinstance(target, list):
                for i, x in enumerate(target):
                    # 1.36's own `includes` refuses long lists; 1.37's (the list library's) does not
                    if i >= MAX_LIST_VALUES and self.minor == 36:
                        raise CelError(f"'includes' function cannot be applied to lists longer than "
                                       f"{MAX_LIST_VALUES} values")
                    if _quiet_equal(x, item):
                        return True
                return False
            return _quiet_equal(target, item)
        if name == "format":
            return _format(v[0], v[1])
        fn = lib.FUNCTIONS.get(name)
        if fn is None:
            raise CelError(f"no such overload: {name}")
        try:
            return fn(*v)
        except (TypeError, AttributeError):
            raise CelError(NO_SUCH_OVERLOAD) from None

    def _call_cost(self, name: str, v: list[Any], result: Any) -> int:
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") or (
                name == "includes" and self.minor >= 37):
            return _traversal(v[0])
        if name in ("url", "lowerAscii", "upperAscii", "substring", "trim"):
            return _ceil(size_of(v[0]) * STRING_FACTOR)
        if name in ("replace", "split"):
            return _ceil(size_of(v[0]) * 2 * STRING_FACTOR)
        if name == "join":
            return _ceil(size_of(result) * STRING_FACTOR)
        if name in ("find", "findAll", "matches"):
            return _ceil((1 + size_of(v[0])) * STRING_FACTOR) * _ceil(size_of(v[1]) * REGEX_FACTOR)
        if name in ("quantity", "isQuantity", "semver", "isSemver"):
            return _ceil(size_of(v[0]) * STRING_FACTOR)
        if name in ("sets.contains", "sets.equivalent", "sets.intersects"):
            return size_of(v[0]) * size_of(v[1]) * (2 if name == "sets.equivalent" else 1) + 1
        if name in ("startsWith", "endsWith", "strings.quote") or (name in ("bytes", "string") and
                                                                    isinstance(v[0], (str, bytes))):
            return _ceil(size_of(v[0]) * STRING_FACTOR)
        if name == "@in":
            return size_of(v[1]) if isinstance(v[1], list) else 1
        if name in ("_==_", "_!=_") or (name in _RELATIONS and isinstance(v[0], (str, bytes))):
            return _ceil(min(size_of(v[0]), size_of(v[1])) * STRING_FACTOR)
        if name == "_+_" and isinstance(v[0], (str, bytes)):
            return _ceil((size_of(v[0]) + size_of(v[1])) * STRING_FACTOR)
        if name == "contains":
            return _ceil(size_of(v[0]) * STRING_FACTOR) * _ceil(size_of(v[1]) * STRING_FACTOR)
        return 1

    # ---- comprehensions -------------------------------------------------------------------------

    def _comprehension(self, e: Expr, scope: dict[str, Any]) -> Any:
        assert e.iter_range and e.accu_init and e.loop_cond and e.loop_step and e.result
        rng = self.eval(e.iter_range, scope)
        accu = self.eval(e.accu_init, scope)
        if isinstance(rng, dict):
            items: list[Any] = list(rng.keys())
        elif isinstance(rng, list):
            items = rng
        else:
            raise CelError(f"got '{_go_type(rng)}', expected iterable type")
        inner = dict(scope)
        inner[e.accu_var] = accu
        for i, item in enumerate(items):
            if e.iter_var2:
                inner[e.iter_var] = i if isinstance(rng, list) else item
                inner[e.iter_var2] = item if isinstance(rng, list) else rng[item]
            else:
                inner[e.iter_var] = item
            cond = self.eval(e.loop_cond, inner)
            if cond is False:
                break
            if not isinstance(cond, bool):
                raise CelError(NO_SUCH_OVERLOAD)
            inner[e.accu_var] = self.eval(e.loop_step, inner)
        scope2 = dict(scope)
        scope2[e.accu_var] = inner[e.accu_var]
        return self.eval(e.result, scope2)


_GO_TYPES: Final = {"bool": "types.Bool", "int": "types.Int", "uint": "types.Uint", "double": "types.Double",
                    "string": "types.String", "bytes": "types.Bytes", "null_type": "types.Null",
                    "kubernetes.Semver": "cel.Semver", "kubernetes.Quantity": "cel.Quantity",
                    "google.protobuf.Timestamp": "types.Timestamp", "google.protobuf.Duration": "types.Duration",
                    "optional_type": "*types.Optional", "type": "*types.Type"}


def _go_type(v: Any) -> str:
    """The Go type of a cel-go value, as fold errors name it."""
    return _GO_TYPES.get(type_name(v), type_name(v))


MAX_LIST_VALUES: Final = 48  # ResourceSliceMaxAttributeValuesPerDevice


def _quiet_equal(a: Any, b: Any) -> bool:
    """`x.Equal(y) == true`: an error (semver against a string) is simply not equal."""
    try:
        return equal(a, b)
    except CelError:
        return False


def _qualified(name: str, e: Expr) -> bool:
    return "." in name and e.name != name


def _field(target: Any, name: str) -> Any:
    if isinstance(target, dict):
        v = target.get(name, MISSING)
        if v is MISSING:
            raise CelError(f"no such key: {name}")
        return v
    raise CelError("no such overload")


def _has_field(target: Any, name: str) -> bool:
    if isinstance(target, dict):
        return (name in target and not isinstance(target, DomainMap)) or name in target
    raise CelError(NO_SUCH_OVERLOAD)


def _optional_field(target: Any, name: str) -> Optional:
    if isinstance(target, Optional):
        if not target.present:
            return target
        target = target.value
    if isinstance(target, dict):
        v = target.get(name, MISSING)
        return Optional() if v is MISSING else Optional(v)
    raise CelError(NO_SUCH_OVERLOAD)


def _index(target: Any, key: Any, optional: bool) -> Any:
    if isinstance(target, Optional):
        if not target.present:
            return target
        return Optional(_index(target.value, key, True)) if False else _index(target.value, key, True)
    if isinstance(target, DomainMap):
        if not isinstance(key, str):
            raise CelError(NO_SUCH_OVERLOAD)
        v = target.get(key, MISSING)
        found = {} if v is MISSING else v
        return Optional(found) if optional else found
    if isinstance(target, dict):
        v = map_get(target, key)
        if v is MISSING:
            if optional:
                return Optional()
            raise CelError(f"no such key: {key if isinstance(key, str) else lib.to_string(key)}")
        return Optional(v) if optional else v
    if isinstance(target, list):
        if isinstance(key, float) and key.is_integer():
            key = int(key)
        if not isinstance(key, int) or isinstance(key, bool):
            raise CelError(NO_SUCH_OVERLOAD)
        if key < 0 or key >= len(target):
            if optional:
                return Optional()
            raise CelError(f"index out of bounds: {key}")
        return Optional(target[key]) if optional else target[key]
    raise CelError(NO_SUCH_OVERLOAD)


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, list):
        return any(equal(x, item) for x in container)
    if isinstance(container, dict):
        return map_get(container, item) is not MISSING
    raise CelError(NO_SUCH_OVERLOAD)


def _format(fmt: str, args: list[Any]) -> str:
    out: list[str] = []
    i = n = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        i += 1
        if i >= len(fmt):
            raise CelError("unexpected end of format string")
        verb = fmt[i]
        i += 1
        if verb == "%":
            out.append("%")
            continue
        if n >= len(args):
            raise CelError(f"index {n} out of range")
        v = args[n]
        n += 1
        if verb == "s":
            out.append(v if isinstance(v, str) else lib.to_string(v) if not isinstance(v, (list, dict)) else str(v))
        elif verb == "d":
            if isinstance(v, bool) or not isinstance(v, int):
                raise CelError("error during formatting: decimal clause can only be used on integers")
            out.append(str(int(v)))
        elif verb == "f":
            out.append(f"{float(v):.6f}")
        else:
            out.append(str(v))
    return "".join(out)


__all__ = ["Interpreter", "Quantity", "Semver", "size_of"]
