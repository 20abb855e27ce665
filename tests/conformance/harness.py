"""Building and running the Go harness (conformance/) of each supported kubelet minor, or of any released
patch of one.

A *target* names one harness: a minor (`1.34`, built from its committed go.1.34.mod: the newest patch CI
checks) or another released patch (`1.34.2`, whose modfile conformance/build writes under .build/mod/).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import threading
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
GO_DIR = ROOT / "conformance"
BUILD = GO_DIR / ".build"

# The exit status with which the harness says its last answer was {"hang": true} (conformance/main.go).
HANG_EXIT = 3


def modfile(minor: str) -> Path:
    alt = GO_DIR / f"go.{minor}.mod"
    return alt if alt.exists() else GO_DIR / "go.mod"


def minors() -> list[str]:
    """Every minor the harness is built for: go.1.XX.mod files, and go.mod (the newest)."""
    out = {kubernetes_version(p).rsplit(".", 1)[0] for p in [GO_DIR / "go.mod", *GO_DIR.glob("go.1.*.mod")]}
    return sorted(out, key=lambda m: tuple(int(x) for x in m.split(".")))


def kubernetes_version(mod: Path) -> str:
    for line in mod.read_text().splitlines():
        words = line.replace("require", "").split()
        if len(words) >= 2 and words[0] == "k8s.io/kubernetes":
            return words[1].lstrip("v")
    raise SystemExit(f"{mod}: no k8s.io/kubernetes requirement (regenerate with conformance/modfiles)")


def committed() -> dict[str, str]:
    """minor -> the patch its committed modfile builds (the newest the module proxy served when written)."""
    return {m: kubernetes_version(modfile(m)) for m in minors()}


_PATCH = re.compile(r"([0-9]+\.[0-9]+)\.[0-9]+")


def target(version: str) -> str:
    """The harness that answers as `version`: a supported minor's (the minor, or its committed patch), or
    the patch's own. SystemExit naming the fix when the minor has no harness."""
    have = committed()
    v = version.strip().lstrip("v")
    minor = m.group(1) if (m := _PATCH.fullmatch(v)) else v
    if minor not in have:
        raise SystemExit(f"conformance: --versions: no harness for {version} (minors: {', '.join(have)}; "
                         "a new minor needs conformance/modfiles)")
    return minor if v in (minor, have[minor]) else v


def minor_of(target: str) -> str:
    return ".".join(target.split(".")[:2])


def version_of(target: str) -> str:
    """The k8s.io/kubernetes release a target's harness is built against."""
    return committed()[target] if target.count(".") == 1 else target


def released_patches() -> list[str]:
    """Every release of k8s.io/kubernetes the Go module proxy serves in a supported minor (no pre-releases),
    oldest first: `go list -m -versions k8s.io/kubernetes`."""
    try:
        out = subprocess.run(["go", "list", "-m", "-versions", "k8s.io/kubernetes"], cwd=GO_DIR, check=True,
                             capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SystemExit(f"conformance: --all-patches: cannot list the releases of k8s.io/kubernetes with "
                         f"`go list -m -versions k8s.io/kubernetes` ({e}); Go >= 1.26 and its module proxy "
                         "are needed") from None
    have = set(minors())
    found = [v.lstrip("v") for v in out.split()[1:] if re.fullmatch(r"v[0-9]+\.[0-9]+\.[0-9]+", v)]
    return sorted((v for v in found if minor_of(v) in have), key=lambda v: tuple(int(x) for x in v.split(".")))


def substitutions(target: str) -> list[str]:
    """The staging modules a patch's harness takes at another patch, because the module proxy refuses
    them at its own (conformance/build writes a `// substituted:` line for each)."""
    mod = BUILD / "mod" / f"go.{target}.mod"
    if target.count(".") != 2 or not mod.exists():
        return []
    return [line.split(":", 1)[1].strip() for line in mod.read_text().splitlines()
            if line.startswith("// substituted:")]


def binary(target: str) -> Path:
    """The harness of `target` built from this checkout's Go sources, kept per source digest
    (.build/by-source/DIGEST/): checkouts whose sources differ and that share one .build (worktrees with it
    symlinked) each keep their own binaries, instead of rebuilding the shared one over each other's."""
    return BUILD / "by-source" / source_digest()[:16] / f"harness-{target}"


def built(target: str) -> Path:
    """Where conformance/build writes the harness of `target` (the last one built, from any sources)."""
    return BUILD / f"harness-{target}"


def digest_file(target: str) -> Path:
    return BUILD / f"harness-{target}.digest"


_DIGESTS: dict[Path, str] = {}


def source_digest() -> str:
    """A digest of the harness's sources and module files (checkouts and rebases change mtimes only),
    read once a run: the sources do not change under it."""
    got = _DIGESTS.get(GO_DIR)
    if got is None:
        h = hashlib.sha256()
        for p in sorted([*GO_DIR.glob("*.go"), *GO_DIR.glob("go.*"), GO_DIR / "build"]):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        got = _DIGESTS[GO_DIR] = h.hexdigest()
    return got


def ensure_built(wanted: Sequence[str]) -> None:
    """Build the harness of each target that has no binary built from these sources. One build at a time
    (a lock in .build); the binary built is kept under its sources' digest (binary())."""
    if all(binary(m).exists() for m in wanted):
        return
    BUILD.mkdir(parents=True, exist_ok=True)
    digest = source_digest()
    with (BUILD / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building the same ones: wait, then look again
        stale = [m for m in wanted if not binary(m).exists()]
        if not stale:
            return
        fresh = [m for m in stale if built(m).exists() and digest_file(m).exists()
                 and digest_file(m).read_text() == digest]
        rebuild = [m for m in stale if m not in fresh]
        if rebuild:
            subprocess.run([str(GO_DIR / "build"), *rebuild], check=True)
            for m in rebuild:
                digest_file(m).write_text(digest)  # what checkouts before binary() was kept per digest read
        for m in stale:
            dest = binary(m)
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = dest.with_name(dest.name + ".part")
            shutil.copy2(built(m), part)
            part.replace(dest)


def answer(target: str, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The harness's answer to each request, in order; a hang restarts it after the hanging case."""
    return [got for _, got in stream(target, iter(requests))]


def stream(target: str, requests: Iterator[dict[str, Any]]
           ) -> Generator[tuple[dict[str, Any], dict[str, Any]], None, None]:
    """Each request with the harness's answer to it, in order, as they come: the requests are drawn from
    the iterator only as far as the harness has read (pipe and scanner buffers ahead of it), and nothing is
    kept once answered, so a run of many cases holds a few of them at a time (a list of every case and
    answer grew a long run's memory past what a shared machine allows). A hang ({"hang": true}, exit
    HANG_EXIT) restarts the harness with the requests it had been sent and not answered."""
    pending: deque[dict[str, Any]] = deque()  # sent to a harness, not answered yet
    failed: list[BaseException] = []  # what the generator of the requests raised
    source = iter(requests)
    while True:
        proc = subprocess.Popen(
            [str(binary(target))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        resend = list(pending)  # what the harness before this one read and never answered

        def feed(stdin: IO[str] = proc.stdin, resend: list[dict[str, Any]] = resend) -> None:
            try:
                for r in resend:
                    stdin.write(json.dumps(r) + "\n")
                while True:
                    try:
                        r = next(source)
                    except StopIteration:
                        break
                    except BaseException as e:  # the cases' generator failed: said after what was answered
                        failed.append(e)
                        break
                    pending.append(r)  # before the write: a request the harness may read is pending
                    stdin.write(json.dumps(r) + "\n")
                stdin.close()
            except (OSError, ValueError):
                pass  # the harness stopped (after a hang: the rest goes to the next one)

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        got = 0
        read_all = False
        try:
            for line in proc.stdout:
                reply = json.loads(line)
                got += 1
                yield pending.popleft(), reply
            read_all = True
        finally:
            if not read_all:  # the caller stopped early (or failed): this harness is not needed any more
                proc.kill()
            code = proc.wait()
            writer.join()
            proc.stdout.close()
            # the writer closed it, unless a write failed: the harness is gone, what was buffered is dropped
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if failed:
            raise failed[0]
        if code == HANG_EXIT and got:
            if pending:
                continue
            return
        if code != 0 or pending:
            raise SystemExit(
                f"conformance: the {target} harness ({binary(target)}) exited {code} after {got} cases of "
                f"its run, {len(pending)} sent and not answered; run it by hand on the case after the last "
                "answered one"
            )
        return
