"""A checked expression compiled once into Python closures, so that evaluating a selector on each device
walks no tree and dispatches on no strings: the same semantics and cost accounting as the Interpreter
(which keeps the functions' behaviour and costs), several times faster. The cost is kept in a Meter per
evaluation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from numalign.k8s.dra.cel import library as lib
from numalign.k8s.dra.cel.ast import Expr
from numalign.k8s.dra.cel.interp import (
    _RELATIONS,
    _TYPE_IDENTS,
    Interpreter,
    _contains,
    _field,
    _go_type,
    _has_field,
    _index,
    _optional_field,
    _qualified,
    cost_function,
)
from numalign.k8s.dra.cel.types import Type
from numalign.k8s.dra.cel.values import (
    MISSING,
    NO_SUCH_OVERLOAD,
    CelError,
    CostLimitExceededError,
    DomainMap,
    Duration,
    EvalPanicError,
    Opaque,
    Optional,
    Timestamp,
    TypeValue,
    UInt,
    equal,
    map_get,
    type_name,
)
from numalign.k8s.dra.semver import Semver
from numalign.k8s.quantity import Quantity

LIMIT_TEXT: Final = "operation cancelled: actual cost limit exceeded"
_PYTHON_CLASSES: Final[dict[str, tuple[type, ...]]] = {
    "bool": (bool,), "int": (int,), "uint": (UInt,), "double": (float,), "string": (str,), "bytes": (bytes,),
    "null": (type(None),), "list": (list,), "map": (dict, DomainMap), "kubernetes.Semver": (Semver,),
    "kubernetes.Quantity": (Quantity,), "kubernetes.URL": (Opaque,), "net.IP": (Opaque,), "net.CIDR": (Opaque,),
    "optional_type": (Optional,), "google.protobuf.Timestamp": (Timestamp,),
    "google.protobuf.Duration": (Duration,), "type": (TypeValue,),
}


class Meter:
    __slots__ = ("cost", "limit")

    def __init__(self, limit: int) -> None:
        self.cost = 0
        self.limit = limit


class _Failed:
    """A comprehension's accumulator after a step failed: reading it is that error."""

    __slots__ = ("error",)

    def __init__(self, error: CelError) -> None:
        self.error = error


Scope = dict[str, Any]


class _Lazy:
    """A comprehension's accumulator not yet read: its initial value, computed (and charged) once, in the
    scope the comprehension started in, when first read."""

    __slots__ = ("init", "scope", "value")

    def __init__(self, init: Callable[[Scope, Meter], Any], scope: Scope) -> None:
        self.init: Callable[[Scope, Meter], Any] | None = init
        self.scope = scope
        self.value: Any = None

    def resolve(self, m: Meter) -> Any:
        if self.init is not None:
            init, self.init = self.init, None
            try:
                self.value = init(self.scope, m)
            except CelError as exc:
                self.value = _Failed(exc)
        return self.value
Node = Callable[[Scope, Meter], Any]


def _charge(m: Meter, n: int) -> None:
    m.cost += n
    if m.cost > m.limit:
        raise CostLimitExceededError(LIMIT_TEXT)


class _Compiler:
    def __init__(self, functions: dict[int, str], guarded: dict[int, tuple[tuple[Type, ...], ...]],
                 minor: int, overloads: dict[int, list[str]] | None = None) -> None:
        self.functions = functions
        self.guarded = guarded
        self.overloads = overloads or {}
        self.ops = Interpreter(functions, 0, minor, guarded)

    def node(self, e: Expr, observed: bool = True) -> Node:
        """`observed=False` compiles an attribute whose own evaluation cel-go does not count (a branch of
        the ternary, a variable index): its qualifiers cost, its root does not."""
        if not observed:
            if e.kind == "ident":
                return self._ident(e, observed=False)
            if e.kind == "select" and not e.test_only:
                return self._select(e, observed=False)
            if e.kind == "call" and e.name in ("_[_]", "_?._", "_[?_]") and _is_attribute(e):
                return self._call(e, observed=False)
        return getattr(self, "_" + e.kind)(e)  # type: ignore[no-any-return]

    def _lit(self, e: Expr) -> Node:
        # a uint literal is a uint value (7u - 8u overflows; type(1u) is uint)
        value = UInt(e.value) if e.lit_kind == "uint" else e.value
        return lambda s, m: value

    def _ident(self, e: Expr, observed: bool = True) -> Node:
        name = e.name
        fallback = TypeValue(name) if name in _TYPE_IDENTS else None
        if not observed:
            def unobserved(s: Scope, m: Meter) -> Any:
                v = s.get(name, MISSING)
                if v is MISSING:
                    if fallback is None:
                        raise CelError(f"no such attribute: {name}")
                    return fallback
                if type(v) is _Lazy:
                    v = v.resolve(m)
                if type(v) is _Failed:
                    raise v.error
                return v
            return unobserved

        def ident(s: Scope, m: Meter) -> Any:
            v = s.get(name, MISSING)
            if v is MISSING:
                if fallback is None:
                    raise CelError(f"no such attribute: {name}")
                return fallback  # a type name is a constant to cel-go: no cost
            m.cost += 1
            if m.cost > m.limit:
                raise CostLimitExceededError(LIMIT_TEXT)
            if type(v) is _Lazy:
                v = v.resolve(m)
            if type(v) is _Failed:
                raise v.error
            return v
        return ident

    def _select(self, e: Expr, observed: bool = True) -> Node:
        assert e.operand is not None
        operand = self.node(e.operand, observed)
        field = e.name
        if e.test_only:
            return lambda s, m: _has_field(operand(s, m), field)
        if field in ("Timestamp", "Duration") and _dotted(e) == "google.protobuf." + field:
            # the well-known types' names are type values, constants to cel-go (as `int` is): no cost
            named = TypeValue("google.protobuf." + field)
            return lambda s, m: named
        step = 1 + (_relative(e.operand) if observed else 0)

        def select(s: Scope, m: Meter) -> Any:
            target = operand(s, m)
            m.cost += step
            if m.cost > m.limit:
                raise CostLimitExceededError(LIMIT_TEXT)
            if type(target) is dict:
                v = target.get(field, MISSING)
                if v is not MISSING:
                    return v
            return _field(target, field)
        return select

    def _list(self, e: Expr) -> Node:
        items = [self.node(x) for x in e.args]
        optional = e.optional_indices
        constant = all(_constant(x) for x in e.args)

        def create(s: Scope, m: Meter) -> Any:
            out = []
            for i, f in enumerate(items):
                try:
                    v = f(s, m)
                except CelError:
                    if not constant:
                        _charge(m, 10)  # cel-go observes the constructor with the error it returns
                    raise
                if i in optional:
                    if isinstance(v, Optional) and v.present:
                        out.append(v.value)
                    continue
                out.append(v)
            if not constant:
                _charge(m, 10)
            return out
        return create

    def _map(self, e: Expr) -> Node:
        entries = [(self.node(k), self.node(v), o) for k, v, o in e.entries]
        base = 0 if all(_constant(k) and _constant(v) for k, v, _ in e.entries) else 30

        def create(s: Scope, m: Meter) -> Any:
            out: dict[Any, Any] = {}
            for kf, vf, optional in entries:
                try:
                    key, value = kf(s, m), vf(s, m)
                except CelError:
                    _charge(m, base)
                    raise
                if map_get(out, key) is not MISSING:
                    raise CelError(f"insert failed: key {key if isinstance(key, str) else lib.to_string(key)} "
                                   "already exists")
                if optional:
                    if isinstance(value, Optional) and value.present:
                        out[key] = value.value
                    continue
                out[key] = value
            _charge(m, base)  # a literal of constants is built once by cel-go's optimizer
            return out
        return create

    def _struct(self, e: Expr) -> Node:
        def fail(s: Scope, m: Meter) -> Any:
            raise CelError(f"unknown type: {e.name}")
        return fail

    def _comp(self, e: Expr) -> Node:
        assert e.iter_range and e.accu_init and e.loop_cond and e.loop_step and e.result
        rng_f, init_f = self.node(e.iter_range), self.node(e.accu_init)
        cond_f, step_f, result_f = self.node(e.loop_cond), self.node(e.loop_step), self.node(e.result)
        var, var2, accu = e.iter_var, e.iter_var2, e.accu_var

        def fold(s: Scope, m: Meter) -> Any:
            rng = rng_f(s, m)
            # cel-go initializes the accumulator when it is first read (cel.bind's value, if ever)
            value = _Lazy(init_f, s)
            if isinstance(rng, dict):
                items: list[Any] = list(rng)
            elif isinstance(rng, list):
                items = rng
            else:
                raise CelError(f"got '{_go_type(rng)}', expected iterable type")
            inner = dict(s)
            inner[accu] = value
            for i, item in enumerate(items):
                if var2:
                    inner[var] = i if isinstance(rng, list) else item
                    inner[var2] = item if isinstance(rng, list) else rng[item]
                else:
                    inner[var] = item
                try:
                    cond = cond_f(inner, m)
                except CelError:
                    cond = None
                if cond is False:
                    break
                # cel-go's folder stops only at a false condition: a step that fails leaves an error as
                # the accumulator and the loop goes on (each further step, and the result, read it and
                # are charged), so the error is kept as a value
                try:
                    inner[accu] = step_f(inner, m)
                except CelError as exc:
                    inner[accu] = _Failed(exc)
            outer = dict(s)
            outer[accu] = inner[accu]
            return result_f(outer, m)
        return fold

    def _call(self, e: Expr, observed: bool = True) -> Node:
        name = self.functions.get(e.id, e.name)
        if name in ("_[_]", "_[?_]", "_?._"):
            # the target is part of the attribute; a key that is itself an attribute is resolved by the
            # qualifier without being counted
            args = [self.node(e.args[0], observed)] + [self.node(a, not _is_attribute(a)) for a in e.args[1:]]
        elif name == "_?_:_":
            args = [self.node(e.args[0])] + [self.node(a, not _is_attribute(a)) for a in e.args[1:]]
        else:
            args = [self.node(a) for a in e.args]
        if name in ("_&&_", "_||_"):
            return self._logical(name == "_&&_", args)
        if name == "_?_:_":
            c, t, f = args

            def cond(s: Scope, m: Meter) -> Any:
                v = c(s, m)
                if v is True:
                    return t(s, m)
                if v is False:
                    return f(s, m)
                raise CelError(NO_SUCH_OVERLOAD)
            return cond
        if name == "@not_strictly_false":
            (a,) = args

            def not_strictly_false(s: Scope, m: Meter) -> Any:
                try:
                    v = a(s, m)
                except CelError:
                    v = True
                _charge(m, 1)
                return v if isinstance(v, bool) else True
            return not_strictly_false
        if name == "_?._":
            target_f, field = args[0], e.args[1].value
            opt_step = 1 + (_relative(e.args[0]) if observed else 0)

            def opt_select(s: Scope, m: Meter) -> Any:
                target = target_f(s, m)
                found = _optional_field(target, field)
                # an optional qualifier that finds nothing is not counted
                _charge(m, opt_step if found.present else opt_step - 1)
                return found
            return opt_select
        if name in ("_[_]", "_[?_]"):
            target_f, key_f = args
            optional = name == "_[?_]"
            index_step = 1 + (_relative(e.args[0]) if observed else 0)

            def index(s: Scope, m: Meter) -> Any:
                target, key = target_f(s, m), key_f(s, m)
                _charge(m, index_step)
                return _index(target, key, optional)
            return index
        if name == "@in" and e.args[1].kind == "list" and all(x.kind == "lit" for x in e.args[1].args):
            # cel-go's optimizer turns `x in [constants]` into a set lookup, which costs nothing of its own
            item_f, list_f = args

            def membership(s: Scope, m: Meter) -> Any:
                return _contains(list_f(s, m), item_f(s, m))
            return membership
        if e.operand is not None and not _qualified(name, e):
            args.insert(0, self.node(e.operand))
        if name in _CONVERSIONS and e.operand is None and all(_constant(a) for a in e.args):
            # cel-go's optimizer converts a constant once, when the program is built: no cost
            converted = self._function(e, name, args)

            def constant(s: Scope, m: Meter) -> Any:
                saved = m.cost
                try:
                    return converted(s, m)
                finally:
                    m.cost = saved
            return constant
        return self._function(e, name, args)

    def _logical(self, is_and: bool, args: list[Node]) -> Node:
        stop = not is_and

        def logical(s: Scope, m: Meter) -> Any:
            err: CelError | None = None
            for a in args:
                try:
                    v = a(s, m)
                except CelError as exc:
                    if err is None:
                        err = exc
                    continue
                if v is stop:
                    return v
                if v is not is_and and err is None:
                    err = CelError(NO_SUCH_OVERLOAD)
            if err is not None:
                raise err
            return is_and
        return logical

    def _function(self, e: Expr, name: str, args: list[Node]) -> Node:
        ops = self.ops
        guards = self.guarded.get(e.id)
        # one overload taking a string argument (containsIP/containsCIDR charge its parse by overload)
        string_overload = (guards is not None and len(guards) == 1 and len(guards[0]) > 1
                           and guards[0][1].kind == "string")
        chosen = self.overloads.get(e.id, [])
        cost = cost_function(name, self.ops.minor, e.operand is not None and not _qualified(name, e),
                             string_overload, chosen[0] if len(chosen) == 1 else None)
        checks = _guard_checks(guards) if guards else None
        pattern = (e.args[-1] if name == "matches" else e.args[0]) if e.args else None
        precompiled = name in ("matches", "find", "findAll") and pattern is not None and pattern.kind == "lit"
        if name in ("_==_", "_!=_"):
            _lhs, _rhs = args
            negate = name == "_!=_"

            def equality(s: Scope, m: Meter) -> Any:
                (a, b), err = _evaluate(args, s, m)
                _charge(m, cost([a, b], None))
                if err is not None:
                    raise err
                return equal(a, b) is not negate
            return equality
        if name in _RELATIONS and len(args) == 2:
            relation: Callable[[int], bool] = _RELATIONS[name]
            def compare(s: Scope, m: Meter) -> Any:
                (a, b), err = _evaluate(args, s, m)
                _charge(m, cost([a, b], None))
                if err is not None:
                    raise err
                return relation(lib.compare(a, b))
            return compare

        if (name == "_+_" and len(e.args) == 2 and e.args[0].kind == "ident" and e.args[0].name == "@result"
                and e.args[1].kind == "list" and not _reads(e.args[1], "@result")):
            # a macro's `@result + [x]`: the comprehension's own list, made fresh by its init and read by
            # nothing else, is appended to in place (as cel-go's mutable accumulator is): building a
            # new list per step made map() quadratic, seconds for a list near the cost limit
            def append(s: Scope, m: Meter) -> Any:
                values, err = _evaluate(args, s, m)
                _charge(m, cost(values, err))
                if err is not None:
                    raise err
                accu, more = values
                if type(accu) is list and type(more) is list:
                    accu.extend(more)
                    return accu
                return ops._apply(name, values)
            return append

        varargs = len(args) >= 3

        def call(s: Scope, m: Meter) -> Any:
            if varargs:
                # cel-go's evalVarArgs stops at the first failed argument: the rest are not evaluated,
                # and the call, not seen with all its arguments, is not charged
                values = []
                for a in args:
                    try:
                        values.append(a(s, m))
                    except CelError as exc:
                        if len(values) + 1 < len(args):
                            raise
                        values.append(exc)
                        if not precompiled:
                            _charge(m, cost(values, exc))
                        raise
                err = None
            else:
                values, err = _evaluate(args, s, m)
            if err is not None and name == "@sortByAssociatedKeys":
                # its binding takes errors as lists: cel-go panics and recovers with this text
                raise EvalPanicError("internal error: interface conversion: *types.Err is not traits.Lister: "
                                     "missing method Add")
            if err is not None:
                # cel-go evaluates every argument, observes the call with the error it returns, and
                # reports the first argument's error; a regex call with a constant pattern is
                # precompiled by its optimizer and costs nothing then
                if not precompiled:
                    _charge(m, cost(values, err))
                raise err
            if name == "join":
                try:
                    result = ops._apply(name, values)
                except CelError as exc:
                    _charge(m, cost(values, exc))
                    raise
                _charge(m, cost(values, result))
                return result
            _charge(m, cost(values, None))
            if checks is not None and not _passes(checks, values):
                raise CelError(f"no such overload: {name}({', '.join(type_name(v) for v in values)})")
            return ops._apply(name, values)
        return call


def _constant(e: Expr) -> bool:
    """Whether cel-go's optimizer (decOptimize, applied bottom-up) makes `e` a constant when the program
    is built: a literal, a list or map literal of constants (so `[[1]]` too), a type conversion of
    constants. Building or converting such a value then costs nothing at run time."""
    if e.kind == "lit":
        return True
    if e.kind == "list":
        return all(_constant(x) for x in e.args)
    if e.kind == "map":
        return all(_constant(k) and _constant(v) for k, v, _ in e.entries)
    return (e.kind == "call" and e.name in _CONVERSIONS and e.operand is None
            and all(_constant(a) for a in e.args))


_CONVERSIONS: Final = frozenset({"int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp", "dyn",
                                 "type"})


def _reads(e: Expr, name: str) -> bool:
    """Whether `e` reads the variable `name` anywhere."""
    if e.kind == "ident":
        return e.name == name
    children = [e.operand, *e.args, *(x for k, v, _ in e.entries for x in (k, v)), e.iter_range, e.accu_init,
                e.loop_cond, e.loop_step, e.result]
    return any(c is not None and _reads(c, name) for c in children)


def _is_attribute(e: Expr) -> bool:
    """An expression cel-go plans as an attribute: a variable, or selections and indexes from one."""
    if e.kind == "ident":
        return True
    if e.kind == "select" and not e.test_only and e.operand is not None:
        return _is_attribute(e.operand)
    if e.kind == "call" and e.name in ("_[_]", "_?._", "_[?_]") and e.args:
        return _is_attribute(e.args[0])
    return False


def _relative(operand: Expr) -> int:
    """1 when a selection's operand is computed rather than a variable or a selection from one: cel-go
    counts such a relative attribute once more than its qualifiers."""
    if operand.kind in ("ident", "select"):
        return 0
    if operand.kind == "call" and operand.name in ("_[_]", "_?._", "_[?_]"):
        return 0
    return 1


def _evaluate(args: list[Node], s: Scope, m: Meter) -> tuple[list[Any], CelError | None]:
    """Every argument's value (an error stands in for a failed one) and the first error."""
    values: list[Any] = []
    err: CelError | None = None
    for a in args:
        try:
            values.append(a(s, m))
        except CelError as exc:
            values.append(exc)
            if err is None:
                err = exc
    return values, err


_Check = tuple[type, ...] | None


def _guard_checks(guards: tuple[tuple[Type, ...], ...]) -> list[tuple[_Check, ...]]:
    """Each overload's parameters as the Python classes a runtime value may have (None: anything)."""
    return [tuple(_classes(t) for t in g) for g in guards]


def _classes(t: Type) -> _Check:
    if t.kind in ("dyn", "any", "param", "error"):
        return None
    return _PYTHON_CLASSES.get(t.kind) or _PYTHON_CLASSES.get(t.name)


def _passes(checks: list[tuple[_Check, ...]], values: list[Any]) -> bool:
    for check in checks:
        if len(check) == len(values) and all(c is None or type(v) in c for c, v in zip(check, values, strict=True)):
            return True
    return False


def compile_program(root: Expr, functions: dict[int, str], guarded: dict[int, tuple[tuple[Type, ...], ...]],
                    minor: int, overloads: dict[int, list[str]] | None = None) -> Node:
    """`overloads`: the checker's overloads per call (a single one decides how cel-go costs the call)."""
    return _Compiler(functions, guarded, minor, overloads).node(root)


def fold_error(root: Expr, functions: dict[int, str], guarded: dict[int, tuple[tuple[Type, ...], ...]],
               minor: int) -> str | None:
    """What cel-go's optimizer (decOptimize's constant type conversions) says when building the
    program: a conversion of a constant that fails (int("x"), uint(-1), string(b"\\xff")) fails the
    program itself, wherever it stands (`false && int("x") == 1` too), and so the compilation
    ("program instantiation failed: ..."); so does a constant pattern of find/findAll that does not
    compile (the regex library's optimizer). The first one in the planner's order, operands before
    their call; None when every constant succeeds."""
    compiler = _Compiler(functions, guarded, minor)

    def walk(e: Expr) -> str | None:
        children = [e.operand, *e.args, *(x for k, v, _ in e.entries for x in (k, v)), e.iter_range,
                    e.accu_init, e.loop_cond, e.loop_step, e.result]
        for child in children:
            if child is not None:
                found = walk(child)
                if found is not None:
                    return found
        if (e.kind == "call" and functions.get(e.id) in ("find", "findAll") and e.args
                and e.args[0].kind == "lit" and isinstance(e.args[0].value, str)):
            # the regex library compiles a constant pattern when the program is built
            try:
                lib.regex(e.args[0].value)
            except CelError as exc:
                return str(exc)
        if (e.kind == "call" and e.name in _CONVERSIONS and e.operand is None and len(e.args) == 1
                and _constant(e.args[0])):
            try:
                compiler.node(e)({}, Meter(1 << 62))
            except CelError as exc:
                return str(exc)
        return None
    return walk(root)


__all__ = ["Meter", "Node", "_contains", "compile_program", "fold_error"]


def _dotted(e: Expr) -> str | None:
    """a.b.c of a select chain over an identifier, else None."""
    if e.kind == "ident":
        return e.name
    if e.kind == "select" and e.operand is not None and not e.test_only:
        inner = _dotted(e.operand)
        return None if inner is None else inner + "." + e.name
    return None
