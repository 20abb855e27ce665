"""The dependency direction of the design, checked by walking every import (ast) of every module.

Intended flow (docs/architecture.md): core <- k8s <- machine <- providers, state <- scopes, sim <-
manager <- node <- adapters, report, run <- deviceplugin <- cluster <- agent <- cli. A module may
import its own package and packages of a strictly lower rank, never a sibling of the same rank. Imports
inside functions count: they only delay a dependency, they do not remove it. And no two modules may
import each other, directly or through others.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "numalign"

# package (or top-level module) -> rank; every package and module of numalign must be listed.
RANK = {
    "errors": 0, "paths": 0, "metrics": 0,  # leaves: they import no other numalign module
    "core": 1, "limits": 1,  # limits: bounds on input and the bounded quoting of it in errors
    "validation": 2,  # field validators for decoded files (errors, limits)
    "k8s": 2,
    "machine": 3,
    "providers": 4, "state": 4, "admission": 4,  # admission: the kubelet's predicate admit handlers
    "scopes": 5, "sim": 5, "admit_handlers": 5, "nodestate": 5,
    "manager": 6,
    "node": 7,
    "adapters": 8, "report": 8, "answer": 8,
    "deviceplugin": 9, "run": 9,  # run: pins processes through the adapters (state directory, plugin sockets)
    "cluster": 10,
    "agent": 11,
    "cli": 12,
}
# Imports against the flow that another change removes; each names what removes it. The test also
# fails when an entry is no longer needed, so the list only shrinks.
KNOWN: set[tuple[str, str]] = set()
# Generated protobuf code is imported as a unit and never imports numalign.
GENERATED = "numalign.adapters.grpc.gen"
# The pure core may use only the standard library (no third-party packages).
CORE_ALLOWED_THIRD_PARTY: tuple[str, ...] = ()
# k8s/ holds pure models and parsers: no flags, files, printing or logs (the CLI and adapters do those).
K8S_FORBIDDEN_STDLIB = ("argparse", "io", "logging", "os", "pathlib", "sys")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py")) if not module_name(p).startswith(GENERATED + ".")}


def raw_imports(path: Path) -> Iterator[str]:
    """Every module an import statement names, anywhere in the file (functions and TYPE_CHECKING too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            # `from pkg import mod` imports the submodule; `from mod import name` the module
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            yield from subs if len(subs) == len(node.names) else [base, *subs]


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        deps = set()
        for target in raw_imports(path):
            if target.startswith(GENERATED):
                target = GENERATED
            if target.startswith("numalign") and target != name:
                deps.add(target)
        graph[name] = deps
    return graph


def package_of(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_every_package_has_a_rank() -> None:
    missing = sorted({package_of(m) for m in MODULES if package_of(m)} - set(RANK))
    assert missing == [], "add the new package to RANK (and docs/architecture.md) where it belongs in the flow"


def test_imports_follow_the_flow() -> None:
    bad = []
    used = set()
    for src, deps in sorted(edges().items()):
        for dst in sorted(deps):
            a, b = package_of(src), package_of(dst)
            if dst == "numalign":
                bad.append(f"{src} imports the numalign front door (import the module it re-exports)")
            elif a and a != b and RANK[b] >= RANK[a]:
                if (src, dst) in KNOWN:
                    used.add((src, dst))
                    continue
                bad.append(f"{src} ({a}, rank {RANK[a]}) imports {dst} ({b}, rank {RANK[b]})")
    assert bad == []
    assert sorted(KNOWN - used) == [], "these KNOWN exceptions are gone: remove them from the list"


def test_no_import_cycles() -> None:
    graph = {m: {d for d in deps if d in graph_nodes} for m, deps in edges().items() for graph_nodes in [MODULES]}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_walk_sees_imports_inside_functions_and_from_packages() -> None:
    """The checks above are only as good as the walk: it must see a lazy import and resolve
    `from package import module` to the module."""
    assert "numalign.providers.implicit.generators" in edges()["numalign.providers.cpu.policy_static"]
    assert "numalign.sim.replay_merge" in edges()["numalign.sim.replay"]


def test_core_uses_only_the_standard_library() -> None:
    bad = []
    for f in sorted((SRC / "core").rglob("*.py")):
        for mod in raw_imports(f):
            top = mod.split(".")[0]
            if top in ("numalign", "__future__") or top in sys.stdlib_module_names:
                continue
            if not mod.startswith(CORE_ALLOWED_THIRD_PARTY or ("\0",)):
                bad.append(f"{f.relative_to(SRC)} imports {mod}")
    assert bad == []


def test_k8s_reads_no_flags_files_or_logs() -> None:
    bad = [
        f"{f.relative_to(SRC)} imports {mod}"
        for f in sorted((SRC / "k8s").rglob("*.py"))
        for mod in raw_imports(f)
        if mod.split(".")[0] in K8S_FORBIDDEN_STDLIB
    ]
    assert bad == []
