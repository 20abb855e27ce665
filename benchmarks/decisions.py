"""No decision changes: `scripts/bench decisions [--against REF]`.

Runs a fixed set of seeded `numalign simulate -o json` invocations (the built-in example, a generated
workload on it under every scheduler and two kubelet settings, and the 1,000-node bench cluster) with
this tree's code and with REF's code (a temporary git worktree, default `main`), and compares the
outputs byte for byte. Exit 0 when every output is identical, 1 otherwise (the differing case named).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCHEDULERS = ["--scheduler", "default", "--scheduler", "nrt", "--scheduler", "exact"]
CASES: dict[str, list[str]] = {
    "example": [],
    "generated": ["--generate", "2000", "--seed", "7", *SCHEDULERS],
    "generated-restricted-pod": ["--generate", "1500", "--seed", "11", "--policy", "restricted",
                                 "--policy", "best-effort", "--scope", "pod", *SCHEDULERS],
    "bench-cluster": ["--cluster", "bench", "--generate", "3000", "--seed", "3", *SCHEDULERS],
}
QUICK = ("example", "generated")


def simulate(src: Path, args: list[str]) -> bytes:
    """`numalign simulate ARGS -o json` with the package imported from src."""
    env = dict(os.environ, PYTHONPATH=str(src))
    code = "import sys; from numalign.cli.main import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "simulate", *args, "-o", "json"], env=env,
                          capture_output=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"simulate {' '.join(args)} failed with exit {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()[-300:]}")
    return done.stdout


def worktree(ref: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), ref], check=True,
                   capture_output=True)
    return where


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--against", default="main", help="the git ref whose decisions must be reproduced")
    p.add_argument("--quick", action="store_true", help="only the built-in example cases")
    args = p.parse_args()
    names = QUICK if args.quick else tuple(CASES)
    with tempfile.TemporaryDirectory(prefix="numalign-before-") as tmp:
        before_tree = worktree(args.against, Path(tmp) / "tree")
        try:
            differ = []
            for name in names:
                before = simulate(before_tree / "src", CASES[name])
                after = simulate(ROOT / "src", CASES[name])
                same = before == after and len(before) > 0
                print(f"  {name:<26} {'identical' if same else 'DIFFER'} ({len(after):,} bytes)")
                if not same:
                    differ.append(name)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before_tree)],
                           check=False, capture_output=True)
    if differ:
        print(f"decisions differ from {args.against}: {', '.join(differ)}")
        return 1
    print(f"every decision identical to {args.against}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
