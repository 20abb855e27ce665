"""Building and running the Go harness (conformance/) of each supported kubelet minor."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Sequence
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


def binary(minor: str) -> Path:
    return BUILD / f"harness-{minor}"


def digest_file(minor: str) -> Path:
    return BUILD / f"harness-{minor}.digest"


def source_digest() -> str:
    """A digest of the harness's sources and module files (checkouts and rebases change mtimes only)."""
    h = hashlib.sha256()
    for p in sorted([*GO_DIR.glob("*.go"), *GO_DIR.glob("go.*"), GO_DIR / "build"]):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def ensure_built(wanted: Sequence[str]) -> None:
    """Build the harness of each minor whose binary is missing or was built from other sources."""
    digest = source_digest()
    stale = [
        m
        for m in wanted
        if not binary(m).exists()
        or not digest_file(m).exists()
        or digest_file(m).read_text() != digest
    ]
    if stale:
        subprocess.run([str(GO_DIR / "build"), *stale], check=True)
        for m in stale:
            digest_file(m).write_text(digest)


def answer(minor: str, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The harness's answer to each request, in order; a hang restarts it after the hanging case."""
    answers: list[dict[str, Any]] = []
    while len(answers) < len(requests):
        rest = requests[len(answers) :]
        proc = subprocess.Popen(
            [str(binary(minor))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None

        def feed(lines: Sequence[dict[str, Any]] = rest, stdin: IO[str] = proc.stdin) -> None:
            try:
                for r in lines:
                    stdin.write(json.dumps(r) + "\n")
                stdin.close()
            except (BrokenPipeError, OSError):
                pass  # the harness stopped after a hang; the rest goes to the next one

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        got = 0
        for line in proc.stdout:
            answers.append(json.loads(line))
            got += 1
        code = proc.wait()
        writer.join()
        if code == HANG_EXIT and got:
            continue
        if code != 0 or got != len(rest):
            raise SystemExit(
                f"conformance: the {minor} harness ({binary(minor)}) exited {code} after {got} of "
                f"{len(rest)} cases; run it by hand on the case after the last answered one"
            )
    return answers
