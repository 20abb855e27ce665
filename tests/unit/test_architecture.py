"""The dependency direction of the design: a pure core, thin shells (checked by walking imports)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "numalign"

# package -> numalign subpackages it must never import (at module level or inside functions)
FORBIDDEN = {
    "core": ("numalign.k8s", "numalign.machine", "numalign.providers", "numalign.state", "numalign.adapters",
             "numalign.cli", "numalign.manager", "numalign.node", "numalign.agent", "numalign.sim"),
    "k8s": ("numalign.providers", "numalign.adapters", "numalign.cli", "numalign.node", "numalign.agent",
            "argparse", "io", "logging", "os", "pathlib", "sys"),  # pure: no flags, files, printing or logs
    "machine": ("numalign.providers", "numalign.adapters", "numalign.cli", "numalign.node", "numalign.agent"),
    "admission": ("numalign.providers", "numalign.adapters", "numalign.cli", "numalign.node", "numalign.agent",
                  "numalign.manager", "numalign.cluster"),
    "providers": ("numalign.adapters", "numalign.cli", "numalign.node", "numalign.agent"),
    "cluster": ("numalign.cli", "numalign.agent"),
    "report": ("numalign.cli", "numalign.agent"),
    "state": ("numalign.providers", "numalign.adapters", "numalign.cli", "numalign.node", "numalign.agent"),
}
# The pure core may use only the standard library (no third-party packages).
CORE_ALLOWED_THIRD_PARTY: tuple[str, ...] = ()


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


def test_layers_import_inward_only() -> None:
    bad = []
    for pkg, forbidden in FORBIDDEN.items():
        for f in sorted((SRC / pkg).rglob("*.py")):
            for mod in imports_of(f):
                if mod.startswith(forbidden):
                    bad.append(f"{f.relative_to(SRC)} imports {mod}")
    assert bad == []


def test_core_uses_only_the_standard_library() -> None:
    import sys

    bad = []
    for f in sorted((SRC / "core").rglob("*.py")):
        for mod in imports_of(f):
            top = mod.split(".")[0]
            if top in ("numalign", "__future__") or top in sys.stdlib_module_names:
                continue
            if not mod.startswith(CORE_ALLOWED_THIRD_PARTY or ("\0",)):
                bad.append(f"{f.relative_to(SRC)} imports {mod}")
    assert bad == []
