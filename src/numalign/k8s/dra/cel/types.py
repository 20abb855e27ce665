"""CEL types as cel-go's checker sees them, with its names (FormatCELType for messages, the type's
String() for the output type) and its assignability rules (checker/types.go): `dyn` and
`google.protobuf.Any` (the DRA attribute value type) are wildcards for overload resolution, type
parameters are bound through a substitution mapping, lists/maps/opaque types compare parameters."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Final


@dataclass(frozen=True, eq=False)
class Type:
    kind: str  # bool int uint double string bytes null dyn any error type list map opaque struct param
    name: str = ""  # opaque/struct/param name
    params: tuple[Type, ...] = ()
    fields: dict[str, Type] | None = field(default=None, hash=False, compare=False)

    def fmt(self) -> str:
        """FormatCELType: messages' spelling (Any is "any")."""
        k = self.kind
        if k == "list":
            return f"list({self.params[0].fmt()})"
        if k == "map":
            return f"map({self.params[0].fmt()}, {self.params[1].fmt()})"
        if k == "type":
            return f"type({self.params[0].fmt()})" if self.params else "type"
        if k == "opaque":
            return f"{self.name}({', '.join(p.fmt() for p in self.params)})" if self.params else self.name
        if k == "struct" and self.name in _WELL_KNOWN_SHORT:  # FormatCELType's TimestampKind/DurationKind
            return _WELL_KNOWN_SHORT[self.name]
        if k in ("struct", "param"):
            return self.name
        if k == "null":
            return "null"
        return k

    def type_name(self) -> str:
        """Type.String() / TypeName(): the output type's spelling."""
        k = self.kind
        if k == "any":
            return "google.protobuf.Any"
        if k == "null":
            return "null_type"
        if k == "list":
            return f"list({self.params[0].type_name()})"
        if k == "map":
            return f"map({self.params[0].type_name()}, {self.params[1].type_name()})"
        if k == "opaque":
            return f"{self.name}({', '.join(p.type_name() for p in self.params)})" if self.params else self.name
        if k in ("struct", "param"):
            return self.name
        if k == "type":
            return f"type({self.params[0].type_name()})" if self.params else "type"
        return k

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and exact(self, other)

    def __hash__(self) -> int:
        return hash((self.kind, self.name, len(self.params)))


def exact(a: Type, b: Type) -> bool:
    return (a.kind == b.kind and a.name == b.name and len(a.params) == len(b.params)
            and all(exact(x, y) for x, y in zip(a.params, b.params, strict=True)))


BOOL: Final = Type("bool")
INT: Final = Type("int")
UINT: Final = Type("uint")
DOUBLE: Final = Type("double")
STRING: Final = Type("string")
BYTES: Final = Type("bytes")
NULL: Final = Type("null")
DYN: Final = Type("dyn")
ANY: Final = Type("any")
ERROR: Final = Type("error")
_WELL_KNOWN_SHORT: Final = {"google.protobuf.Timestamp": "timestamp", "google.protobuf.Duration": "duration"}
TIMESTAMP: Final = Type("struct", "google.protobuf.Timestamp")
DURATION: Final = Type("struct", "google.protobuf.Duration")
QUANTITY: Final = Type("opaque", "kubernetes.Quantity")
SEMVER: Final = Type("opaque", "kubernetes.Semver")
URL: Final = Type("opaque", "kubernetes.URL")
IP: Final = Type("opaque", "net.IP")
CIDR: Final = Type("opaque", "net.CIDR")


def list_of(t: Type) -> Type:
    return Type("list", params=(t,))


def map_of(k: Type, v: Type) -> Type:
    return Type("map", params=(k, v))


def type_of(t: Type) -> Type:
    return Type("type", params=(t,))


def optional_of(t: Type) -> Type:
    return Type("opaque", "optional_type", (t,))


def param(name: str) -> Type:
    return Type("param", name)


_fresh = itertools.count()


def fresh() -> Type:
    return Type("param", f"_var{next(_fresh)}")


def is_dyn(t: Type) -> bool:
    return t.kind in ("dyn", "any")


def is_dyn_or_error(t: Type) -> bool:
    return t.kind in ("dyn", "any", "error")


class Mapping:
    """Type parameter substitutions (checker/mapping.go)."""

    def __init__(self, subs: dict[str, Type] | None = None) -> None:
        self.subs: dict[str, Type] = dict(subs or {})

    def copy(self) -> Mapping:
        return Mapping(self.subs)

    def find(self, t: Type) -> Type | None:
        return self.subs.get(t.name)


def substitute(m: Mapping, t: Type, type_param_to_dyn: bool) -> Type:
    if t.kind == "param":
        sub = m.find(t)
        if sub is not None:
            return substitute(m, sub, type_param_to_dyn)
        return DYN if type_param_to_dyn else t
    if t.params:
        return Type(t.kind, t.name, tuple(substitute(m, p, type_param_to_dyn) for p in t.params), t.fields)
    return t


def _references(m: Mapping, name: str, t: Type) -> bool:
    if t.kind == "param":
        if t.name == name:
            return True
        sub = m.find(t)
        return sub is not None and _references(m, name, sub)
    return any(_references(m, name, p) for p in t.params)


def _less_specific(a: Type, b: Type) -> bool:
    """isEqualOrLessSpecific(a, b)."""
    if a.kind in ("dyn", "param") or b.kind in ("dyn", "param"):
        return a.kind in ("dyn", "param")
    if a.kind != b.kind:
        return False
    if a.kind in ("list", "map", "opaque", "type"):
        return len(a.params) == len(b.params) and all(_less_specific(x, y) for x, y in zip(a.params, b.params,
                                                                                             strict=True))
    return True


def most_general(a: Type, b: Type) -> Type:
    return a if _less_specific(a, b) else b


def _valid_sub(m: Mapping, t1: Type, t2: Type) -> tuple[bool, bool]:
    if t1.kind == t2.kind == "param" and t1.name == t2.name:
        return True, True
    sub = m.find(t2)
    if sub is not None:
        if sub.kind == "param" and t1.kind == "param" and sub.name == t1.name:
            return True, True
        if assignable(m, t1, sub):
            new = most_general(t1, sub)
            if not _references(m, t2.name, new):
                m.subs[t2.name] = new
            return True, True
        return False, True
    if not _references(m, t2.name, t1):
        m.subs[t2.name] = t1
        return True, False
    return False, False


def assignable(m: Mapping, t1: Type, t2: Type) -> bool:
    """internalIsAssignable(m, t1, t2): may a t2 value be used where t1 is expected (binding params)."""
    if t2.kind == "param":
        valid, has_sub = _valid_sub(m, t1, t2)
        if valid:
            return True
        if has_sub:
            return False
    if t1.kind == "param":
        return _valid_sub(m, t2, t1)[0]
    if is_dyn_or_error(t1) or is_dyn_or_error(t2):
        return True
    if t1.kind == "null" or t2.kind == "null":
        other = t2 if t1.kind == "null" else t1
        return other.kind in ("null", "struct", "opaque", "any")
    if t1.kind in ("bool", "bytes", "double", "int", "string", "uint", "struct"):
        return t1.kind == t2.kind and t1.name == t2.name
    if t1.kind == "type":
        return t2.kind == "type"
    if t1.kind in ("opaque", "list", "map"):
        return (t1.kind == t2.kind and t1.name == t2.name and len(t1.params) == len(t2.params)
                and all(assignable(m, a, b) for a, b in zip(t1.params, t2.params, strict=True)))
    return False


def assignable_list(m: Mapping, expected: list[Type], actual: list[Type]) -> bool:
    if len(expected) != len(actual):
        return False
    trial = m.copy()
    for e, a in zip(expected, actual, strict=True):
        if not assignable(trial, e, a):
            return False
    m.subs = trial.subs
    return True


def is_assignable(m: Mapping, t1: Type, t2: Type) -> bool:
    """checker.isAssignable: commits the substitutions only when assignable."""
    trial = m.copy()
    if assignable(trial, t1, t2):
        m.subs = trial.subs
        return True
    return False
