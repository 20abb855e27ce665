"""The compiled core's loader: numalign's hot modules compiled with mypyc, used only while exact.

scripts/compile.py (run by scripts/setup) compiles the modules scripts/compiled-modules lists into a build
cache shared by the user's clones (~/.cache/numalign/compiled/<digest>/) and writes this environment's
manifest of it into <venv>/numalign-compiled/<digest>/, named by <venv>/numalign-compiled/ACTIVE. At
`import numalign` this module reads that manifest and, if the build is there and every source it was
made from is unchanged, puts a finder first on sys.meta_path that answers those modules with their
compiled libraries. Otherwise nothing is installed and every module is the Python source.

All or nothing, on purpose: mypyc compiles the listed modules as one group whose modules call each
other's native code directly, so one compiled module would keep running another's old body after that
other's source was edited. A single changed source therefore discards the whole build (STATUS says which
file, and `scripts/setup` rebuilds). A source is unchanged when its size and modification time are the
build's (Python's own .pyc rule) or, failing that, its SHA-256 is.

NUMALIGN_PURE=1 forces the Python source (the two must answer alike: conformance and `scripts/bench
decisions` run under both). NUMALIGN_COMPILED_DIR names a build (or a manifest's) directory instead of ACTIVE's.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGE = Path(__file__).resolve().parent
# What `numalign --version` says: "compiled core (N modules)" or why the Python source runs.
STATUS = "pure Python: no compiled core built (scripts/setup builds it)"
MODULES: frozenset[str] = frozenset()
LIBRARIES: Path | None = None  # the directory the compiled libraries load from, when they do
_IN_USE: int | None = None  # the descriptor holding the build's shared "in use" lock for the process's life


class _Finder(MetaPathFinder):
    """Answers the compiled modules (and the group's shared library) from the build directory."""

    def __init__(self, libraries: dict[str, Path]) -> None:
        self._libraries = libraries

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> ModuleSpec | None:
        lib = self._libraries.get(fullname)
        if lib is None:
            return None
        return ModuleSpec(fullname, ExtensionFileLoader(fullname, str(lib)), origin=str(lib))


def build_dir() -> Path | None:
    named = os.environ.get("NUMALIGN_COMPILED_DIR")
    if named:
        return Path(named)
    try:
        active = (Path(sys.prefix) / "numalign-compiled" / "ACTIVE").read_text().strip()
    except OSError:
        return None
    return Path(sys.prefix) / "numalign-compiled" / active if active else None


def stale_source(manifest: dict[str, Any], package: Path = PACKAGE) -> str | None:
    """The first source the build read (a compiled module, or a module one imports: mypyc inlined its
    Final constants) that is not the one it read (its path), or None."""
    for entry in [*manifest["modules"].values(), *manifest.get("imports", ())]:
        src = package / entry["source"]
        try:
            st = src.stat()
            if st.st_size == entry["size"] and st.st_mtime_ns == entry["mtime_ns"]:
                continue
            if hashlib.sha256(src.read_bytes()).hexdigest() == entry["sha256"]:
                continue
        except OSError:
            pass
        return entry["source"]  # type: ignore[no-any-return]
    return None


def install() -> None:
    """Put the compiled core first on the import path if it is built and exact for these sources."""
    global STATUS, MODULES, LIBRARIES
    if os.environ.get("NUMALIGN_PURE") == "1":
        STATUS = "pure Python (NUMALIGN_PURE=1)"
        return
    where = build_dir()
    if where is None:
        return
    try:
        manifest = json.loads((where / "manifest.json").read_text())
        modules: dict[str, Any] = manifest["modules"]
        shared: dict[str, str] = manifest["shared"]
    except (OSError, ValueError, KeyError, TypeError):
        STATUS = f"pure Python: the compiled core at {where} is unreadable; run scripts/setup"
        return
    if manifest.get("soabi") not in {s.split(".")[1] for s in EXTENSION_SUFFIXES if s.count(".") == 2}:
        STATUS = f"pure Python: the compiled core at {where} was built for {manifest.get('soabi')}; run scripts/setup"
        return
    changed = stale_source(manifest)
    if changed is not None:
        STATUS = f"pure Python: src/numalign/{changed} changed since the core was compiled; run scripts/setup"
        return
    built = Path(manifest.get("build") or where)  # the shared cache's build, or the manifest's own directory
    if not _hold_in_use(built) or not (built / "manifest.json").is_file():
        STATUS = f"pure Python: the compiled core's build {built} is gone (pruned from the cache); run scripts/setup"
        return
    libraries = {name: built / entry["library"] for name, entry in modules.items()}
    libraries.update({name: built / file for name, file in shared.items()})
    sys.meta_path.insert(0, _Finder(libraries))
    MODULES = frozenset(modules)
    LIBRARIES = built
    STATUS = f"compiled core ({len(modules)} modules, mypyc)"


def _hold_in_use(built: Path) -> bool:
    """Take a shared lock on <build>.inuse beside the build, kept until the process ends: a long-running
    process (serve, simulate) imports some compiled modules late, and scripts/compile.py's prune leaves a
    build alone while anyone holds it. False when the prune holds it (the build is being removed). Where
    the lock cannot be made (a read-only cache), the build is used without it, as before."""
    global _IN_USE
    import fcntl

    try:
        fd = os.open(built.parent / f"{built.name}.inuse", os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    except OSError:
        os.close(fd)
        return True
    if _IN_USE is not None:
        os.close(_IN_USE)
    _IN_USE = fd
    return True
