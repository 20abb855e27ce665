"""numalign's fuzz campaign: damaged inputs on every surface (support.fuzz_surfaces), each of which
must give a result or one numalign error line, never a traceback, a hang or a memory blow-up.

    python -m support.fuzz_campaign --surface manifests --examples 40 --seed 1   # one short seeded run
    python -m support.fuzz_campaign --minutes 10                                # the long campaign

The memory bound is the process's own: the runner caps its address space (RLIMIT_AS) before the
first input, so an input that would grow past the cap fails with MemoryError, a finding. A crash of
the interpreter (a C parser's stack overflow) ends the process with a signal, which the caller sees.
Prints, per surface, how many inputs it tried and how many gave a result or a numalign error.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed

from support.fuzz_surfaces import SURFACES, Surface

# Address space for the whole campaign process (interpreter, numalign, Hypothesis, grpc imports).
MEMORY_LIMIT_BYTES = 2 << 30


def run_surface(surface: Surface, examples: int, seed: int, tmp: Path, tally: Counter[str]) -> None:
    """`examples` inputs from the surface's strategy under a fixed seed; raises on a finding."""

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(surface.inputs)
    def campaign(value: Any) -> None:
        try:
            tally[surface.target(value, tmp)] += 1
        except BaseException:
            print(f"FINDING on {surface.name}: input {repr(value)[:2000]}", file=sys.stderr)
            raise

    campaign()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fuzz_campaign", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--surface", action="append", choices=sorted(SURFACES), help="default: every surface")
    p.add_argument("--examples", type=int, default=50, help="inputs per surface and round")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--minutes", type=float, default=0.0, help="keep going, round after round, this long")
    p.add_argument("--memory-limit", type=int, default=MEMORY_LIMIT_BYTES, help="RLIMIT_AS in bytes")
    args = p.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_AS, (args.memory_limit, args.memory_limit))
    names = args.surface or sorted(SURFACES)
    surfaces = [SURFACES[n]() for n in names]
    tallies: dict[str, Counter[str]] = {s.name: Counter() for s in surfaces}
    deadline = time.monotonic() + args.minutes * 60
    rounds = 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="numalign-fuzz-") as tmp:
        while True:
            for s in surfaces:
                work = Path(tmp) / s.name
                work.mkdir(exist_ok=True)
                try:
                    run_surface(s, args.examples, args.seed + rounds, work, tallies[s.name])
                except BaseException:
                    traceback.print_exc()
                    _report(tallies, rounds + 1, time.monotonic() - start)
                    return 1
            rounds += 1
            if time.monotonic() >= deadline:
                break
    _report(tallies, rounds, time.monotonic() - start)
    return 0


def _report(tallies: dict[str, Counter[str]], rounds: int, elapsed: float) -> None:
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    total = sum(sum(t.values()) for t in tallies.values())
    print(f"fuzz: {total} inputs in {elapsed:.0f} s ({rounds} round(s)), peak RSS {peak_mib} MiB")
    for name, t in tallies.items():
        print(f"  {name:16} {sum(t.values()):7} tried  {t['result']:7} results  {t['error']:7} numalign errors")


if __name__ == "__main__":
    sys.exit(main())
