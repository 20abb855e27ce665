"""The type checker, as cel-go's checker/checker.go decides: identifiers and functions resolved in
the DRA environment, overloads chosen by assignability (dyn and any match anything, type parameters
bind), aggregate literals homogeneous, comprehension ranges lists, maps or dyn. Errors carry cel-go's
texts; `Checked` keeps each node's type and overload ids for the cost estimator and the interpreter."""

from __future__ import annotations

from dataclasses import dataclass, field

from numalign.k8s.dra.cel import types as t
from numalign.k8s.dra.cel.ast import STRING, Expr
from numalign.k8s.dra.cel.decls import Environment, Overload

LITERAL_TYPES = {"null": t.NULL, "bool": t.BOOL, "int": t.INT, "uint": t.UINT, "double": t.DOUBLE,
                 "string": t.STRING, "bytes": t.BYTES}


@dataclass
class Checked:
    types: dict[int, t.Type] = field(default_factory=dict)
    overloads: dict[int, list[str]] = field(default_factory=dict)
    functions: dict[int, str] = field(default_factory=dict)  # call id -> resolved (qualified) function
    errors: list[tuple[int, str]] = field(default_factory=list)  # (expression id, message)


class _Checker:
    def __init__(self, env: Environment) -> None:
        self.env = env
        self.out = Checked()
        self.m = t.Mapping()
        self.scopes: list[dict[str, t.Type]] = []

    def error(self, e: Expr, message: str) -> None:
        self.out.errors.append((e.id, message))

    def set(self, e: Expr, ty: t.Type) -> None:
        self.out.types[e.id] = ty

    def get(self, e: Expr) -> t.Type:
        return self.out.types[e.id]

    def lookup(self, name: str) -> t.Type | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return self.env.variables.get(name)

    def check(self, e: Expr) -> None:
        getattr(self, "_" + e.kind)(e)

    def _lit(self, e: Expr) -> None:
        self.set(e, LITERAL_TYPES[e.lit_kind])

    def _ident(self, e: Expr) -> None:
        ty = self.lookup(e.name)
        if ty is None:
            self.error(e, f"undeclared reference to '{e.name}' (in container '')")
            ty = t.ERROR
        self.set(e, ty)

    def _select(self, e: Expr) -> None:
        assert e.operand is not None
        qname = qualified_name(e)
        if qname is not None and not e.test_only and qname in self.env.variables and self.lookup(qname) is not None:
            self.set(e, self.env.variables[qname])
            return
        ty = self.select_field(e, e.operand, e.name, False)
        self.set(e, t.BOOL if e.test_only else t.substitute(self.m, ty, False))

    def select_field(self, e: Expr, operand: Expr, name: str, optional: bool) -> t.Type:
        self.check(operand)
        target = t.substitute(self.m, self.get(operand), False)
        is_opt = target.kind == "opaque" and target.name == "optional_type"
        if is_opt:
            target = target.params[0]
        result = t.ERROR
        if target.kind == "map":
            result = target.params[1]
        elif target.kind == "struct" and target.fields is not None:
            found = target.fields.get(name)
            if found is None:
                self.error(e, f"undefined field '{name}'")
            else:
                result = found
        elif target.kind == "struct":
            self.error(e, f"type '{target.fmt()}' does not support field selection")
            result = t.DYN
        elif target.kind == "param":
            t.is_assignable(self.m, t.DYN, target)
            result = t.DYN
        else:
            if not t.is_dyn_or_error(target):
                self.error(e, f"type '{target.fmt()}' does not support field selection")
            result = t.DYN
        if is_opt or optional:
            return t.optional_of(result)
        return result

    def _call(self, e: Expr) -> None:
        if e.name == "_?._" and len(e.args) == 2 and e.args[1].kind == "lit" and e.args[1].lit_kind == STRING:
            ty = self.select_field(e, e.args[0], e.args[1].value, True)
            self.set(e, t.substitute(self.m, ty, False))
            self.out.overloads[e.id] = ["select_optional_field"]
            self.out.functions[e.id] = "_?._"
            return
        for a in e.args:
            self.check(a)
        if e.operand is None:
            fn = self.env.functions.get(e.name)
            if fn is None:
                self.error(e, f"undeclared reference to '{e.name}' (in container '')")
                self.set(e, t.ERROR)
                return
            self.out.functions[e.id] = e.name
            self.resolve(e, e.name, fn, None, e.args)
            return
        qname = qualified_name(e.operand)
        if qname is not None:
            fn = self.env.functions.get(qname + "." + e.name)
            if fn is not None:
                self.out.functions[e.id] = qname + "." + e.name
                self.resolve(e, qname + "." + e.name, fn, None, e.args)
                return
        self.check(e.operand)
        fn = self.env.functions.get(e.name)
        if fn is not None:
            self.out.functions[e.id] = e.name
            self.resolve(e, e.name, fn, e.operand, e.args)
            return
        self.set(e, t.ERROR)
        self.error(e, f"undeclared reference to '{e.name}' (in container '')")

    def resolve(self, e: Expr, name: str, fn: list[Overload], target: Expr | None, args: list[Expr]) -> None:
        arg_types = [self.get(a) for a in args]
        if name in ("_&&_", "_||_") and target is None:
            # cel-go checks the logical operators argument by argument: each one not a bool is
            # "expected type 'bool'" where it stands, not a missing overload of the operator
            mismatched = False
            for a, ty in zip(args, arg_types, strict=True):
                if not t.is_assignable(self.m, ty, t.BOOL):
                    self.error(a, f"expected type 'bool' but found '{ty.fmt()}'")
                    mismatched = True
            self.out.overloads[e.id] = [fn[0].id]
            self.set(e, t.ERROR if mismatched else t.BOOL)
            return
        if target is not None:
            arg_types.insert(0, self.get(target))
        result: t.Type | None = None
        ids: list[str] = []
        for ov in fn:
            if ov.member != (target is not None):
                continue
            params = list(ov.args)
            ret = ov.result
            names = ov.params
            if names:
                fresh = t.Mapping({n: t.fresh() for n in names})
                params = [t.substitute(fresh, p, False) for p in params]
                ret = t.substitute(fresh, ret, False)
            if t.assignable_list(self.m, params, arg_types):
                ids.append(ov.id)
                ret = t.substitute(self.m, ret, False)
                if result is None:
                    result = ret
                elif not t.is_dyn(result) and not t.exact(ret, result):
                    result = t.DYN
        if result is None:
            shown = [t.substitute(self.m, a, True).fmt() for a in arg_types]
            sig = f"{shown[0]}.({', '.join(shown[1:])})" if target is not None else f"({', '.join(shown)})"
            self.error(e, f"found no matching overload for '{name}' applied to '{sig}'")
            self.set(e, t.ERROR)
            return
        self.out.overloads[e.id] = ids
        self.set(e, result)

    def join(self, e: Expr, previous: t.Type | None, current: t.Type) -> t.Type:
        if previous is None:
            return current
        if t.is_assignable(self.m, previous, current):
            return t.most_general(previous, current)
        # a mixed literal is dyn to the checker; the homogeneity validator reports it afterwards
        return t.DYN

    def _list(self, e: Expr) -> None:
        elem: t.Type | None = None
        for i, x in enumerate(e.args):
            self.check(x)
            ty = self.get(x)
            if i in e.optional_indices:
                if ty.kind == "opaque" and ty.name == "optional_type":
                    ty = ty.params[0]
                elif not t.is_dyn_or_error(ty):
                    self.error(x, f"expected type 'optional_type' but found '{ty.fmt()}'")
            elem = self.join(x, elem, ty)
        self.set(e, t.list_of(elem if elem is not None else t.fresh()))

    def _map(self, e: Expr) -> None:
        kt: t.Type | None = None
        vt: t.Type | None = None
        for key, value, optional in e.entries:
            self.check(key)
            kt = self.join(key, kt, self.get(key))
            self.check(value)
            ty = self.get(value)
            if optional and ty.kind == "opaque" and ty.name == "optional_type":
                ty = ty.params[0]
            vt = self.join(value, vt, ty)
        self.set(e, t.map_of(kt or t.fresh(), vt or t.fresh()))

    def _struct(self, e: Expr) -> None:
        for _, value, _ in e.entries:
            self.check(value)
        self.error(e, f"undeclared reference to '{e.name}' (in container '')")
        self.set(e, t.ERROR)

    def _comp(self, e: Expr) -> None:
        assert e.iter_range and e.accu_init and e.loop_cond and e.loop_step and e.result
        self.check(e.iter_range)
        self.check(e.accu_init)
        rng = t.substitute(self.m, self.get(e.iter_range), False)
        accu = self.get(e.accu_init)
        self.scopes.append({e.accu_var: accu})
        var2: t.Type | None = None
        if rng.kind == "list":
            var = rng.params[0]
            if e.iter_var2:
                var, var2 = t.INT, rng.params[0]
        elif rng.kind == "map":
            var = rng.params[0]
            var2 = rng.params[1]
        elif rng.kind in ("dyn", "error", "param"):
            t.is_assignable(self.m, t.DYN, rng)
            var = var2 = t.DYN
        else:
            self.error(e.iter_range, f"expression of type '{rng.fmt()}' cannot be range of a comprehension "
                                     "(must be list, map, or dynamic)")
            var = var2 = t.ERROR
        scope = {e.iter_var: var}
        if e.iter_var2 and var2 is not None:
            scope[e.iter_var2] = var2
        self.scopes.append(scope)
        self.check(e.loop_cond)
        self.assert_type(e.loop_cond, t.BOOL)
        self.check(e.loop_step)
        self.assert_type(e.loop_step, accu)
        self.scopes.pop()
        self.check(e.result)
        self.scopes.pop()
        self.set(e, t.substitute(self.m, self.get(e.result), False))

    def assert_type(self, e: Expr, ty: t.Type) -> None:
        actual = self.get(e)
        if not t.is_assignable(self.m, ty, actual):
            self.error(e, f"expected type '{ty.fmt()}' but found '{actual.fmt()}'")


def qualified_name(e: Expr) -> str | None:
    if e.kind == "ident":
        return e.name
    if e.kind == "select" and not e.test_only and e.operand is not None:
        inner = qualified_name(e.operand)
        return None if inner is None else inner + "." + e.name
    return None


def check(root: Expr, env: Environment) -> Checked:
    c = _Checker(env)
    c.check(root)
    for k, v in c.out.types.items():
        c.out.types[k] = t.substitute(c.m, v, True)
    return c.out
