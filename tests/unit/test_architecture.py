"""The dependency direction of the design, checked by walking every import (ast) of every module.

The layers are declared once, in numalign.LAYERS (and numalign.KUBELET_LAYERS between the subpackages of
kubelet/); docs/architecture.md draws them. A module may import its own package and packages of a
strictly lower layer, never a sibling of the same layer. Imports inside functions count: they only
delay a dependency, they do not remove it. And no two modules may import each other, directly or
through others.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from numalign import KUBELET_LAYERS, LAYERS

SRC = Path(__file__).resolve().parents[2] / "src" / "numalign"
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

# package (or top-level module) -> rank; every package and module of numalign must be listed.
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
KUBELET_RANK = {name: rank for rank, names in enumerate(KUBELET_LAYERS) for name in names}
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


def kubelet_part(module: str) -> str:
    """The subpackage (or module) of kubelet/ a module belongs to; "" outside kubelet/."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "kubelet" else ""


def test_every_package_has_a_rank() -> None:
    missing = sorted({package_of(m) for m in MODULES if package_of(m)} - set(RANK))
    assert missing == [], "add the new package to RANK (and docs/architecture.md) where it belongs in the flow"


def test_every_kubelet_part_has_a_rank() -> None:
    missing = sorted({kubelet_part(m) for m in MODULES if kubelet_part(m)} - set(KUBELET_RANK))
    assert missing == [], "add the new part of kubelet/ to numalign.KUBELET_LAYERS where it belongs"


def test_kubelet_parts_follow_the_flow() -> None:
    bad = []
    for src, deps in sorted(edges().items()):
        for dst in sorted(deps):
            a, b = kubelet_part(src), kubelet_part(dst)
            if a and b and a != b and KUBELET_RANK[b] >= KUBELET_RANK[a]:
                bad.append(f"{src} ({a}, layer {KUBELET_RANK[a]}) imports {dst} ({b}, layer {KUBELET_RANK[b]})")
    assert bad == []


def test_the_top_level_holds_only_the_leaves_and_packages() -> None:
    loose = sorted(p.stem for p in SRC.glob("*.py") if p.stem != "__init__")
    assert loose == ["__main__", "_compiled", "errors", "limits", "metrics", "paths", "validation"]


def test_docs_draw_the_declared_layers() -> None:
    """docs/architecture.md's layer list is the declared one, layer by layer."""
    text = DOC.read_text(encoding="utf-8")
    drawn = re.findall(r"^\| (\d+) \| ([^|]+) \|", text[text.index("## Layers"):], flags=re.M)
    want = [(str(i), ", ".join(names)) for i, names in enumerate(LAYERS)]
    assert [(n, names.strip().replace("`", "")) for n, names in drawn][: len(want)] == want


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
    assert "numalign.cli.options.nodeargs" in edges()["numalign.cli.commands.admit"]
    assert "numalign.replay.merge" in edges()["numalign.replay.runner"]


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


# The k8s layer's one reader of the machine, and why: cel-go's timestamp getters with a zone read the
# system's time zone database in-process (Go's time.LoadLocation), so numalign's do too.
K8S_MACHINE_READERS = {"k8s/dra/cel/zones.py": ("os", "pathlib")}


def test_k8s_reads_no_flags_files_or_logs() -> None:
    bad = [
        f"{f.relative_to(SRC)} imports {mod}"
        for f in sorted((SRC / "k8s").rglob("*.py"))
        for mod in raw_imports(f)
        if mod.split(".")[0] in K8S_FORBIDDEN_STDLIB
        and mod.split(".")[0] not in K8S_MACHINE_READERS.get(str(f.relative_to(SRC)), ())
    ]
    assert bad == []


def test_scheduler_and_kubelet_are_siblings() -> None:
    """The scheduler's DRA allocator and the kubelet decide on one node from the same objects (k8s/),
    as kube-scheduler and the kubelet are separate programs: same layer, so neither may import the other."""
    assert RANK["scheduler"] == RANK["kubelet"]
    crossing = sorted(
        f"{src} imports {dst}"
        for src, deps in edges().items()
        for dst in deps
        if {package_of(src), package_of(dst)} == {"kubelet", "scheduler"}
    )
    assert crossing == []
