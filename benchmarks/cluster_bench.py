"""Cluster simulation benchmarks, on demand (not in CI): `scripts/bench cluster [--quick]`.

1. The issue's targets: 1,000 dual-socket GPU nodes (4 NUMA nodes, SMT, 8 GPUs each) and 20,000 pods of
   the built-in mix, single-numa-node: the default scheduler with kubelet admission, exact and nrt; each
   in a fresh process, with its CPU time and peak resident memory, the load average beside it, and the
   same run of the code before the speed work (--before REF, a temporary git worktree) as the ratio.
2. How time grows with nodes (pods fixed) and with pods (nodes fixed), default scheduler.
3. A 12-run sweep (3 schedulers x 2 policies x 2 scopes) in one process, then on a 2-worker
   dask.distributed LocalCluster: the ratio, and that both give the same results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The "before" side of the ratios: the last commit before the issue-24 speed work.
BEFORE = "b7fca2b"
TARGETS = {"default": 6.0, "exact": 12.0, "nrt": 12.0}  # CPU seconds at 1,000 nodes x 20,000 pods
PEAK_TARGET_MB = 1024
# 10,000 nodes x 200,000 pods (--fleet): CPU seconds and peak memory.
FLEET_TARGETS = {"default": 60.0, "exact": 120.0}
FLEET_PEAK_TARGET_MB = 4096

CHILD = """
import json, resource, sys, time
from numalign.cluster.examples import example_workload, gpu_node
from numalign.cluster.model import Cluster, NodePool, example_config
from numalign.cluster.simulate import RunSpec, run_one
nodes, pods, scheduler = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cluster = Cluster("bench", (NodePool("gpu", nodes, gpu_node(), example_config()),))
workload = example_workload(1, count=pods)
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
t0, c0 = time.perf_counter(), cpu()
r = run_one(cluster, workload, RunSpec(scheduler), 1)
elapsed, cpu_s = time.perf_counter() - t0, cpu() - c0
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "cpu": cpu_s, "peak_mb": peak_mb,
                  "placed": r.placed, "unschedulable": r.unschedulable, "rejections": r.rejections,
                  "failed": r.failed}))
"""


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpu = model or platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def one(nodes: int, pods: int, scheduler: str, src: Path = ROOT / "src") -> dict[str, float]:
    """One run in a fresh process importing numalign from src; the load average when it ended."""
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, "-c", CHILD, str(nodes), str(pods), scheduler], check=True,
                         capture_output=True, text=True, env=env).stdout
    result: dict[str, float] = json.loads(out)
    result["load"] = os.getloadavg()[0]
    return result


def show(label: str, r: dict[str, float]) -> None:
    print(f"  {label:<34} {r['cpu']:7.2f} s CPU ({r['seconds']:6.2f} s wall, load {r['load']:4.1f})  "
          f"peak {r['peak_mb']:6.0f} MB  placed {int(r['placed'])}, unschedulable {int(r['unschedulable'])}, "
          f"kubelet rejections {int(r['rejections'])}")


def targets(nodes: int, pods: int, before_ref: str) -> None:
    """Each scheduler now and at before_ref, alternating, in fresh processes; the same results required."""
    with tempfile.TemporaryDirectory(prefix="numalign-before-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), before_ref], check=True,
                       capture_output=True)
        rows = []
        try:
            for scheduler in TARGETS:
                before = one(nodes, pods, scheduler, tree / "src")
                now = one(nodes, pods, scheduler)
                same = all(now[k] == before[k] for k in ("placed", "unschedulable", "rejections", "failed"))
                full = nodes == 1000 and pods == 20000
                met = now["cpu"] <= TARGETS[scheduler] and now["peak_mb"] < PEAK_TARGET_MB
                verdict = ("met" if met else "MISSED") if full else "(targets apply at 1,000 x 20,000)"
                show(f"{scheduler} now", now)
                show(f"{scheduler} at {before_ref}", before)
                print(f"  {'':<34} {before['cpu'] / now['cpu']:5.2f}x faster in CPU time; target <= "
                      f"{TARGETS[scheduler]:.0f} s, < {PEAK_TARGET_MB} MB: {verdict}; results "
                      f"{'identical' if same else 'DIFFER'}")
                rows.append(f"| `{scheduler}` | {now['cpu']:.1f} s (load {now['load']:.1f}) | "
                            f"{now['peak_mb']:.0f} MB | "
                            f"{before['cpu']:.1f} s (load {before['load']:.1f}) | {before['cpu'] / now['cpu']:.2f}x | "
                            f"<= {TARGETS[scheduler]:.0f} s: {verdict} |")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False,
                           capture_output=True)
    print(f"\n  The table for docs/performance.md ({nodes} nodes x {pods} pods; before = {before_ref}):\n")
    print("| scheduler | CPU time now | peak now | CPU time before | ratio | target |\n|---|---|---|---|---|---|")
    print("\n".join(rows))


def fleet(nodes: int, pods: int) -> None:
    """The fleet-size targets, this tree only: the code before takes minutes a scheduler at this size, so
    the ratio is read from measurement 1 and the growth rows."""
    for scheduler in (*FLEET_TARGETS, "nrt"):
        r = one(nodes, pods, scheduler)
        show(f"{scheduler} now", r)
        target = FLEET_TARGETS.get(scheduler)
        if target is None:
            print(f"  {'':<34} no target at this size")
            continue
        met = r["cpu"] <= target and r["peak_mb"] <= FLEET_PEAK_TARGET_MB
        print(f"  {'':<34} target <= {target:.0f} s, <= {FLEET_PEAK_TARGET_MB} MB: {'met' if met else 'MISSED'}")


def sweep(nodes: int, pods: int) -> None:
    from distributed import LocalCluster

    from numalign.cluster.examples import example_workload, gpu_node
    from numalign.cluster.model import Cluster, NodePool, example_config
    from numalign.cluster.sweep import Sweep, run_sweep

    cluster = Cluster("bench", (NodePool("gpu", nodes, gpu_node(), example_config()),))
    workload = example_workload(1, count=pods)
    specs = Sweep(["default", "nrt", "exact"], {}, {"topologyManagerPolicies": ["single-numa-node", "restricted"],
                                                    "topologyManagerScopes": ["container", "pod"]}).specs()
    t0 = time.perf_counter()
    here = run_sweep(cluster, workload, specs, 1, 3, jobs=1)
    one_process = time.perf_counter() - t0
    t0 = time.perf_counter()
    local = run_sweep(cluster, workload, specs, 1, 3, jobs=2)
    two_local = time.perf_counter() - t0
    # dashboard_address ":0": the scheduler's HTTP routes on a free port (8787 may be taken).
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc:  # type: ignore[no-untyped-call]
        t0 = time.perf_counter()
        there = run_sweep(cluster, workload, specs, 1, 3, dask=lc.scheduler_address)
        on_dask = time.perf_counter() - t0
    same = "identical" if here == there == local else "DIFFER"
    print(f"  {len(specs)} runs ({nodes} nodes, {pods} pods each): one process {one_process:.1f} s; "
          f"2-worker LocalCluster {on_dask:.1f} s ({one_process / on_dask:.2f}x); --jobs 2 {two_local:.1f} s "
          f"({one_process / two_local:.2f}x); results {same}; load average {os.getloadavg()[0]:.1f}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every measurement")
    p.add_argument("--before", default=BEFORE, help=f"the git ref of the ratios' other side (default {BEFORE})")
    p.add_argument("--targets-only", action="store_true", help="only measurement 1")
    p.add_argument("--fleet", action="store_true",
                   help="only measurement 4: 10,000 nodes x 200,000 pods (--quick: 1,000 x 20,000), this tree")
    args = p.parse_args()
    big_nodes, big_pods = (100, 2000) if args.quick else (1000, 20000)
    print(f"numalign cluster benchmarks on {machine()}")
    if args.fleet:
        n, pods = (big_nodes * 10, big_pods * 10)
        print(f"\n4. {n} nodes, {pods} pods (targets: default <= 60 s, exact <= 120 s CPU, peak <= 4 GB)")
        fleet(n, pods)
        return 0
    print(f"\n1. {big_nodes} nodes (dual-socket, 4 NUMA nodes, SMT, 8 GPUs), {big_pods} pods of the built-in mix, "
          "single-numa-node (targets: default <= 6 s, exact <= 12 s, nrt <= 12 s CPU, peak < 1 GB)")
    targets(big_nodes, big_pods, args.before)
    if args.targets_only:
        return 0
    print("\n2. Growth, default scheduler (time relative to the first row of each series)")
    quarter = big_pods // 4
    measured: dict[tuple[int, int], dict[str, float]] = {}
    for title, rows in (("nodes grow, pods fixed", [(big_nodes // 4, quarter), (big_nodes // 2, quarter),
                                                    (big_nodes, quarter)]),
                        ("pods grow, nodes fixed", [(big_nodes, quarter), (big_nodes, big_pods // 2),
                                                    (big_nodes, big_pods)])):
        print(f"  {title}:")
        for n, pods in rows:
            r = measured.get((n, pods)) or one(n, pods, "default")
            measured[(n, pods)] = r
            show(f"  {n} nodes, {pods} pods ({r['cpu'] / measured[rows[0]]['cpu']:.2f}x)", r)
    print("\n3. A 12-run sweep")
    sweep(*((40, 300) if args.quick else (100, 2500)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
