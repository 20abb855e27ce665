"""Two-variable comprehensions (cel-go's ext.TwoVarComprehensions, in k8s.io/apiserver's base environment
from 1.32, so in every DRA release): `all`, `exists`, `existsOne`/`exists_one` with two variables,
`transformList`, `transformMap` and `transformMapEntry`. cel-cpp's parser (cel-expr-python) has no such
macros and leaves `x.all(i, v, p)` a call of three arguments; numalign expands them after the parse, into
the comprehensions cel-go's parser builds (an accumulator `@result`, the same loop condition, step and
result), with its errors for a variable that is not a simple name, twice the same, or the accumulator's."""

from __future__ import annotations

from typing import Any, Final

from numalign.k8s.dra.cel.ast import BOOL, INT, Expr, Parsed
from numalign.k8s.dra.cel.decls import SORT_BY_KEYS

ACCUMULATOR: Final = "@result"
_ACCUMULATORS: Final = frozenset({ACCUMULATOR, "__result__"})
_ARITY: Final = {"all": (3,), "exists": (3,), "existsOne": (3,), "exists_one": (3,), "transformList": (3, 4),
                 "transformMap": (3, 4), "transformMapEntry": (3, 4)}
MAP_INSERT: Final = "cel.@mapInsert"


class _Expander:
    def __init__(self, parsed: Parsed, nodes: list[Expr]) -> None:
        self.positions = parsed.positions
        self.next_id = max((e.id for e in nodes), default=0) + 1
        self.errors: list[tuple[int, str]] = []
        self.at = 0

    def new(self, kind: str, **fields: Any) -> Expr:
        e = Expr(self.next_id, kind)
        for name, value in fields.items():  # not Expr(**fields): Expr is a compiled (mypyc) class
            setattr(e, name, value)
        self.positions[e.id] = self.at
        self.next_id += 1
        return e

    def accu(self) -> Expr:
        return self.new("ident", name=ACCUMULATOR)

    def lit(self, kind: str, value: object) -> Expr:
        return self.new("lit", lit_kind=kind, value=value)

    def call(self, name: str, *args: Expr) -> Expr:
        return self.new("call", name=name, args=list(args))

    def variable(self, e: Expr) -> str | None:
        if e.kind != "ident":
            self.errors.append((e.id, "argument must be a simple name"))
            return None
        return e.name

    def expand(self, e: Expr) -> None:
        assert e.operand is not None
        first = self.variable(e.args[0])
        second = self.variable(e.args[1]) if first is not None else None
        if first is None or second is None:
            return
        if first == second:
            self.errors.append((e.args[1].id, f"duplicate variable name: {first}"))
            return
        for name, arg in ((first, e.args[0]), (second, e.args[1])):
            if name in _ACCUMULATORS:
                self.errors.append((arg.id, "iteration variable overwrites accumulator variable"))
                return
        self.at = self.positions.get(e.id, 0)
        macro, rest = e.name, e.args[2:]
        init: Expr
        cond = self.lit(BOOL, True)
        result = self.accu()
        if macro == "all":
            init = self.lit(BOOL, True)
            cond = self.call("@not_strictly_false", self.accu())
            step = self.call("_&&_", self.accu(), rest[0])
        elif macro == "exists":
            init = self.lit(BOOL, False)
            cond = self.call("@not_strictly_false", self.call("!_", self.accu()))
            step = self.call("_||_", self.accu(), rest[0])
        elif macro in ("existsOne", "exists_one"):
            init = self.lit(INT, 0)
            step = self.call("_?_:_", rest[0], self.call("_+_", self.accu(), self.lit(INT, 1)), self.accu())
            result = self.call("_==_", self.accu(), self.lit(INT, 1))
        else:
            transform = rest[-1]
            if macro == "transformList":
                init = self.new("list")
                step = self.call("_+_", self.accu(), self.new("list", args=[transform]))
            elif macro == "transformMap":
                init = self.new("map")
                step = self.call(MAP_INSERT, self.accu(), self.new("ident", name=first), transform)
            else:
                init = self.new("map")
                step = self.call(MAP_INSERT, self.accu(), transform)
            if len(rest) == 2:
                step = self.call("_?_:_", rest[0], step, self.accu())
        target = e.operand
        e.kind, e.name, e.operand, e.args = "comp", "", None, []
        e.iter_var, e.iter_var2, e.accu_var = first, second, ACCUMULATOR
        e.iter_range, e.accu_init, e.loop_cond, e.loop_step, e.result = target, init, cond, step, result


def _nodes(root: Expr) -> list[Expr]:
    """Every node, parents before their children (iteratively: a chain of `||` may be 1,000 deep)."""
    out: list[Expr] = []
    stack = [root]
    while stack:
        e = stack.pop()
        out.append(e)
        if e.operand is not None:
            stack.append(e.operand)
        stack.extend(e.args)
        for key, value, _ in e.entries:
            stack.extend((key, value))
        for x in (e.iter_range, e.accu_init, e.loop_cond, e.loop_step, e.result):
            if x is not None:
                stack.append(x)
    return out


SORT_BY_INPUT: Final = "@__sortBy_input__"
_SORT_BY_TARGETS: Final = frozenset({"list", "select", "ident", "comp", "call"})


def _expand_sort_by(x: _Expander, e: Expr) -> None:
    """cel-go's lists extension's sortBy macro: `l.sortBy(v, key)` binds l (an accumulator over an empty
    range) and sorts it by `l.map(v, key)` (@sortByAssociatedKeys)."""
    assert e.operand is not None
    target = e.operand
    if target.kind not in _SORT_BY_TARGETS:
        x.errors.append((target.id, "sortBy can only be applied to a list, identifier, comprehension, call or "
                                    "select expression"))
        return
    var = e.args[0]
    if var.kind != "ident":
        x.errors.append((var.id, "argument is not an identifier"))
        return
    if var.name in _ACCUMULATORS:
        x.errors.append((var.id, "iteration variable overwrites accumulator variable"))
        return
    x.at = x.positions.get(e.id, 0)
    keys = x.new("comp", iter_var=var.name, accu_var=ACCUMULATOR, iter_range=x.new("ident", name=SORT_BY_INPUT),
                 accu_init=x.new("list"), loop_cond=x.lit(BOOL, True),
                 loop_step=x.call("_+_", x.accu(), x.new("list", args=[e.args[1]])), result=x.accu())
    result = x.new("call", name=SORT_BY_KEYS, operand=x.new("ident", name=SORT_BY_INPUT), args=[keys])
    e.kind, e.name, e.operand, e.args = "comp", "", None, []
    e.iter_var, e.iter_var2, e.accu_var = "#unused", "", SORT_BY_INPUT
    e.iter_range, e.accu_init, e.loop_cond = x.new("list"), target, x.lit(BOOL, False)
    e.loop_step, e.result = x.new("ident", name=SORT_BY_INPUT), result


def expand_sort_by(parsed: Parsed) -> list[tuple[int, str]]:
    """Rewrite each `sortBy` receiver call of two arguments (an environment with cel-go's lists
    extension), innermost first; the errors of those cel-go's macro refuses."""
    nodes = _nodes(parsed.expr)
    expander = _Expander(parsed, nodes)
    for e in reversed(nodes):
        if e.kind == "call" and e.operand is not None and e.name == "sortBy" and len(e.args) == 2:
            _expand_sort_by(expander, e)
    return expander.errors


def expand_two_variable_macros(parsed: Parsed) -> list[tuple[int, str]]:
    """Rewrite each receiver call of a two-variable macro into its comprehension, in place, innermost
    first as cel-go's parser does; the errors (expression id, message) of those it cannot expand."""
    nodes = _nodes(parsed.expr)
    expander = _Expander(parsed, nodes)
    for e in reversed(nodes):
        if e.kind == "call" and e.operand is not None and len(e.args) in _ARITY.get(e.name, ()):
            expander.expand(e)
    return expander.errors
