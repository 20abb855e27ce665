"""Build numalign's compiled core: the modules scripts/compiled-modules lists, compiled with mypyc.

    .venv/bin/python scripts/compile.py        (scripts/setup runs it)

The same mypy --strict source is compiled, so there is no second implementation to keep exact
(docs/performance.md). The digest covers every compiled source and every numalign module they import,
the module list, this script, mypyc's and Python's versions. Builds are kept, by digest, in a cache
shared by every clone and virtual environment of the user (NUMALIGN_BUILD_CACHE, else
$XDG_CACHE_HOME/numalign/compiled, else ~/.cache/numalign/compiled), as Go keeps its build cache: a
second clone, a CI run on a warm machine or a worktree at the same sources builds nothing. Never next to
the editable sources: an extension module beside its .py would win the import and keep running the old
code after an edit.

The virtual environment names its build in <venv>/numalign-compiled/: ACTIVE names a directory holding
this environment's manifest (the build's path and the sources' sizes and times here), which the loader
(src/numalign/_compiled.py) reads; it uses the build only while every source it was built from is
unchanged. Two setups at once are safe: a build is made once under a lock per digest and appears by an
atomic rename, a manifest is replaced atomically, and a build still named by a manifest is never pruned
while a setup holds its lock.

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
    """This virtual environment's record of its build: ACTIVE and the directory of its manifest."""
    return Path(sys.prefix) / "numalign-compiled"


def cache() -> Path:
    """Where builds are kept by digest, shared by every clone and environment of this user."""
    named = os.environ.get("NUMALIGN_BUILD_CACHE")
    if named:
        return Path(named)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "numalign" / "compiled"


KEEP_BUILDS = 12  # the cache keeps this many builds, the most recently used (a build is ~20 MB)
KEEP_DAYS = 14  # ... and any other used within this many days


@contextlib.contextmanager
def _locked(path: Path, wait: bool = True) -> Any:
    """An exclusive lock on path (created): yields True when held, False when another holds it and
    wait is False. Released when the process ends, however it ends."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _local_manifest(built: Path, paths: list[Path]) -> dict[str, Any]:
    """The build's manifest as this checkout sees it: the build's path, and the sources' sizes and times
    here (the same text as the build's, or the digest would differ), so the loader's check is a stat."""
    manifest: dict[str, Any] = json.loads((built / MANIFEST).read_text())
    manifest["build"] = str(built)
    for entry in [*manifest["modules"].values(), *manifest["imports"]]:
        src = PACKAGE / entry["source"]
        st = src.stat()
        if hashlib.sha256(src.read_bytes()).hexdigest() == entry["sha256"]:  # else: edited since; the
            entry["size"], entry["mtime_ns"] = st.st_size, st.st_mtime_ns  # loader's hash check says so
    return manifest


def _activate(built: Path, paths: list[Path]) -> None:
    """Name the build as this environment's: its manifest into <venv>/numalign-compiled/<digest>/, then
    ACTIVE, each replaced atomically (a numalign starting meanwhile reads the old or the new one)."""
    base = store()
    name = built.name
    base.mkdir(parents=True, exist_ok=True)
    with _locked(base / ".lock"):
        here = base / name
        here.mkdir(exist_ok=True)
        tmp = here / f".{MANIFEST}.{os.getpid()}"
        tmp.write_text(json.dumps(_local_manifest(built, paths), indent=1, sort_keys=True) + "\n")
        tmp.replace(here / MANIFEST)
        tmp = base / f".{ACTIVE}.{os.getpid()}"
        tmp.write_text(name + "\n")
        tmp.replace(base / ACTIVE)
        for old in base.iterdir():  # earlier manifests (and builds of the older layout): stale here
            if old.name != name and old.is_dir() and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.utime(built / MANIFEST)  # its last use, for the cache's pruning


def _prune(root: Path, keep: str) -> None:
    """Keep the KEEP_BUILDS most recently used builds (keep, this setup's, among them) that were used in
    the last KEEP_DAYS days; drop the others. A build whose lock another setup holds (building or naming
    it), or that a running numalign holds in use, is left alone. A build some other environment still
    names but that is dropped makes that environment run as Python, saying so, until its next setup."""
    found: list[tuple[float, Path]] = []
    for entry in root.iterdir():
        if entry.is_dir() and not entry.name.startswith(".") and entry.name != keep:
            try:
                found.append(((entry / MANIFEST).stat().st_mtime, entry))
            except OSError:
                found.append((0.0, entry))  # no manifest: the leftover of a build that was killed
    found.sort(reverse=True)
    horizon = time.time() - KEEP_DAYS * 86400
    for rank, (used, entry) in enumerate(found, start=1):
        if rank < KEEP_BUILDS and used >= horizon:
            continue
        # A running numalign holds <build>.inuse shared (numalign._compiled) and may import more of it.
        with _locked(root / f"{entry.name}.lock", wait=False) as held, \
                _locked(root / f"{entry.name}.inuse", wait=False) as unused:
            if held and unused:
                shutil.rmtree(entry, ignore_errors=True)
                with contextlib.suppress(OSError):
                    (root / f"{entry.name}.log").unlink()
    # Lock files stay while their build may be wanted (unlinking one another setup waits on would let a
    # third lock a new file beside it); a lock whose build is long gone goes.
    for lock in [*root.glob("*.lock"), *root.glob("*.inuse")]:
        with contextlib.suppress(OSError):
            if not (root / lock.stem).exists() and lock.stat().st_mtime < horizon - KEEP_DAYS * 86400:
                lock.unlink()


def _fail(why: str) -> int:
    with contextlib.suppress(FileNotFoundError):
        (store() / ACTIVE).unlink()  # an older build is stale for these sources anyway
    if os.environ.get("NUMALIGN_REQUIRE_COMPILED") == "1":
        say(f"error: {why} (NUMALIGN_REQUIRE_COMPILED=1 asks for the compiled core)")
        return 1
    say(f"{why}; numalign runs as pure Python (slower, the same answers)")
    return 0


def build() -> int:
    paths = modules()
    if not paths:
        return _fail(f"{LIST} lists no module")
    try:  # mypyc ships with mypy, which only the [test] extra brings; scripts/setup adds it when missing
        import mypy.version  # noqa: F401
        import mypyc  # noqa: F401
    except ImportError:
        return _fail(f"mypy (mypyc) is not installed in {sys.prefix}; install it there "
                     f"({sys.prefix}/bin/python -m pip install mypy) and run scripts/setup again")
    root = cache()
    name = digest(paths)
    final = root / name
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _fail(f"cannot create the build cache {root} ({e.strerror}); set NUMALIGN_BUILD_CACHE to a "
                     "writable directory")
    # One build per digest at a time: a second setup waits here, then finds the first one's build.
    with _locked(root / f"{name}.lock"):
        if not (final / MANIFEST).is_file():
            made = _build(paths, root, final)
            if made is not None:
                return made
        else:
            say(f"up to date ({len(paths)} modules compiled, {final})")
        _activate(final, paths)
    _prune(root, name)
    return 0


def _build(paths: list[Path], root: Path, final: Path) -> int | None:
    """Compile into a private directory, then rename it to final (atomic: a build is whole or absent).
    None when built; otherwise what build() returns."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return _fail(f"no C compiler ({cc}) on PATH to build the compiled core")
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    log = root / f"{final.name}.log"
    say(f"compiling {len(paths)} modules with mypyc into {final} (a few minutes the first time; log {log})")
    started = time.monotonic()
    # The manifest records the sources as read now, before the build: an edit meanwhile must show up as
    # a change (below), never as a build that claims the edited text.
    manifest = _manifest(final.name, paths)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            _mypyc(paths, work)
    except (Exception, SystemExit) as e:
        log.write_text(out.getvalue() + "\n" + "".join(traceback.format_exception(e)))
        shutil.rmtree(work, ignore_errors=True)
        return _fail(f"the mypyc build failed (see {log})")
    log.write_text(out.getvalue())
    if digest(paths) != final.name:  # an edit during the build: the libraries may hold either text
        shutil.rmtree(work, ignore_errors=True)
        return _fail("a compiled source changed during the build; run scripts/setup again")
    lib = work / "lib"
    for p in paths:
        manifest["modules"][module_name(p)]["library"] = str(_one(lib, module_name(p)).relative_to(lib))
    # The group's shared library, which the modules' shims import: a top-level module named after the
    # group, or, when the group is one module, the module's name with __mypyc beside it.
    for so in lib.rglob("*__mypyc*.so"):
        rel = so.relative_to(lib)
        manifest["shared"][".".join((*rel.parts[:-1], rel.name.split(".")[0]))] = str(rel)
    (lib / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if final.exists():  # a directory without a manifest (not one this script made: it renames whole builds)
        shutil.rmtree(final)
    lib.replace(final)
    shutil.rmtree(work, ignore_errors=True)
    say(f"done: {len(paths)} modules compiled in {time.monotonic() - started:.0f} s")
    return None


def _manifest(name: str, paths: list[Path]) -> dict[str, Any]:
    """What the build is made from: each compiled source and each numalign source it imports, by text."""
    def entry(p: Path) -> dict[str, Any]:
        st = p.stat()
        return {"source": str(p.relative_to(PACKAGE)), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                "size": st.st_size, "mtime_ns": st.st_mtime_ns}

    return {
        "digest": name,
        "python": sys.version.split()[0],
        "soabi": sysconfig.get_config_var("SOABI"),
        "modules": {module_name(p): entry(p) for p in paths},
        "shared": {},
        "imports": [entry(p) for p in imported(paths)],  # read by mypyc, not compiled: checked as modules are
    }


def _one(lib: Path, mod: str) -> Path:
    found = list(lib.joinpath(*mod.split(".")[:-1]).glob(mod.rsplit(".", 1)[1] + ".*.so"))
    if len(found) != 1:
        raise SystemExit(f"the build left {len(found)} libraries for {mod}")
    return found[0]


def _mypyc(paths: list[Path], work: Path) -> None:
    from mypyc.build import mypycify
    from setuptools import setup  # type: ignore[import-untyped]

    os.chdir(ROOT)  # mypy reads pyproject.toml's [tool.mypy] and names modules from src/
    exts = mypycify([str(p.relative_to(ROOT)) for p in paths], opt_level="3", multi_file=True,
                     target_dir=str(work / "c"))
    setup(name="numalign-compiled", ext_modules=exts, script_args=[
        "build_ext", "--build-lib", str(work / "lib"), "--build-temp", str(work / "tmp"),
        "--parallel", str(os.cpu_count() or 1)])


if __name__ == "__main__":
    sys.exit(build())
