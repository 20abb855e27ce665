"""What of a device a selector reads, so that devices alike in it share one evaluation.

A selector's answer (its value, or its runtime error and cost) is a function of the `device` variable's
parts it reads. Where every use of `device` is a fixed path -- `device.driver`,
`device.allowMultipleAllocations`, `device.attributes["domain"].name` or `device.capacity["domain"]
["name"]` (also with `has()`, `.?` and `[?]`) -- those paths' values are all it reads, and the 64 GPUs
of a node that differ only in their NUMA node get one evaluation of a class selector that reads the
model. Anything else (`device` or a domain map used whole, a macro's variable named `device`) reads
more than paths can say: such a selector is evaluated on each device, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from numalign.k8s.dra.cel.ast import STRING, Expr
from numalign.k8s.dra.cel.values import MISSING, UInt
from numalign.k8s.dra.semver import Semver

Path = tuple[str, ...]
_INDEX: Final = frozenset({"_[_]", "_[?_]", "_?._"})
_SCALARS: Final = (str, int, bool, UInt, Semver)  # values CEL tells apart exactly as Python's == with type
_ABSENT: Final = "absent"  # a path's domain or name the device does not have


def device_paths(root: Expr) -> tuple[Path, ...] | None:
    """The paths of `device` the expression reads, or None where it reads `device` otherwise."""
    parents: dict[int, Expr] = {}
    uses: list[Expr] = []
    for e, parent in _walk(root, None):
        if parent is not None:
            parents[id(e)] = parent
        if e.kind == "comp" and "device" in (e.iter_var, e.iter_var2, e.accu_var):
            return None
        if e.kind == "ident" and e.name == "device":
            uses.append(e)
    paths: set[Path] = set()
    for use in uses:
        path = _path_of(use, parents)
        if path is None:
            return None
        paths.add(path)
    return tuple(sorted(paths))


def _walk(e: Expr, parent: Expr | None) -> Iterator[tuple[Expr, Expr | None]]:
    yield e, parent
    children = [e.operand, *e.args, *(x for k, v, _ in e.entries for x in (k, v)), e.iter_range, e.accu_init,
                e.loop_cond, e.loop_step, e.result]
    for child in children:
        if child is not None:
            yield from _walk(child, e)


def _path_of(use: Expr, parents: Mapping[int, Expr]) -> Path | None:
    top = parents.get(id(use))
    if top is None or top.kind != "select" or top.operand is not use:
        return None
    if top.name in ("driver", "allowMultipleAllocations"):
        return (top.name,)
    if top.name not in ("attributes", "capacity") or top.test_only:
        return None
    domain_expr = parents.get(id(top))
    domain = _key_of(domain_expr, top)
    if domain is None or domain_expr is None:
        return None
    name = _key_of(parents.get(id(domain_expr)), domain_expr)
    return None if name is None else (top.name, domain, name)


def _key_of(e: Expr | None, operand: Expr) -> str | None:
    """The literal name `e` selects or indexes from `operand` (a field, `[...]`, `.?`, `[?...]`)."""
    if e is None:
        return None
    if e.kind == "select" and e.operand is operand:
        return e.name
    if (e.kind == "call" and e.name in _INDEX and len(e.args) == 2 and e.args[0] is operand
            and e.args[1].kind == "lit" and e.args[1].lit_kind == STRING):
        return str(e.args[1].value)
    return None


def project(paths: tuple[Path, ...], device: Mapping[str, Any]) -> tuple[object, ...] | None:
    """The values a selector reading `paths` sees on `device` (device_variables' map), each with its type
    (True and 1 differ to CEL); None where a value is not one whose equality is CEL's (a quantity, say)."""
    out: list[object] = []
    for path in paths:
        value: Any = device.get(path[0], MISSING)
        depth = 1
        for step in path[1:]:
            if value is MISSING or not isinstance(value, dict):
                break
            value = value.get(step, MISSING)
            depth += 1
        if value is MISSING:  # where it is missing matters: `.domain` on the map fails, `["domain"]` does not
            out.append(absent_key(depth))
            continue
        key = value_key(value)
        if key is None:
            return None
        out.append(key)
    return tuple(out)


def absent_key(depth: int) -> object:
    """The key of a path missing from its `depth`-th step on (2: the domain, 3: the name)."""
    return _ABSENT, depth


def value_key(value: Any) -> object | None:
    """A value's key with its type (True and 1 differ to CEL); None where CEL's equality is not Python's."""
    if isinstance(value, list):
        items = [value_key(v) for v in value]
        return None if any(i is None for i in items) else ("list", tuple(items))
    if type(value) in _SCALARS:
        return type(value), value
    return None
