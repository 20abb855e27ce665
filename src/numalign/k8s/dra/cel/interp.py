"""Evaluation's building blocks, with cel-go's semantics: the functions at run time (Interpreter.apply:
errors as values, Go's integer rules, the library functions), the selection, index and membership
rules, and each call's runtime cost (interpreter/runtimecost.go plus the Kubernetes library's
CallCost). program.py compiles an expression around them."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from numalign.k8s.dra.cel import extlists, net, strformat
from numalign.k8s.dra.cel import library as lib
from numalign.k8s.dra.cel.ast import Expr
from numalign.k8s.dra.cel.types import Type
from numalign.k8s.dra.cel.values import (
    MISSING,
    NO_SUCH_OVERLOAD,
    CelError,
    DomainMap,
    Optional,
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
    """traversalCost of the Kubernetes library: a tenth of a string's bytes, rounded down; the sum over
    a list's or a map's entries; 1 for anything else."""
    if isinstance(v, str):
        return int(len(v.encode("utf-8", "surrogatepass")) * STRING_FACTOR)
    if isinstance(v, bytes):
        return int(len(v) * STRING_FACTOR)
    if isinstance(v, list):
        return sum(_traversal(x) for x in v)
    if isinstance(v, dict):
        return sum(_traversal(k) + _traversal(x) for k, x in v.items())
    return 1


class Interpreter:
    """The functions' behaviour at run time (program.py compiles the expression around it)."""

    def __init__(self, functions: dict[int, str], limit: int, minor: int,
                 guarded: dict[int, tuple[tuple[Type, ...], ...]]) -> None:
        self.functions = functions
        self.guarded = guarded
        self.limit = limit
        self.minor = minor

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
            return strformat.format_call(v[0], v[1])
        if name == "lists.range":
            return extlists.lists_range(v[0], self.minor)
        if name in lib.TIME_ACCESSORS:
            return lib.time_accessor(name, v[0], tuple(v[1:]))
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise CelError(f"no such overload: {name}")
        try:
            return fn(*v)
        except (TypeError, AttributeError):
            raise CelError(NO_SUCH_OVERLOAD) from None


def cost_function(name: str, minor: int, member: bool = True, string_overload: bool = False,
                  overload: str | None = None) -> Callable[[list[Any], Any], int]:
    """The call cost of `name` (the Kubernetes library's CallCost, else cel-go's), chosen once per call
    site: the branches of Interpreter._call_cost, without re-testing the name on each evaluation."""
    if name in ("sort", "@sortByAssociatedKeys") and overload is None:
        # their trackers are per overload: over dyn elements (no one overload chosen) the call costs 1
        return lambda v, r: 1
    before = extlists.cost_before(name, minor) if minor >= 34 else None
    if before is not None:  # the lists extension: known from the arguments, charged before the call
        return lambda v, r: before(v)
    if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") or (name == "includes" and minor >= 37):
        return lambda v, r: _traversal(v[0])
    if name in ("startsWith", "endsWith") and minor >= 37:  # cel-go 0.29: the prefix's size, not the string's
        return lambda v, r: _ceil(size_of(v[1]) * STRING_FACTOR)
    if name == "matches" and not member and minor < 37:  # cel-go 0.26 costs the global form as O(1)
        return lambda v, r: 1
    if name in ("url", "lowerAscii", "upperAscii", "substring", "trim", "quantity", "isQuantity", "semver",
                "isSemver", "startsWith", "endsWith", "strings.quote", "format"):  # format: its format string
        return lambda v, r: _ceil(size_of(v[0]) * STRING_FACTOR)
    if name in ("cidr", "isIP", "isCIDR") or (name == "ip" and not member):  # parsing: a string traversal
        return lambda v, r: _ceil(size_of(v[0]) * STRING_FACTOR)
    if name in ("containsIP", "containsCIDR"):
        # comparing address bytes up to the prefix (twice the CIDR's size), the inner CIDR's mask and
        # bits for containsCIDR, and parsing a string operand
        # (an argument that failed is charged as the overload the checker chose: size 1)
        extra = name == "containsCIDR"
        return lambda v, r: (_ceil(2 * net.size(v[0]) * STRING_FACTOR)
                             + (_ceil(net.size(v[0]) * STRING_FACTOR) + 1 if extra else 0)
                             + (_ceil(size_of(v[1]) * STRING_FACTOR) if isinstance(v[1], str) else
                                1 if string_overload and isinstance(v[1], CelError) else 0))
    if name in ("replace", "split", "ip.isCanonical"):  # a traversal and the construction of a result
        return lambda v, r: _ceil(size_of(v[0]) * 2 * STRING_FACTOR)
    if name == "join":
        return lambda v, r: _ceil(size_of(r) * 2 * STRING_FACTOR)
    if name in ("find", "findAll", "matches"):
        return lambda v, r: _ceil((1 + size_of(v[0])) * STRING_FACTOR) * _ceil(size_of(v[1]) * REGEX_FACTOR)
    if name in ("sets.contains", "sets.equivalent", "sets.intersects"):
        factor = 2 if name == "sets.equivalent" else 1
        return lambda v, r: size_of(v[0]) * size_of(v[1]) * factor + 1
    if name in ("bytes", "string"):
        return lambda v, r: _ceil(size_of(v[0]) * STRING_FACTOR) if isinstance(v[0], (str, bytes)) else 1
    if name == "@in":
        return lambda v, r: size_of(v[1]) if isinstance(v[1], list) else 1
    if name in ("_==_", "_!=_"):
        return lambda v, r: _ceil(min(size_of(v[0]), size_of(v[1])) * STRING_FACTOR)
    # cel-go costs by the overload the checker chose when it chose one: a failed string operand costs as
    # a string of size 1, not as the default call
    texts = (str, bytes, CelError) if overload is not None and overload.endswith(("_string", "_bytes")) else (
        str, bytes)
    if name in _RELATIONS:
        return lambda v, r: (_ceil(min(size_of(v[0]), size_of(v[1])) * STRING_FACTOR)
                             if isinstance(v[0], texts) else 1)
    if name == "_+_":
        return lambda v, r: (_ceil((size_of(v[0]) + size_of(v[1])) * STRING_FACTOR)
                             if isinstance(v[0], texts) else 1)
    if name == "contains":
        return lambda v, r: _ceil(size_of(v[0]) * STRING_FACTOR) * _ceil(size_of(v[1]) * STRING_FACTOR)
    if name in ("orValue", "or"):
        return lambda v, r: 0  # cel-go evaluates these optional forms itself, not as calls
    return lambda v, r: 1


_GO_TYPES: Final = {"bool": "types.Bool", "int": "types.Int", "uint": "types.Uint", "double": "types.Double",
                    "string": "types.String", "bytes": "types.Bytes", "null_type": "types.Null",
                    "kubernetes.Semver": "cel.Semver", "kubernetes.Quantity": "cel.Quantity",
                    "google.protobuf.Timestamp": "types.Timestamp", "google.protobuf.Duration": "types.Duration",
                    "optional_type": "*types.Optional", "type": "*types.Type"}


def _go_type(v: Any) -> str:
    """The Go type of a cel-go value, as fold errors name it."""
    return _GO_TYPES.get(type_name(v), type_name(v))


MAX_LIST_VALUES: Final = 48  # ResourceSliceMaxAttributeValuesPerDevice
# library.py's functions, the lists extension's, and net.py's `ip` (a CIDR's too) and `string` (of an
# IP or a CIDR) over them
_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {**lib.FUNCTIONS, **net.FUNCTIONS, **extlists.FUNCTIONS}


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


__all__ = ["Interpreter", "Quantity", "Semver", "size_of"]
