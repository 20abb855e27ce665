"""numalign benchmarks, run on demand (not in CI): `scripts/bench [--quick]`.

Every figure is a median over repeated runs taken in this one process, and every speed claim is a
ratio against a reference measured in the same run (the exhaustive product walk of upstream's
algorithm, kept in tests/support/reference_merge.py).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.reference_merge import ref_policy_merge  # noqa: E402

from numalign.core.bitmask import iterate_bitmasks  # noqa: E402
from numalign.core.hint import ProviderHints, TopologyHint  # noqa: E402
from numalign.core.numa import NUMAInfo  # noqa: E402
from numalign.core.policies import PolicyOptions, make_policy  # noqa: E402


def median_time(fn: Callable[[], object], min_runs: int = 5, budget_s: float = 1.0, max_runs: int = 10_000) -> float:
    """Median wall time of fn in seconds: at least min_runs, then until the budget is spent."""
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start < budget_s and len(times) < max_runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def worst_case(nodes: int, preferred_singles: bool) -> tuple[NUMAInfo, list[ProviderHints]]:
    """Upstream's worst case: 3 providers, each hinting every non-empty mask."""
    numa = NUMAInfo.create(list(range(nodes)))
    hints = [TopologyHint(m, preferred_singles and m.bit_count() == 1) for m in iterate_bitmasks(list(range(nodes)))]
    return numa, [{"cpu": hints}, {"memory": hints}, {"nvidia.com/gpu": hints}]


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:10.3f} ms"


def bench_merge(quick: bool) -> None:
    for preferred in (True, False):
        title = "single-node masks preferred" if preferred else "no preferred hints"
        print(f"\n## Merge, 3 providers hinting every mask ({title}), best-effort")
        print(f"{'nodes':>5} {'permutations':>14} {'numalign':>13} {'exhaustive':>13} {'ratio':>10}")
        for n in (2, 4, 6, 8):
            numa, providers = worst_case(n, preferred)
            policy = make_policy("best-effort", numa, PolicyOptions())
            fast = median_time(lambda: policy.merge(providers))  # noqa: B023 - evaluated immediately
            perms = (2**n - 1) ** 3
            if quick and perms > 300_000:
                print(f"{n:>5} {perms:>14,} {fmt_ms(fast)} {'(skipped)':>13} {'':>10}")
                continue
            runs = 1 if perms > 1_000_000 else 3
            ref = median_time(lambda: ref_policy_merge("best-effort", providers, numa, False),  # noqa: B023
                              min_runs=runs, budget_s=0)
            assert policy.merge(providers).hint == ref_policy_merge("best-effort", providers, numa, False)[0]
            print(f"{n:>5} {perms:>14,} {fmt_ms(fast)} {fmt_ms(ref)} {ref / fast:>9.0f}x")


def bench_cli_start() -> None:
    exe = ROOT / ".venv" / "bin" / "numalign"
    if not exe.exists():
        print("\n## CLI cold start: .venv/bin/numalign missing (run scripts/setup)")
        return
    py = median_time(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), min_runs=5, budget_s=2)
    cli = median_time(lambda: subprocess.run([str(exe), "--help"], check=True, capture_output=True),
                      min_runs=5, budget_s=3)
    print("\n## CLI cold start (`numalign --help`)")
    print(f"numalign --help {fmt_ms(cli)}; bare python -c pass {fmt_ms(py)}; ratio {cli / py:.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the slowest reference measurements")
    args = parser.parse_args()
    print(f"# numalign benchmarks on {platform.node()}: {platform.machine()}, "
          f"{platform.python_implementation()} {platform.python_version()}, {_cpu_model()}")
    bench_merge(args.quick)
    bench_cli_start()
    return 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" x{_ncpu()}"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _ncpu() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    sys.exit(main())
