"""CEL device selectors (k8s.io/dynamic-resource-allocation/cel): compile, check and evaluate.

The expressions run on `common-expression-language` (the Rust `cel` crate), with the Kubernetes
extensions DRA selectors use registered as functions: `semver`/`isSemver` and the semver methods,
`quantity`/`isQuantity` and the quantity methods, the Kubernetes list library (isSorted, sum, min,
max, indexOf, lastIndexOf), cel-go's strings extension, regex `find`/`findAll`, sets, and `includes`
with DRAListTypeAttributes. The device is `device` with `driver`, `attributes`, `capacity` and, with
DRAConsumableCapacity, `allowMultipleAllocations`; a domain missing from `attributes` or `capacity`
reads as an empty map (so `device.attributes["x"].y` fails with "no such key: y"), as upstream's
mapper does.

What differs from cel-go, all documented in docs/dra.md: no static type checker (a selector whose
result is not a bool is reported when it runs, with the runtime wording); the cost limit is checked
against numalign's own estimate (`estimate_cost`), an upper bound driven by comprehension nesting,
not cel-go's estimator; `cel.bind` and optional syntax (`.?`) are not supported by the library and
fail to compile; a semver or quantity value is carried as a tagged map, so `==` between two of them
compares their text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import cel

from numalign.k8s.dra.semver import Semver, SemverError, parse_semver
from numalign.k8s.dra.types import (
    CEL_SELECTOR_EXPRESSION_MAX_COST,
    RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE,
    DeviceAttribute,
    DeviceCapacity,
)
from numalign.k8s.quantity import Quantity

SEMVER_TAG: Final = "__semver__"
QUANTITY_TAG: Final = "__quantity__"
_MACROS: Final = ("all", "exists", "exists_one", "map", "filter")
_STD_FUNCTIONS: Final = frozenset({
    "size", "int", "uint", "double", "string", "bytes", "bool", "dyn", "type", "matches", "contains",
    "startsWith", "endsWith", "timestamp", "duration", "has", "max", "min",
})


@dataclass(frozen=True)
class CELFeatures:
    """The gates that change the CEL environment (cel.Features upstream)."""

    consumable_capacity: bool = False
    list_type_attributes: bool = False


@dataclass(frozen=True)
class CompiledSelector:
    """A compiled expression, or the compile error as upstream's Detail ("compilation failed: ...")."""

    expression: str
    program: cel.Program | None
    error: str | None
    max_cost: int


class CELRuntimeError(Exception):
    """An expression failed on one device (upstream's runtime wording, without context)."""


# ---- compile -----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def compile_selector(expression: str, features: CELFeatures = CELFeatures()) -> CompiledSelector:
    """CompileCELExpression: parse, check the references, estimate the cost."""
    try:
        program = cel.compile(expression)
    except ValueError as exc:
        return CompiledSelector(expression, None, "compilation failed: " + _first_error_line(str(exc)), 0)
    error = _check_references(expression, program, features)
    if error:
        return CompiledSelector(expression, None, "compilation failed: " + error, 0)
    return CompiledSelector(expression, program, None, estimate_cost(expression))


def cost_error(compiled: CompiledSelector) -> str | None:
    """The API server's validation when the estimate is over CELSelectorExpressionMaxCost."""
    if compiled.error is None and compiled.max_cost > CEL_SELECTOR_EXPRESSION_MAX_COST:
        return "too complex, exceeds cost limit"
    return None


def _first_error_line(text: str) -> str:
    """cel-go's issues text is "ERROR: <input>:L:C: msg" plus a source excerpt with a caret; one line
    keeps the first: the excerpt only pictures the column the message already names."""
    start = text.find("ERROR:")
    text = text[start:] if start >= 0 else text
    return text.splitlines()[0].rstrip() if text else "unknown error"


_STRING_LITERAL = re.compile(r"""(?s)[rR]?("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
_COMPREHENSION_VAR = re.compile(r"\.\s*(?:" + "|".join(_MACROS) + r")\s*\(\s*([A-Za-z_]\w*)\s*,")


def _check_references(expression: str, program: cel.Program, features: CELFeatures) -> str | None:
    """The checker's "undeclared reference" and "undefined field" errors, which the parser alone
    does not give (the library resolves names only when it runs)."""
    code = _STRING_LITERAL.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', expression)
    bind = re.search(r"\bcel\s*\.\s*bind\s*\(", code)
    if bind is not None:
        # Valid for cel-go (ext.Bindings), but the library has no such macro: say so rather than
        # "undeclared reference to 'cel'".
        return (f"ERROR: <input>:{_line_col(code, bind.start())}: cel.bind is not supported by numalign's CEL "
                "engine (a deliberate gap, see docs/dra.md); write the bound expression out in full")
    bound = set(_COMPREHENSION_VAR.findall(code))
    for name in program.variables():
        if name != "device" and name not in bound:
            return f"ERROR: <input>:{_position(code, name)}: undeclared reference to '{name}' (in container '')"
    known = known_functions(features)
    for name in program.functions():
        if name.startswith(("_", "@", "!", "-")) or name in known or name in _STD_FUNCTIONS or name in _MACROS:
            continue
        return f"ERROR: <input>:{_position(code, name)}: undeclared reference to '{name}' (in container '')"
    if not features.consumable_capacity:
        m = re.search(r"\.\s*allowMultipleAllocations\b", code)
        if m is not None:
            return f"ERROR: <input>:{_line_col(code, m.start())}: undefined field 'allowMultipleAllocations'"
    return None


def _position(code: str, name: str) -> str:
    m = re.search(rf"(?<![\w.]){re.escape(name)}\b", code) or re.search(rf"\b{re.escape(name)}\b", code)
    return _line_col(code, m.start() if m else 0)


def _line_col(code: str, index: int) -> str:
    line = code.count("\n", 0, index) + 1
    column = index - (code.rfind("\n", 0, index) + 1) + 1
    return f"{line}:{column}"


def estimate_cost(expression: str) -> int:
    """An upper bound of the expression's cost in cel-go's units, by numalign's own rule: every token
    costs 1, times the iterations of each comprehension it sits in. A comprehension over
    `device.attributes` or `device.capacity` (or one domain of them) iterates at most 32 times, over a
    list literal its length, over anything else (a list attribute, a split string) at most 64."""
    code = _STRING_LITERAL.sub('""', expression)
    cost = 0
    multiplier = 1
    stack: list[tuple[int, int]] = []  # (paren depth at which the comprehension closes, its range)
    depth = 0
    for m in re.finditer(r"[A-Za-z_]\w*|\d+|\S", code):
        token = m.group(0)
        if token == "(":
            depth += 1
            before = code[: m.start()].rstrip()
            macro = re.search(r"\.\s*(" + "|".join(_MACROS) + r")$", before)
            if macro is not None:
                size = _range_size(before[: macro.start()])
                stack.append((depth, size))
                multiplier *= size
        elif token == ")":
            if stack and stack[-1][0] == depth:
                multiplier //= stack.pop()[1]
            depth -= 1
        cost += multiplier
    return cost


def _range_size(target: str) -> int:
    target = target.rstrip()
    if re.search(r"\b(attributes|capacity)(\s*\[[^\]]*\]|\s*\.\s*[\w.-]+)?$", target):
        return 32
    if target.endswith("]"):
        open_at = target.rfind("[")
        inner = target[open_at + 1: -1]
        if open_at == 0 or not re.search(r"[\w\])]\s*$", target[:open_at]):
            return max(inner.count(",") + 1, 1)
    return 64


def known_functions(features: CELFeatures) -> frozenset[str]:
    """The library's functions in this environment (`includes` only with DRAListTypeAttributes)."""
    names = set(_FUNCTIONS)
    if not features.list_type_attributes:
        names.discard("includes")
    return frozenset(names)


# ---- evaluate ----------------------------------------------------------------------------------------


def attribute_value(attr: DeviceAttribute) -> Any:
    """getAttributeValue: a CEL value (versions as tagged maps, lists as lists)."""
    if attr.kind == "version":
        values: list[Any] = [{SEMVER_TAG: str(v)} for v in attr.values]
    else:
        values = list(attr.values)
    return values if attr.is_list else values[0]


def device_variables(
    driver: str,
    attributes: Mapping[str, DeviceAttribute],
    capacity: Mapping[str, DeviceCapacity],
    allow_multiple_allocations: bool | None,
    features: CELFeatures,
) -> dict[str, Any]:
    """The `device` variable of DeviceMatches (names without a domain belong to the driver's)."""
    attrs: dict[str, dict[str, Any]] = {}
    for name, attr in attributes.items():
        domain, _, ident = name.rpartition("/")
        attrs.setdefault(domain or driver, {})[ident] = attribute_value(attr)
    caps: dict[str, dict[str, Any]] = {}
    for name, cap in capacity.items():
        domain, _, ident = name.rpartition("/")
        caps.setdefault(domain or driver, {})[ident] = {QUANTITY_TAG: str(cap.value)}
    device: dict[str, Any] = {"driver": driver, "attributes": attrs, "capacity": caps}
    if features.consumable_capacity:
        device["allowMultipleAllocations"] = bool(allow_multiple_allocations)
    return device


def device_matches(compiled: CompiledSelector, device: dict[str, Any]) -> bool:
    """DeviceMatches: the expression's bool on one device; CELRuntimeError with upstream's text."""
    if compiled.program is None:
        raise CELRuntimeError(compiled.error or "not compiled")
    attrs, caps = device["attributes"], device["capacity"]
    added: list[str] = []
    try:
        for _ in range(8):
            try:
                result = compiled.program.execute({**_FUNCTIONS, "device": device})
                break
            except KeyError as exc:
                key = str(exc.args[0]) if exc.args else ""
                # A missing domain reads as an empty map upstream; add it and run again.
                if key in attrs and key in caps:
                    raise CELRuntimeError(f"no such key: {key}") from None
                attrs.setdefault(key, {})
                caps.setdefault(key, {})
                added.append(key)
        else:
            raise CELRuntimeError("no such key")
    except CELRuntimeError:
        raise
    except Exception as exc:
        raise CELRuntimeError(_runtime_message(exc)) from None
    finally:
        for key in added:
            if attrs.get(key) == {}:
                del attrs[key]
            if caps.get(key) == {}:
                del caps[key]
    if not isinstance(result, bool):
        raise CELRuntimeError(f"CEL result of type {_cel_type(result)} could not be converted to bool")
    return result


def _runtime_message(exc: Exception) -> str:
    text = str(exc)
    failed = re.search(r"Python function call failed: \w+: (.*?)\. Check function arguments", text)
    if failed:
        return failed.group(1)
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    if isinstance(exc, TypeError) or "No such overload" in text:
        return "no such overload"
    return text.split(". ")[0]


def _cel_type(value: Any) -> str:
    if isinstance(value, dict):
        if SEMVER_TAG in value:
            return "kubernetes.Semver"
        if QUANTITY_TAG in value:
            return "kubernetes.Quantity"
        return "map"
    return {str: "string", int: "int", float: "double", list: "list", bytes: "bytes"}.get(type(value), "dyn")


# ---- the Kubernetes CEL library, as functions --------------------------------------------------------


class _LibraryError(Exception):
    """A library function's error; the library reports it as the call's failure."""


def _semver_of(value: Any) -> Semver:
    if isinstance(value, dict) and SEMVER_TAG in value:
        return parse_semver(value[SEMVER_TAG])
    raise _LibraryError("no such overload")


def _quantity_of(value: Any) -> Quantity:
    if isinstance(value, dict) and QUANTITY_TAG in value:
        return _parse_quantity(value[QUANTITY_TAG])
    raise _LibraryError("no such overload")


@functools.lru_cache(maxsize=4096)
def _parse_quantity(text: str) -> Quantity:
    return Quantity.parse(text)


def _semver(text: str, normalize: bool = False) -> dict[str, str]:
    try:
        return {SEMVER_TAG: str(parse_semver(text, normalize))}
    except SemverError as exc:
        raise _LibraryError(f"invalid semver: {exc}") from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        parse_semver(text, normalize)
    except SemverError:
        return False
    return True


def _quantity(text: str) -> dict[str, str]:
    try:
        return {QUANTITY_TAG: str(_parse_quantity(text))}
    except ValueError:
        raise _LibraryError(
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        ) from None


def _is_quantity(text: str) -> bool:
    try:
        _parse_quantity(text)
    except ValueError:
        return False
    return True


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and SEMVER_TAG in a:
        return _semver_of(a).compare(_semver_of(b))
    return _quantity_of(a).cmp(_quantity_of(b))


def _index_of(target: Any, item: Any, *rest: Any) -> int:
    if isinstance(target, str):
        start = int(rest[0]) if rest else 0
        return target.find(item, start)
    return next((i for i, v in enumerate(target) if v == item), -1)


def _last_index_of(target: Any, item: Any, *rest: Any) -> int:
    if isinstance(target, str):
        return target.rfind(item, 0, int(rest[0]) + len(item)) if rest else target.rfind(item)
    return next((i for i in range(len(target) - 1, -1, -1) if target[i] == item), -1)


def _min_max(values: Any, pick: Callable[..., Any]) -> Any:
    if not isinstance(values, list) or not values:
        raise _LibraryError("min called on empty list" if pick is min else "max called on empty list")
    return pick(values)


def _includes(target: Any, item: Any) -> bool:
    if isinstance(target, list):
        if len(target) > RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE:
            raise _LibraryError("'includes' function cannot be applied to lists longer than "
                        f"{RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE} values")
        return item in target
    return bool(target == item)


def _find(text: str, pattern: str) -> str:
    m = re.search(pattern, text)
    return m.group(0) if m else ""


def _split(text: str, sep: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    parts = text.split(sep, limit - 1) if limit > 0 else text.split(sep)
    return parts if sep else list(text) if limit < 0 else parts


def _substring(text: str, start: int, end: int | None = None) -> str:
    stop = len(text) if end is None else end
    if start < 0 or stop > len(text) or start > stop:
        raise _LibraryError(f"index out of range: {start if start < 0 or start > len(text) else stop}")
    return text[start:stop]


_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    # semver (k8s.io/apiserver/pkg/cel/library/semverlib.go)
    "semver": _semver,
    "isSemver": _is_semver,
    "major": lambda v: _semver_of(v).major,
    "minor": lambda v: _semver_of(v).minor,
    "patch": lambda v: _semver_of(v).patch,
    # quantity (library/quantity.go)
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": lambda q: _quantity_of(q).sign(),
    "isInteger": lambda q: _quantity_of(q).as_int64() is not None,
    "asInteger": lambda q: _as_integer(_quantity_of(q)),
    "asApproximateFloat": lambda q: _quantity_of(q).nanos / 1e9,
    "add": lambda q, o: {QUANTITY_TAG: str(_quantity_of(q) + _operand(o))},
    "sub": lambda q, o: {QUANTITY_TAG: str(_quantity_of(q) - _operand(o))},
    # shared by semver and quantity
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "compareTo": _compare,
    # lists (library/lists.go) and strings (cel-go ext.Strings)
    "isSorted": lambda v: all(v[i] <= v[i + 1] for i in range(len(v) - 1)),
    "sum": lambda v: sum(v),
    "min": lambda v: _min_max(v, min),
    "max": lambda v: _min_max(v, max),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "charAt": lambda s, i: s[i] if i < len(s) else "",
    "lowerAscii": lambda s: "".join(c.lower() if c.isascii() else c for c in s),
    "upperAscii": lambda s: "".join(c.upper() if c.isascii() else c for c in s),
    "replace": lambda s, old, new, n=-1: s.replace(old, new, n),
    "split": _split,
    "substring": _substring,
    "trim": lambda s: s.strip(" \t\n\r\v\f"),
    "join": lambda v, sep="": sep.join(v),
    # regex (library/regex.go)
    "find": _find,
    "findAll": lambda s, p, n=-1: [m.group(0) for m in re.finditer(p, s)][: n if n >= 0 else None],
    # sets (cel-go ext.Sets)
    "sets.contains": lambda a, b: all(x in a for x in b),
    "sets.equivalent": lambda a, b: all(x in a for x in b) and all(x in b for x in a),
    "sets.intersects": lambda a, b: any(x in a for x in b),
    # DRAListTypeAttributes
    "includes": _includes,
}


def _operand(value: Any) -> Quantity:
    """add/sub take a quantity or an int."""
    return _quantity_of(value) if isinstance(value, dict) else Quantity.from_int(int(value))


def _as_integer(q: Quantity) -> int:
    value = q.as_int64()
    if value is None:
        raise _LibraryError("cannot convert value to integer")
    return value
