"""The compiled core (scripts/compile.py, numalign._compiled): used only while exact for its sources.

The build is real where scripts/setup made one (CI requires it: NUMALIGN_REQUIRE_COMPILED=1, set by
scripts/test); the staleness rules are checked on real copies of the sources in any case.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import numalign
from numalign import _compiled

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "numalign"
PROBE = "import numalign.core.merge as m, numalign._compiled as c; print(m.__file__); print(c.STATUS)"


def _run(code: str, env: dict[str, str] | None = None, pythonpath: Path | None = None) -> list[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("NUMALIGN_PURE", "NUMALIGN_COMPILED_DIR")}
    full.update(env or {})
    if pythonpath is not None:
        full["PYTHONPATH"] = str(pythonpath)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=full,
                         cwd=pythonpath or ROOT)
    return out.stdout.splitlines()


def _entry(package: Path, rel: str) -> dict[str, Any]:
    src = package / rel
    st = src.stat()
    return {"source": rel, "sha256": hashlib.sha256(src.read_bytes()).hexdigest(), "size": st.st_size,
            "mtime_ns": st.st_mtime_ns, "library": rel.replace(".py", ".so")}


def test_a_source_is_stale_only_when_its_text_changed(tmp_path: Path) -> None:
    package = tmp_path / "numalign"
    for rel in ("core/bitmask.py", "core/merge.py"):
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SRC / rel, package / rel)
    manifest = {"modules": {rel: _entry(package, rel) for rel in ("core/bitmask.py", "core/merge.py")}}
    assert _compiled.stale_source(manifest, package) is None
    # Touched (a checkout, a copy): the time differs, the text does not.
    os.utime(package / "core/merge.py", ns=(1, 1))
    assert _compiled.stale_source(manifest, package) is None
    # Edited: that module is named, so the whole group is left (the loader's all-or-nothing).
    text = (package / "core/merge.py").read_text()
    (package / "core/merge.py").write_text(text + "\n# edited\n")
    assert _compiled.stale_source(manifest, package) == "core/merge.py"
    (package / "core/merge.py").unlink()
    assert _compiled.stale_source(manifest, package) == "core/merge.py"


def test_a_build_made_from_other_sources_is_not_loaded(tmp_path: Path) -> None:
    """A build whose manifest does not match the sources: numalign runs as Python and says which file."""
    entry = _entry(SRC, "core/merge.py")
    entry.update(sha256="0" * 64, size=entry["size"] + 1)
    build = tmp_path / "build"
    build.mkdir()
    import sysconfig

    (build / "manifest.json").write_text(json.dumps({
        "soabi": sysconfig.get_config_var("SOABI"), "modules": {"numalign.core.merge": entry}, "shared": {}}))
    merge_file, status = _run(PROBE, {"NUMALIGN_COMPILED_DIR": str(build)})
    assert merge_file.endswith("core/merge.py")
    assert status == "pure Python: src/numalign/core/merge.py changed since the core was compiled; run scripts/setup"


def test_a_build_for_another_python_is_not_loaded(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "manifest.json").write_text(json.dumps({"soabi": "cpython-39-x86_64-linux-gnu", "modules": {},
                                                     "shared": {}}))
    merge_file, status = _run(PROBE, {"NUMALIGN_COMPILED_DIR": str(build)})
    assert merge_file.endswith("core/merge.py")
    assert "built for cpython-39-x86_64-linux-gnu" in status


def test_the_compiled_core_is_used_where_built_and_numalign_pure_forces_python() -> None:
    built = _compiled.build_dir()
    required = os.environ.get("NUMALIGN_REQUIRE_COMPILED") == "1"
    merge_file, status = _run(PROBE)
    if required or (built is not None and _compiled.MODULES):
        assert _compiled.STATUS.startswith("compiled core ("), _compiled.STATUS
        assert merge_file.endswith(".so") and str(_compiled.LIBRARIES) in merge_file
        assert status.startswith("compiled core (")
    else:
        assert merge_file.endswith(".py")
        assert status.startswith("pure Python")
    pure_file, pure_status = _run(PROBE, {"NUMALIGN_PURE": "1"})
    assert pure_file.endswith("core/merge.py")
    assert pure_status == "pure Python (NUMALIGN_PURE=1)"


def test_an_edited_copy_of_the_sources_runs_as_python(tmp_path: Path) -> None:
    """The real build, real sources: a copy of the package is exact for the build until one compiled
    module's text changes; then none of the build is used."""
    shutil.copytree(SRC, tmp_path / "numalign", copy_function=shutil.copy2,
                    ignore=shutil.ignore_patterns("__pycache__"))
    before = _run(PROBE, pythonpath=tmp_path)
    assert before[0].startswith(str(tmp_path)) or before[0].endswith(".so")
    expected_compiled = _compiled.STATUS.startswith("compiled core (")
    assert before[0].endswith(".so") == expected_compiled
    merge = tmp_path / "numalign" / "core" / "merge.py"
    merge.write_text(merge.read_text() + "\n# edited after the build\n")
    after = _run(PROBE, pythonpath=tmp_path)
    assert after[0] == str(merge)
    if expected_compiled:
        assert after[1] == ("pure Python: src/numalign/core/merge.py changed since the core was compiled; "
                            "run scripts/setup")


def test_an_edited_module_the_core_imports_makes_it_stale(tmp_path: Path) -> None:
    """k8s/version.py is not compiled, but mypyc reads it for the compiled kubelet (and inlines the Final
    constants of such modules): an edit of it discards the build as an edit of a compiled module does."""
    spec = importlib.util.spec_from_file_location("numalign_compile_script", ROOT / "scripts" / "compile.py")
    assert spec is not None and spec.loader is not None
    build_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_script)
    compiled = build_script.modules()
    reads = {str(p.relative_to(SRC)) for p in build_script.imported(compiled)}
    assert "errors.py" in reads and "k8s/version.py" in reads
    assert not reads & {str(p.relative_to(SRC)) for p in compiled}
    package = tmp_path / "numalign"
    shutil.copytree(SRC, package, copy_function=shutil.copy2, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = {"modules": {}, "imports": [_entry(package, rel) for rel in sorted(reads)]}
    assert _compiled.stale_source(manifest, package) is None
    version = package / "k8s" / "version.py"
    version.write_text(version.read_text() + "\n# edited\n")
    assert _compiled.stale_source(manifest, package) == "k8s/version.py"


def test_admission_answers_alike_compiled_and_pure() -> None:
    cmd = [sys.executable, "-m", "numalign", "admit", str(ROOT / "docs/examples/train.yaml"),
           "--machine", "dual-socket", "-o", "json"]
    base = {k: v for k, v in os.environ.items() if k != "NUMALIGN_PURE"}
    compiled = subprocess.run(cmd, capture_output=True, text=True, env=base, cwd=ROOT)
    pure = subprocess.run(cmd, capture_output=True, text=True, env={**base, "NUMALIGN_PURE": "1"}, cwd=ROOT)
    assert (compiled.returncode, compiled.stdout) == (pure.returncode, pure.stdout)
    assert json.loads(compiled.stdout)


def test_version_says_which_core_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "numalign", "--version"], capture_output=True, text=True,
                         check=True, env={**os.environ, "NUMALIGN_PURE": "1"}).stdout
    assert out.startswith("numalign ") and out.rstrip().endswith("(pure Python (NUMALIGN_PURE=1))")
    assert numalign.__name__ == "numalign"


def _compile_script() -> Any:
    spec = importlib.util.spec_from_file_location("numalign_compile_script_cache", ROOT / "scripts" / "compile.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _setup_in(clone: Path, prefix: Path, cache: Path) -> subprocess.Popen[str]:
    """scripts/compile.py of a clone, as a virtual environment at prefix runs it (sys.prefix is where
    it records its build), against the build cache at cache."""
    code = ("import runpy, sys; sys.prefix = sys.argv[1]; sys.argv = sys.argv[2:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMALIGN_PURE", "NUMALIGN_REQUIRE_COMPILED")}
    env.update(NUMALIGN_BUILD_CACHE=str(cache), NUMALIGN_REQUIRE_COMPILED="1")
    return subprocess.Popen([sys.executable, "-c", code, str(prefix), str(clone / "scripts" / "compile.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_setups_at_once_build_once_and_share_the_build(tmp_path: Path) -> None:
    """A real mypyc build of a two-module list in a clone: two environments set up at the same time; the
    per-digest lock makes one build and the other wait for it; both name the one build in the cache,
    and numalign from the clone loads it. A third clone with the same sources builds nothing."""
    clones = [tmp_path / "clone-a", tmp_path / "clone-b"]
    for clone in clones:
        (clone / "scripts").mkdir(parents=True)
        shutil.copy2(ROOT / "scripts" / "compile.py", clone / "scripts" / "compile.py")
        listed = "# two modules, for the test\ncore/bitmask.py\ncore/hint.py\n"
        (clone / "scripts" / "compiled-modules").write_text(listed)
        shutil.copy2(ROOT / "pyproject.toml", clone / "pyproject.toml")
        shutil.copytree(SRC, clone / "src" / "numalign", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    setups = [_setup_in(clones[0], tmp_path / f"venv-{i}", cache) for i in (1, 2)]
    said = [p.communicate() for p in setups]
    assert [p.returncode for p in setups] == [0, 0], said
    logs = [err for _, err in said]
    assert sum("compiling 2 modules with mypyc" in err for err in logs) == 1, logs
    assert sum("up to date (2 modules compiled" in err for err in logs) == 1, logs
    builds = [p for p in cache.iterdir() if p.is_dir()]
    assert len(builds) == 1 and (builds[0] / "manifest.json").is_file()
    digest = builds[0].name
    for i in (1, 2):
        store = tmp_path / f"venv-{i}" / "numalign-compiled"
        assert (store / "ACTIVE").read_text().strip() == digest
        local = json.loads((store / digest / "manifest.json").read_text())
        assert local["build"] == str(builds[0])
    probe = "import numalign.core.bitmask as b, numalign._compiled as c; print(b.__file__); print(c.STATUS)"
    loaded = _run(probe, {"NUMALIGN_COMPILED_DIR": str(tmp_path / "venv-1" / "numalign-compiled" / digest)},
                  pythonpath=clones[0] / "src")
    assert loaded[0].startswith(str(builds[0])) and loaded[0].endswith(".so")
    assert loaded[1] == "compiled core (2 modules, mypyc)"
    third = _setup_in(clones[1], tmp_path / "venv-3", cache)
    _, err = third.communicate()
    assert third.returncode == 0 and "up to date (2 modules compiled" in err, err
    # The cache pruned the build away (another clone's setup, weeks later): the loader says so, runs Python.
    shutil.rmtree(builds[0])
    gone = _run(probe, {"NUMALIGN_COMPILED_DIR": str(tmp_path / "venv-1" / "numalign-compiled" / digest)},
                pythonpath=clones[0] / "src")
    assert gone[0] == str(clones[0] / "src" / "numalign" / "core" / "bitmask.py")
    assert gone[1] == (f"pure Python: the compiled core's build {builds[0]} is gone (pruned from the cache); "
                       "run scripts/setup")


def test_the_cache_keeps_recent_builds_and_those_in_use(tmp_path: Path) -> None:
    script = _compile_script()
    cache = tmp_path / "cache"
    now = 2_000_000_000.0
    old = now - (script.KEEP_DAYS + 1) * 86400
    names = [f"build{i:02d}" for i in range(script.KEEP_BUILDS + 3)]
    for i, name in enumerate(names):  # build00 the most recently used
        (cache / name).mkdir(parents=True)
        (cache / name / "manifest.json").write_text("{}")
        (cache / f"{name}.log").write_text("log")
        used = old if name == "build05" else now - i * 60  # all used lately but build05, weeks ago
        os.utime(cache / name / "manifest.json", (used, used))
    (cache / ".build-killed").mkdir()  # a killed build's private directory: not a build
    import time as time_module

    real_time = time_module.time
    try:
        script.time.time = lambda: now
        with script._locked(cache / "build14.lock"):  # another setup is using the oldest one right now
            script._prune(cache, keep="build13")
    finally:
        script.time.time = real_time
    kept = sorted(p.name for p in cache.iterdir() if p.is_dir() and not p.name.startswith("."))
    # The most recently used KEEP_BUILDS - 1 but the one weeks old, the one this setup activated, and the
    # one whose lock another holds.
    recent = [n for n in names if n != "build05"][: script.KEEP_BUILDS - 1]
    assert kept == [*recent, "build13", "build14"]
    assert not (cache / "build12.log").exists() and not (cache / "build05.log").exists()
    assert (cache / "build13.log").exists()
    assert (cache / ".build-killed").is_dir()


def test_a_build_a_running_numalign_holds_is_not_pruned(tmp_path: Path) -> None:
    """review L2: serve imports some compiled modules late; the prune must not remove them under it."""
    import fcntl

    script = _compile_script()
    cache = tmp_path / "cache"
    now = 2_000_000_000.0
    for name in ("old", "held", "current"):
        (cache / name).mkdir(parents=True)
        (cache / name / "manifest.json").write_text("{}")
    weeks = now - (script.KEEP_DAYS + 1) * 86400
    for name in ("old", "held"):  # both unused by any setup for weeks: pruned unless in use
        os.utime(cache / name / "manifest.json", (weeks, weeks))
    saved = _compiled._IN_USE
    try:
        assert _compiled._hold_in_use(cache / "held")  # as install() does for the build it loads
        holder = _compiled._IN_USE
        import time as time_module

        real_time = time_module.time
        try:
            script.time.time = lambda: now
            script._prune(cache, keep="current")
        finally:
            script.time.time = real_time
        assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == ["current", "held"]
        # the prune's own exclusive try is what the holder's shared lock refuses
        with (cache / "held.inuse").open("a") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert holder is not None
        os.close(holder)
        _compiled._IN_USE = None
        script.time.time = lambda: now
        try:
            script._prune(cache, keep="current")
        finally:
            script.time.time = real_time
        assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == ["current"]
    finally:
        _compiled._IN_USE = saved


def test_a_source_edited_during_the_build_leaves_no_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build reads the sources while it runs: an edit meanwhile discards it (nothing enters the
    cache under the old text's digest), and setup says to run again."""
    script = _compile_script()
    package = tmp_path / "src" / "numalign"
    shutil.copytree(SRC, package, ignore=shutil.ignore_patterns("__pycache__"))
    listed = tmp_path / "compiled-modules"
    listed.write_text("core/bitmask.py\ncore/hint.py\n")
    monkeypatch.setattr(script, "PACKAGE", package)
    monkeypatch.setattr(script, "LIST", listed)
    monkeypatch.setattr(script.sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("NUMALIGN_BUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NUMALIGN_REQUIRE_COMPILED", raising=False)

    def edit_while_building(paths: list[Path], work: Path) -> None:
        hint = package / "core" / "hint.py"
        hint.write_text(hint.read_text() + "\n# edited during the build\n")
        (work / "lib").mkdir()

    monkeypatch.setattr(script, "_mypyc", edit_while_building)
    monkeypatch.setattr(script.shutil, "which", lambda _: "/usr/bin/cc")
    assert script.build() == 0  # pure Python, said on one line
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.is_dir() and not p.name.startswith(".")] == []
    assert not (tmp_path / "venv" / "numalign-compiled" / "ACTIVE").exists()


def test_setup_without_mypy_says_so_in_one_line_and_runs_as_python(tmp_path: Path) -> None:
    """`scripts/run` installs numalign without the [test] extra: an environment without mypy (mypyc)
    gets one line and pure Python (exit 0), or exit 1 under NUMALIGN_REQUIRE_COMPILED=1, never a
    traceback (before: ModuleNotFoundError from the digest, and scripts/run stopped)."""
    code = ("import runpy, sys; sys.modules['mypy'] = None; sys.modules['mypyc'] = None; "
            "sys.prefix = sys.argv[1]; runpy.run_path(sys.argv[2], run_name='__main__')")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMALIGN_PURE", "NUMALIGN_REQUIRE_COMPILED")}
    env["NUMALIGN_BUILD_CACHE"] = str(tmp_path / "cache")
    argv = [sys.executable, "-c", code, str(tmp_path / "venv"), str(ROOT / "scripts" / "compile.py")]
    lenient = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert lenient.returncode == 0
    assert lenient.stderr.count("\n") == 1 and "Traceback" not in lenient.stderr
    assert "mypy (mypyc) is not installed" in lenient.stderr and "pure Python" in lenient.stderr
    assert not (tmp_path / "cache").exists()  # nothing half-made
    strict = subprocess.run(argv, capture_output=True, text=True, env={**env, "NUMALIGN_REQUIRE_COMPILED": "1"},
                            timeout=120)
    assert strict.returncode == 1 and strict.stderr.count("\n") == 1
    assert "error: mypy (mypyc) is not installed" in strict.stderr
