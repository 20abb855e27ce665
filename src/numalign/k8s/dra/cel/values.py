"""Runtime values and errors. CEL's int and bool stay Python int and bool; uint, timestamp, duration,
optional, type values and the opaque Kubernetes values (kubernetes.Semver, kubernetes.Quantity, URL, IP)
get small classes so that equality and dispatch never confuse them."""

from __future__ import annotations

from typing import Any, Final

from numalign.k8s.dra.semver import Semver
from numalign.k8s.quantity import Quantity

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
UINT64_MAX: Final = (1 << 64) - 1


class CelError(Exception):
    """An evaluation error value (cel-go's types.Err): `||`, `&&` and comprehensions may absorb it."""


class CostLimitExceededError(Exception):
    """The runtime cost limit stopped the evaluation (cel-go panics; nothing absorbs it)."""


class EvalPanicError(Exception):
    """cel-go panicked inside a call and its Eval recovered: the whole evaluation fails with "internal
    error: ...", through any `||`, `&&` or macro that would absorb an error value."""


NO_SUCH_OVERLOAD: Final = "no such overload"


class UInt(int):
    __slots__ = ()


class Timestamp:
    """An instant (Unix nanoseconds) and the zone offset it was read with (seconds east of UTC): Go keeps
    a parsed time's offset, and a timestamp's string shows it; equality compares instants."""

    __slots__ = ("nanos", "offset")

    def __init__(self, nanos: int, offset: int = 0) -> None:
        self.nanos = nanos
        self.offset = offset

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Timestamp) and other.nanos == self.nanos

    def __hash__(self) -> int:
        return hash(("ts", self.nanos))


class Duration:
    __slots__ = ("nanos",)

    def __init__(self, nanos: int) -> None:
        self.nanos = nanos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.nanos == self.nanos

    def __hash__(self) -> int:
        return hash(("dur", self.nanos))


class TypeValue:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeValue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("type", self.name))


_MISSING: Final = object()


class Optional:
    __slots__ = ("value",)

    def __init__(self, value: Any = _MISSING) -> None:
        self.value = value

    @property
    def present(self) -> bool:
        return self.value is not _MISSING


class Opaque:
    """URL and IP values: the parsed form and the text."""

    __slots__ = ("type_name", "value")

    def __init__(self, type_name: str, value: Any) -> None:
        self.type_name = type_name
        self.value = value


class DomainMap(dict[str, Any]):
    """device.attributes / device.capacity: a domain that is absent reads as an empty map on lookup
    (upstream's mapper), while `in`, size() and iteration see the real keys."""


def type_name(v: Any) -> str:
    """The runtime type's TypeName()."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, UInt):
        return "uint"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bytes):
        return "bytes"
    if v is None:
        return "null_type"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, Semver):
        return "kubernetes.Semver"
    if isinstance(v, Quantity):
        return "kubernetes.Quantity"
    if isinstance(v, Timestamp):
        return "google.protobuf.Timestamp"
    if isinstance(v, Duration):
        return "google.protobuf.Duration"
    if isinstance(v, TypeValue):
        return "type"
    if isinstance(v, Optional):
        return "optional_type"
    if isinstance(v, Opaque):
        return v.type_name
    return "dyn"


def to_bool_error(v: Any) -> str:
    """ConvertToNative(bool) failure texts of cel-go's types and of the Kubernetes opaque types."""
    name = type_name(v)
    if name == "int":
        detail = "unsupported type conversion from 'int' to bool"
    elif name == "uint":
        detail = "unsupported type conversion from 'uint' to bool"
    elif name == "string":
        detail = "unsupported native conversion from string to 'bool'"
    elif name == "double":
        detail = "type conversion error from Double to 'bool'"
    elif name == "bytes":
        detail = "type conversion error from Bytes to 'bool'"
    elif name == "list":
        detail = "type conversion error from list to 'bool'"
    elif name == "map":
        detail = "type conversion error from map to 'bool'"
    elif name == "null_type":
        detail = "type conversion error from 'null_type' to 'bool'"
    elif name == "kubernetes.Semver":
        detail = "type conversion error from 'Semver' to 'bool'"
    elif name == "kubernetes.Quantity":
        detail = "type conversion error from 'Quantity' to 'bool'"
    else:
        detail = f"type conversion error from '{name}' to 'bool'"
    return f"CEL result of type {name} could not be converted to bool: {detail}"


def equal(a: Any, b: Any) -> bool:
    """types.Equal: heterogeneous equality is false, numbers compare by value; the Kubernetes opaque
    types are strict (an other type is "no such overload")."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, Semver):
        if not isinstance(b, Semver):
            raise CelError(NO_SUCH_OVERLOAD)
        return a.compare(b) == 0
    if isinstance(a, Quantity):
        if not isinstance(b, Quantity):
            raise CelError(NO_SUCH_OVERLOAD)
        return a.cmp(b) == 0
    if isinstance(a, Opaque):
        # IP and URL Equal: by value (an IP's address, a URL's parts), never by identity; another type is
        # "no such overload", as for the other Kubernetes types.
        if not isinstance(b, Opaque) or a.type_name != b.type_name:
            raise CelError(NO_SUCH_OVERLOAD)
        return bool(a.value == b.value)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        for k, v in a.items():
            other = _find_key(b, k)
            if other is _MISSING or not equal(v, other):
                return False
        return True
    if isinstance(a, Optional):
        if not isinstance(b, Optional):
            return False
        if a.present != b.present:
            return False
        return not a.present or equal(a.value, b.value)
    if type(a) is not type(b):
        return False
    return bool(a == b)


def _find_key(m: dict[Any, Any], k: Any) -> Any:
    for key, value in m.items():
        if type_name(key) == type_name(k) and key == k:
            return value
    if isinstance(k, (int, float)) and not isinstance(k, bool):
        for key, value in m.items():
            if isinstance(key, (int, float)) and not isinstance(key, bool) and key == k:
                return value
    return _MISSING


def map_get(m: dict[Any, Any], k: Any) -> Any:
    """A key's value, or _MISSING (CEL keys: int, uint, bool, string; numbers compare by value)."""
    if isinstance(k, (str, bool)):
        v = m.get(k, _MISSING) if isinstance(k, str) else _MISSING
        if v is not _MISSING or isinstance(k, str):
            return v
    return _find_key(m, k)


MISSING: Final = _MISSING
