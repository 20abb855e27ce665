"""Build numalign's compiled core: the modules scripts/compiled-modules lists, compiled with mypyc.

    .venv/bin/python scripts/compile.py        (scripts/setup runs it)

The same mypy --strict source is compiled, so there is no second implementation to keep exact
(docs/performance.md). The build goes to <venv>/numalign-compiled/<digest>/, never next to the
editable sources: an extension module beside its .py would win the import and keep running the old
code after an edit. The digest covers every compiled source, the module list, this script, mypyc's and
Python's versions, so a second run with nothing changed does nothing. The loader
(src/numalign/_compiled.py) reads the manifest written here and uses the build only while every
source it was built from is unchanged.

Without a C compiler, or when the build fails, it says so in one line (the log's path) and numalign
runs as pure Python; NUMALIGN_REQUIRE_COMPILED=1 (CI) makes that an error (exit 1).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "numalign"
LIST = ROOT / "scripts" / "compiled-modules"
MANIFEST = "manifest.json"
ACTIVE = "ACTIVE"  # the file naming the digest directory in use (numalign._compiled reads it)


def say(msg: str) -> None:
    print(f"scripts/compile.py: {msg}", file=sys.stderr)


def modules() -> list[Path]:
    """The listed sources, sorted; '!' globs subtract."""
    chosen: set[Path] = set()
    for raw in LIST.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        drop = line.startswith("!")
        found = {p for p in PACKAGE.glob(line.lstrip("!")) if p.suffix == ".py" and p.name != "__init__.py"}
        chosen = chosen - found if drop else chosen | found
    return sorted(chosen)


def imported(paths: list[Path]) -> list[Path]:
    """The numalign sources the compiled ones import, transitively, that are not compiled themselves.

    mypyc reads them too: it inlines their Final constants of literal value (k8s/resources.py's
    RESOURCE_CPU, k8s/dra/types.py's ALLOCATION_RESULTS_MAX_SIZE, ...) into the compiled code, so an edit
    of one makes the build stale as surely as an edit of a compiled module. They are in the digest and
    the manifest, and the loader checks them as it checks the compiled ones.
    """
    import ast

    def source(mod: str) -> Path | None:
        base = PACKAGE.joinpath(*mod.split(".")[1:])
        for p in (base.with_suffix(".py"), base / "__init__.py"):
            if p.is_file():
                return p
        return None

    seen: set[Path] = set(paths)
    todo = list(paths)
    while todo:
        tree = ast.parse(todo.pop().read_bytes())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                parts = name.split(".")
                if parts[0] != "numalign":
                    continue
                for i in range(2, len(parts) + 1):  # the packages above are imported (and read) too
                    found = source(".".join(parts[:i]))
                    if found is not None and found not in seen:
                        seen.add(found)
                        todo.append(found)
    return sorted(seen - set(paths))


def module_name(path: Path) -> str:
    return "numalign." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def digest(paths: list[Path]) -> str:
    import mypy.version

    h = hashlib.sha256()
    for part in (sys.version, sysconfig.get_config_var("SOABI") or "", mypy.version.__version__,
                 Path(__file__).read_text(), LIST.read_text()):
        h.update(part.encode() + b"\0")
    for p in [*paths, *imported(paths)]:
        h.update(str(p.relative_to(PACKAGE)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def store() -> Path:
    return Path(sys.prefix) / "numalign-compiled"


def _activate(base: Path, name: str) -> None:
    tmp = base / f".{ACTIVE}.{os.getpid()}"
    tmp.write_text(name + "\n")
    tmp.replace(base / ACTIVE)  # atomic: a numalign starting meanwhile reads the old or the new name
    for old in base.iterdir():  # earlier builds: stale for these sources
        if old.name not in (name, ACTIVE) and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)


def _fail(why: str) -> int:
    base = store()
    with contextlib.suppress(FileNotFoundError):
        (base / ACTIVE).unlink()  # an older build is stale for these sources anyway
    if os.environ.get("NUMALIGN_REQUIRE_COMPILED") == "1":
        say(f"error: {why} (NUMALIGN_REQUIRE_COMPILED=1 asks for the compiled core)")
        return 1
    say(f"{why}; numalign runs as pure Python (slower, the same answers)")
    return 0


def build() -> int:
    paths = modules()
    if not paths:
        return _fail(f"{LIST} lists no module")
    base = store()
    name = digest(paths)
    final = base / name
    if (final / MANIFEST).is_file():
        _activate(base, name)
        say(f"up to date ({len(paths)} modules compiled, {final})")
        return 0
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return _fail(f"no C compiler ({cc}) on PATH to build the compiled core")
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=base))
    log = base / "build.log"
    say(f"compiling {len(paths)} modules with mypyc into {final} (a few minutes the first time; log {log})")
    started = time.monotonic()
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            _mypyc(paths, work)
    except (Exception, SystemExit) as e:
        log.write_text(out.getvalue() + "\n" + "".join(traceback.format_exception(e)))
        shutil.rmtree(work, ignore_errors=True)
        return _fail(f"the mypyc build failed (see {log})")
    log.write_text(out.getvalue())
    if digest(paths) != name:  # an edit during the build: the libraries may hold either text
        shutil.rmtree(work, ignore_errors=True)
        return _fail("a compiled source changed during the build; run scripts/setup again")
    lib = work / "lib"
    manifest: dict[str, Any] = {
        "digest": name,
        "python": sys.version.split()[0],
        "soabi": sysconfig.get_config_var("SOABI"),
        "modules": {},
        "shared": {},
        "imports": [],  # read by mypyc, not compiled: the loader checks them as it checks the modules
    }
    for p in imported(paths):
        st = p.stat()
        manifest["imports"].append({
            "source": str(p.relative_to(PACKAGE)), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
            "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    for p in paths:
        mod = module_name(p)
        so = _one(lib, mod)
        st = p.stat()
        manifest["modules"][mod] = {
            "source": str(p.relative_to(PACKAGE)), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
            "size": st.st_size, "mtime_ns": st.st_mtime_ns, "library": str(so.relative_to(lib)),
        }
    for so in lib.glob("*__mypyc*.so"):  # the group's shared library: a top-level module the shims import
        manifest["shared"][so.name.split(".")[0]] = so.name
    (lib / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if final.exists():
        shutil.rmtree(final)
    lib.replace(final)
    shutil.rmtree(work, ignore_errors=True)
    _activate(base, name)
    say(f"done: {len(paths)} modules compiled in {time.monotonic() - started:.0f} s")
    return 0


def _one(lib: Path, mod: str) -> Path:
    found = list(lib.joinpath(*mod.split(".")[:-1]).glob(mod.rsplit(".", 1)[1] + ".*.so"))
    if len(found) != 1:
        raise SystemExit(f"the build left {len(found)} libraries for {mod}")
    return found[0]


def _mypyc(paths: list[Path], work: Path) -> None:
    from mypyc.build import mypycify
    from setuptools import setup  # type: ignore[import-untyped]

    os.chdir(ROOT)  # mypy reads pyproject.toml's [tool.mypy] and names modules from src/
    exts = mypycify([str(p.relative_to(ROOT)) for p in paths], opt_level="3", target_dir=str(work / "c"))
    setup(name="numalign-compiled", ext_modules=exts, script_args=[
        "build_ext", "--build-lib", str(work / "lib"), "--build-temp", str(work / "tmp"),
        "--parallel", str(os.cpu_count() or 1)])


if __name__ == "__main__":
    sys.exit(build())
