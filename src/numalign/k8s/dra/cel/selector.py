"""Compiling, caching and evaluating selectors (the package's public API, re-exported by __init__.py).

Kept out of the package's __init__.py, which stays Python (scripts/compiled-modules): this is the path
every selector of every read object and every device the allocator checks goes through, compiled with
the rest of the CEL engine.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cel_expr_python import cel as _cel_cpp
from cel_expr_python.ext import ext_bindings, ext_optional

from numalign.k8s.dra.cel import strformat
from numalign.k8s.dra.cel import types as _t
from numalign.k8s.dra.cel.ast import Expr, Parsed, read_parsed
from numalign.k8s.dra.cel.checker import Checked, check
from numalign.k8s.dra.cel.cost import estimate
from numalign.k8s.dra.cel.decls import SORT_BY_KEYS, STANDARD_FUNCTIONS, Environment, environment
from numalign.k8s.dra.cel.macros import expand_sort_by, expand_two_variable_macros
from numalign.k8s.dra.cel.program import Meter, Node, compile_program, fold_error
from numalign.k8s.dra.cel.projection import Path as Path  # re-exported: the paths a selector reads
from numalign.k8s.dra.cel.projection import absent_key, device_paths, project, value_key
from numalign.k8s.dra.cel.values import CelError, CostLimitExceededError, DomainMap, EvalPanicError, to_bool_error
from numalign.k8s.dra.semver import SemverError, parse_semver
from numalign.k8s.dra.types import CEL_SELECTOR_EXPRESSION_MAX_COST, DeviceAttribute, DeviceCapacity

RUNTIME_COST_LIMIT: Final = 1_000_000  # the scheduler's per-evaluation limit (CELSelectorExpressionMaxCost)
DEFAULT_MINOR: Final = 36


@dataclass(frozen=True)
class CELFeatures:
    """The gates that change the CEL environment (cel.Features upstream) and the release."""

    consumable_capacity: bool = False
    list_type_attributes: bool = False
    minor: int = DEFAULT_MINOR


@dataclass(frozen=True)
class CompiledSelector:
    """A compiled expression, or the compile error as upstream's Detail ("compilation failed: ...").

    Only what evaluating needs is kept (the program, not the parsed expression it was made from): the
    cache below holds thousands of these, and every object they keep is walked by each full collection
    of Python's garbage collector (with the parsed expressions kept, a fifth of the CPU replaying the
    recorded allocator vectors). A new object's compile answers the API server's checks (the error, the
    estimated cost, the output type) and has no program: the allocator evaluates a stored object's."""

    expression: str
    error: str | None
    max_cost: int
    output_type: str | None = None
    minor: int = DEFAULT_MINOR
    program: Node | None = None
    # the paths of `device` the expression reads (None: it reads more), and the answers per their values
    paths: tuple[Path, ...] | None = None
    memo: dict[tuple[object, ...], tuple[Any, int, str | None]] = field(
        default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def error_line(self) -> str | None:
        """The error in one line: each ERROR's first line (the source excerpt only pictures the column
        the message names), joined by "; "."""
        if self.error is None:
            return None
        lines = [line for line in self.error.splitlines() if not line.startswith(" | ")]
        return "; ".join(line.removeprefix("ERROR: ") if i else line for i, line in enumerate(lines))


class CELRuntimeError(Exception):
    """An expression failed on one device (upstream's runtime wording, without context); `cost` is
    what the evaluation had cost when it failed."""

    def __init__(self, message: str, cost: int = 0) -> None:
        super().__init__(message)
        self.cost = cost


_PARSER = _cel_cpp.NewEnv(extensions=[ext_bindings.ExtBindings(), ext_optional.ExtOptional()])


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str, features: CELFeatures = CELFeatures(), *,
                     new_object: bool = False) -> CompiledSelector:
    """CompileCELExpression. `new_object`: as the API server checks an object being created (the
    previous minor's environment); otherwise as for a stored object and the allocator."""
    env = environment(features.minor, features.consumable_capacity, features.list_type_attributes,
                      stored=not new_object)
    # sortBy is a macro of cel-go's lists extension: only an environment with it expands it
    parsed = _parse(expression, SORT_BY_KEYS in env.functions)
    if isinstance(parsed, str):
        return CompiledSelector(expression, parsed, 0)
    checked = check(parsed.expr, env)
    errors = checked.errors or _validate(parsed.expr, checked)
    if errors:
        return CompiledSelector(expression, "compilation failed: " + _issues(expression, parsed.positions, errors), 0)
    out = checked.types[parsed.expr.id]
    if out.kind not in env.outputs:
        return CompiledSelector(expression, f"must evaluate to bool or the unknown type, not {out.type_name()}", 0)
    guards = _guards(env, checked)
    folded = fold_error(parsed.expr, checked.functions, guards, features.minor)
    if folded is not None:  # the program is built before the cost is estimated
        return CompiledSelector(expression, "program instantiation failed: " + folded, 0)
    max_cost = estimate(parsed.expr, checked, features.minor)
    if new_object:  # validation only: no program to build and keep
        return CompiledSelector(expression, None, max_cost, out.type_name(), features.minor)
    program = compile_program(parsed.expr, dict(checked.functions), guards, features.minor,
                              {k: list(v) for k, v in checked.overloads.items()})
    return CompiledSelector(expression, None, max_cost, out.type_name(), features.minor, program,
                            device_paths(parsed.expr))


# A selector is compiled twice close together: as a new object when its object is read (the API server's
# checks) and as a stored one when the allocator evaluates it. Parsing, the same for both, is kept for the
# last few texts only: a parsed expression is many small objects (see CompiledSelector).
@functools.lru_cache(maxsize=64)
def _parse(expression: str, sort_by: bool = False) -> Parsed | str:
    """The parsed expression, or the compile error (upstream's "compilation failed: ..."); `sort_by`:
    with the lists extension's sortBy macro."""
    try:
        parsed = read_parsed(_PARSER.compile(expression, disable_check=True).serialize())
    except RuntimeError as exc:
        return "compilation failed: " + _cpp_error(str(exc))
    errors = expand_two_variable_macros(parsed) + (expand_sort_by(parsed) if sort_by else [])
    if errors:
        return "compilation failed: " + _issues(expression, parsed.positions, errors)
    return parsed


def _guards(env: Environment, checked: Checked) -> dict[int, tuple[tuple[_t.Type, ...], ...]]:
    """cel-go guards each library function's overloads by the runtime types of the arguments: a call
    none matches is "no such overload: name(types)" (the standard functions answer plainly)."""
    out = {}
    for call_id, ids in checked.overloads.items():
        name = checked.functions.get(call_id, "")
        if name in STANDARD_FUNCTIONS or name.startswith(("_", "@")):
            continue
        chosen = [ov for ov in env.functions.get(name, []) if ov.id in ids]
        out[call_id] = tuple(ov.args for ov in chosen)
    return out


def cost_error(compiled: CompiledSelector) -> str | None:
    """The API server's validation when the estimate is over CELSelectorExpressionMaxCost."""
    if compiled.error is None and compiled.max_cost > CEL_SELECTOR_EXPRESSION_MAX_COST:
        return "too complex, exceeds cost limit"
    return None


def _cpp_error(text: str) -> str:
    """cel-cpp's parse issues in cel-go's words: without the status code, a position-less error at line
    -1 (cel-cpp prints the unsigned 4294967295), and without the "<<nil>> parsetree" note cel-cpp adds
    after other syntax errors (cel-go reports the syntax errors alone)."""
    text = text.removeprefix("INVALID_ARGUMENT: ").removesuffix(" [INVALID_ARGUMENT]")
    blocks: list[list[str]] = []
    for line in text.split("\n"):
        if line.startswith("ERROR: ") or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    kept = [b for b in blocks if not (b[0].endswith(": <<nil>> parsetree") and len(blocks) > 1)]
    return "\n".join("\n".join(b) for b in kept).replace("<input>:4294967295:", "<input>:-1:")


def _validate(root: Expr, checked: Checked) -> list[tuple[int, str]]:
    """cel-go's AST validators of the base environment: constant regexes, durations and timestamps."""
    from numalign.k8s.dra.cel import library
    errors: list[tuple[int, str]] = []

    def walk(e: Expr) -> None:
        name = checked.functions.get(e.id, "")
        if e.kind == "call" and e.args:
            arg = e.args[-1] if name == "matches" else e.args[0]
            # a duration or timestamp of any literal is evaluated (timestamp(253402300800) is refused)
            if arg.kind == "lit" and (arg.lit_kind == "string" or name in ("duration", "timestamp")):
                try:
                    if name == "matches":
                        library.regex(arg.value)
                    elif name == "duration":
                        library.to_duration(arg.value)
                    elif name == "timestamp":
                        library.to_timestamp(arg.value)
                except CelError:
                    errors.append((arg.id, f"invalid {name} argument"))
        for child in (e.operand, e.iter_range, e.accu_init, e.loop_cond, e.loop_step, e.result, *e.args):
            if child is not None:
                walk(child)
        for key, value, _ in e.entries:
            walk(key)
            walk(value)
    walk(root)
    errors.extend(_homogeneous(root, checked))

    def formats(e: Expr) -> None:  # the strings extension's validator, after the base environment's
        if strformat.is_checked_format_call(e, checked.functions.get(e.id, "")):
            found = strformat.check_format_call(e, checked.types)
            if found is not None:
                errors.append(found)
        for child in (e.operand, e.iter_range, e.accu_init, e.loop_cond, e.loop_step, e.result, *e.args):
            if child is not None:
                formats(child)
        for key, value, _ in e.entries:
            formats(key)
            formats(value)
    formats(root)
    return errors


def _homogeneous(root: Expr, checked: Checked) -> list[tuple[int, str]]:
    """cel-go's ValidateHomogeneousAggregateLiterals: the elements of a list literal, the keys and the
    values of a map literal, each of one type (any literal under a `format` call is exempt)."""
    errors: list[tuple[int, str]] = []

    def same(items: list[tuple[Expr, bool]]) -> None:
        first: _t.Type | None = None
        for x, optional in items:
            ty = checked.types.get(x.id, _t.DYN)
            if optional and ty.kind == "opaque" and ty.name == "optional_type":
                ty = ty.params[0]
            if first is None:
                first = ty
            elif not _t.exact(first, ty):
                errors.append((x.id, f"expected type '{first.fmt()}' but found '{ty.fmt()}'"))
                return

    def walk(e: Expr, exempt: bool) -> None:
        if e.kind == "list" and not exempt:
            same([(x, i in e.optional_indices) for i, x in enumerate(e.args)])
        elif e.kind == "map" and not exempt:
            same([(k, False) for k, _, _ in e.entries])
            same([(v, o) for _, v, o in e.entries])
        # everything under a format() call is exempt, at any depth (inExemptFunction walks every parent)
        inner = exempt or (e.kind == "call" and checked.functions.get(e.id) == "format")
        for child in (e.operand, e.iter_range, e.accu_init, e.loop_cond, e.loop_step, e.result, *e.args):
            if child is not None:
                walk(child, inner)
        for key, value, _ in e.entries:
            walk(key, inner)
            walk(value, inner)
    walk(root, False)
    return errors


def _issues(source: str, positions: Mapping[int, int], errors: list[tuple[int, str]]) -> str:
    """cel-go's Errors.ToDisplayString: sorted by location, each with its line and a caret."""
    lines = source.split("\n")
    located = []
    for expr_id, message in errors:
        offset = positions.get(expr_id, 0)
        line, col, remaining = 1, 0, offset
        for text in lines:
            if remaining <= len(text):
                col = remaining
                break
            remaining -= len(text) + 1
            line += 1
        else:
            line, col = len(lines), len(lines[-1])
        located.append((line, col, message))
    located.sort(key=lambda x: (x[0], x[1]))
    out = []
    for line, col, message in located:
        snippet = lines[line - 1].replace("\t", " ") if line - 1 < len(lines) else ""
        marker = "".join("\uff0e" if len(ch.encode("utf-8", "surrogatepass")) > 1 else "." for ch in snippet[:col])
        caret = "\uff3e" if col < len(snippet) and len(snippet[col].encode("utf-8", "surrogatepass")) > 1 else "^"
        out.append(f"ERROR: <input>:{line}:{col + 1}: {message}\n | {snippet}\n | {marker}{caret}")
    return "\n".join(out)


# ---- evaluate ----------------------------------------------------------------------------------------


def attribute_value(attr: DeviceAttribute) -> Any:
    """getAttributeValue: versions as semver values, lists as lists."""
    if not attr.is_list and attr.kind != "version":
        return attr.values[0]  # the common case: a scalar as it is
    if attr.kind == "version":
        values: list[Any] = []
        for v in attr.values:
            try:
                values.append(parse_semver(str(v)))
            except SemverError:
                values.append(str(v))
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
    attrs: DomainMap = DomainMap()
    for name, attr in attributes.items():
        domain, _, ident = name.rpartition("/")
        attrs.setdefault(domain or driver, {})[ident] = attribute_value(attr)
    caps: DomainMap = DomainMap()
    for name, cap in capacity.items():
        domain, _, ident = name.rpartition("/")
        caps.setdefault(domain or driver, {})[ident] = cap.value
    # DeviceMatches always passes allowMultipleAllocations (false when unset); whether a selector may
    # name it is the checker's business.
    device: dict[str, Any] = {"driver": driver, "attributes": attrs, "capacity": caps,
                              "allowMultipleAllocations": bool(allow_multiple_allocations)}
    return device


def device_key(
    paths: tuple[Path, ...],
    driver: str,
    attributes: Mapping[str, DeviceAttribute],
    capacity: Mapping[str, DeviceCapacity],
    allow_multiple_allocations: bool | None,
) -> tuple[object, ...] | None:
    """`project(paths, device_variables(...))` without building the variables: what a selector reading
    `paths` sees of one device (None: a value whose equality is not CEL's, or a name given twice)."""
    out: list[object] = []
    for path in paths:
        head = path[0]
        if head == "driver":
            out.append((str, driver))
            continue
        if head == "allowMultipleAllocations":
            out.append((bool, bool(allow_multiple_allocations)))
            continue
        domain, name = path[1], path[2]
        source: Mapping[str, Any] = attributes if head == "attributes" else capacity
        # The names device_variables files under (domain, name): qualified, and in the driver's own domain
        # also unqualified (or with an empty domain). Given twice, the later wins there: left to it.
        item = source.get(domain + "/" + name)
        if domain == driver:
            for other in (source.get(name), source.get("/" + name)):
                if other is not None:
                    if item is not None:
                        return None
                    item = other
        if item is None:
            present = any((n.rpartition("/")[0] or driver) == domain for n in source)
            out.append(absent_key(3 if present else 2))
            continue
        key = value_key(attribute_value(item) if head == "attributes" else item.value)
        if key is None:
            return None
        out.append(key)
    return tuple(out)


_MEMO_SIZE: Final = 4096  # answers kept per selector (a memo that fills is started again)
# Answers kept by all selectors together. compile_selector keeps 4,096 selectors, so without this a
# long-lived process (serve) could hold 4,096 x 4,096 answers (gigabytes); at the cap every memo is
# started again. An answer is the same whether a memo gave it or not, so this only costs time.
_MEMO_TOTAL: Final = 1 << 16
_memo_state: list[int] = [0]  # the answers all memos hold now (a list: a module global mypyc can update)
# The selectors whose memo holds answers since the last start, each once (by id: the entry holds it alive).
# A list grew by one entry each time a full selector's memo refilled, for the life of a serve.
_memoized: dict[int, CompiledSelector] = {}


def evaluate(compiled: CompiledSelector, device: dict[str, Any],
             limit: int = RUNTIME_COST_LIMIT) -> tuple[Any, int]:
    """The expression's value for `device` and the evaluated cost; CELRuntimeError with upstream's text.
    Devices alike in what the expression reads share one evaluation (projection.py)."""
    if compiled.paths is None or limit != RUNTIME_COST_LIMIT:
        return _evaluate(compiled, device, limit)
    key = project(compiled.paths, device)
    if key is None:
        return _evaluate(compiled, device, limit)
    found = compiled.memo.get(key)
    if found is None:
        try:
            value, cost = _evaluate(compiled, device, limit)
            found = (value, cost, None)
        except CELRuntimeError as exc:
            found = (None, exc.cost, str(exc))
        _remember(compiled, key, found)
    value, cost, error = found
    if error is not None:
        raise CELRuntimeError(error, cost)
    return value, cost


def _remember(compiled: CompiledSelector, key: tuple[object, ...], found: tuple[Any, int, str | None]) -> None:
    """Keep an answer within both bounds: the selector's and the process's."""
    memo = compiled.memo
    if len(memo) >= _MEMO_SIZE:
        _memo_state[0] -= len(memo)
        memo.clear()
    if _memo_state[0] >= _MEMO_TOTAL:
        for held in _memoized.values():
            held.memo.clear()
        _memoized.clear()
        _memo_state[0] = 0
    if not memo:  # one entry per selector holding answers since the last start: bounded as the answers are
        _memoized[id(compiled)] = compiled
    memo[key] = found
    _memo_state[0] += 1


def memo_answers() -> int:
    """The answers all selectors' memos hold (bounded by _MEMO_TOTAL)."""
    return _memo_state[0]


def _evaluate(compiled: CompiledSelector, device: dict[str, Any], limit: int) -> tuple[Any, int]:
    if compiled.program is None:
        raise CELRuntimeError(compiled.error or "not compiled for evaluation (a new object's compile is checked only)")
    meter = Meter(limit)
    try:
        value = compiled.program({"device": device}, meter)
    except (CelError, CostLimitExceededError, EvalPanicError) as exc:
        raise CELRuntimeError(str(exc), meter.cost) from None
    except RecursionError:  # not reachable within the parser's 32 levels; a line, never a traceback
        raise CELRuntimeError("max recursion depth exceeded", meter.cost) from None
    return value, meter.cost


def device_matches(compiled: CompiledSelector, device: dict[str, Any]) -> bool:
    """DeviceMatches: the expression's bool on one device; CELRuntimeError with upstream's text."""
    return matches_costed(compiled, device)[0]


def matches_costed(compiled: CompiledSelector, device: dict[str, Any]) -> tuple[bool, int]:
    """device_matches and the evaluation's cost (a memo's answer costs what it cost when evaluated, so
    the cost depends on the expression and the device only, never on what was evaluated before): what
    bounds the time the allocator and explain spend in CEL. CELRuntimeError carries its cost."""
    value, cost = evaluate(compiled, device)
    if not isinstance(value, bool):
        raise CELRuntimeError(to_bool_error(value), cost)
    return value, cost
