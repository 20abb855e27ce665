"""Field validators for decoded JSON/YAML (machine files, cadvisor dumps, vectors, sweeps, NRT objects).

Each takes the value and where it was found, and returns it typed or raises InvalidInputError with one
line: where, what was expected, what was there. bool is not an int here (JSON true is not 1). The
Kubernetes manifest reader keeps its own (k8s/manifest.py), which word errors as the API server does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from numalign.errors import InvalidInputError
from numalign.limits import quote


def expect_int(value: Any, where: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer, within [minimum, maximum] where given (a node or CPU id past the kernel's own
    ceiling would otherwise size tables and masks; cadvisor's view keeps -1 ids, so no minimum there)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{where}: expected an integer, got {quote(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        expected = (f"from {minimum} to {maximum}" if minimum is not None and maximum is not None
                    else f"of at least {minimum}" if minimum is not None else f"of at most {maximum}")
        raise InvalidInputError(f"{where}: {quote(value)} is out of range; expected an id {expected}")
    return value


def expect_opt_int(
    value: Any, where: str, *, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    """An integer, or None when the field is absent or null."""
    return None if value is None else expect_int(value, where, minimum=minimum, maximum=maximum)


def expect_list(value: Any, where: str, *, required: bool = False) -> list[Any]:
    """A list; an absent or null field reads as [] unless `required`."""
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise InvalidInputError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def expect_str_list(value: Any, where: str, what: str = "strings") -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(f"{where}: expected a list of {what}, got {quote(value)}")
    return list(value)


def expect_mapping(value: Any, where: str, allowed: Collection[str] | None = None) -> Mapping[str, Any]:
    """An object; with `allowed`, any other key is refused (a typo must not be ignored silently)."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where}: expected an object, got {type(value).__name__}")
    if allowed is not None:
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            raise InvalidInputError(f"{where}: unknown keys {unknown}; expected some of {sorted(allowed)}")
    return value
