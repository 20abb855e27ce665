"""numalign benchmarks, run on demand (not in CI): `scripts/bench [--quick]`.

Every figure is a median over repeated runs taken in this one process, and every speed claim is a
ratio against a reference measured in the same run (the exhaustive product walk of upstream's
algorithm, kept in tests/support/reference_merge.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.configs import static_node_config  # noqa: E402
from support.reference_merge import ref_policy_merge  # noqa: E402

from numalign.answer.present.admit import record_text  # noqa: E402
from numalign.core.bitmask import iterate_bitmasks  # noqa: E402
from numalign.core.hint import ProviderHints, TopologyHint  # noqa: E402
from numalign.core.numa import NUMAInfo  # noqa: E402
from numalign.core.policies import PolicyOptions, make_policy  # noqa: E402
from numalign.k8s.dra.types import (  # noqa: E402
    ATTRIBUTE_NUMA_NODE,
    Device,
    DeviceAttribute,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourcePool,
    ResourceSlice,
)
from numalign.k8s.pod import Container, Pod  # noqa: E402
from numalign.k8s.quantity import Quantity  # noqa: E402
from numalign.kubelet.node import Node  # noqa: E402
from numalign.kubelet.topologymanager.provider import DEFAULT_IMPLICIT_FROM_NODES  # noqa: E402
from numalign.machine.examples import example  # noqa: E402
from numalign.scheduler.dra import AllocationResult, allocate_claims  # noqa: E402

# The kubelet configuration of every admission benchmark: static CPU manager, Static memory manager,
# the given Topology Manager policy in container scope, the NUMA-count limit raised to 64.
Q = Quantity.parse
RAISED_LIMIT = '"max-allowable-numa-nodes": "64"'
NEVER = 1 << 30  # an implicit-hints threshold no machine reaches: upstream's exhaustive lists
BEFORE = "b7fca2b"  # the "before" side of the node ratios: the last commit before the issue-24 speed work


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


def guaranteed(uid: str, cpus: int, mem: str, devices: dict[str, int] | None = None, init: bool = False) -> Pod:
    limits = {"cpu": Q(str(cpus)), "memory": Q(mem)}
    limits.update({r: Q(str(n)) for r, n in (devices or {}).items()})
    app = Container("app", requests=dict(limits), limits=limits)
    inits = (Container("init", requests={"cpu": Q("1"), "memory": Q("1Gi")},
                       limits={"cpu": Q("1"), "memory": Q("1Gi")}, is_init=True),) if init else ()
    return Pod(name=uid, uid=uid, init_containers=inits, containers=(app,))


def admit_median(node: Node, make_pod: Callable[[int], Pod], budget_s: float) -> float:
    """Median time of Node.admit (hints, merge, allocation, record) of a fresh pod, removed untimed."""
    times: list[float] = []
    start = time.perf_counter()
    i = 0
    while len(times) < 5 or (time.perf_counter() - start < budget_s and len(times) < 2000):
        pod = make_pod(i)
        t0 = time.perf_counter()
        rec = node.admit(pod)
        times.append(time.perf_counter() - t0)
        assert rec.result.admit, record_text(rec)
        node.remove(pod.uid)
        i += 1
    return statistics.median(times)


ADMISSION_MACHINES = [
    ("epyc-nps4", "nvidia.com/gpu"),
    ("snc-16", "intel.com/sriov_netdevice"),  # snc-16 has no GPU: its SR-IOV NIC stands in
    ("gb200", "nvidia.com/gpu"),
    ("numa-64", "nvidia.com/gpu"),
]


def measure_admission(budget: float) -> dict[str, tuple[float, float | None]]:
    """Per machine: numalign's median full admission, and the exhaustive reference's (None past 8 nodes)."""
    out: dict[str, tuple[float, float | None]] = {}
    for name, resource in ADMISSION_MACHINES:
        machine = example(name)
        config = static_node_config("restricted", options=RAISED_LIMIT)

        def make(i: int, resource: str = resource) -> Pod:
            return guaranteed(f"p{i}", 8, "4Gi", {resource: 1})

        fast = admit_median(Node(machine, config), make, budget)
        ref = None
        if len(machine.numa_ids()) <= 8:  # upstream's lists have 2^N - 1 masks: 65,535 at 16 nodes, 2^64 at 64
            ref = admit_median(Node(machine, config, implicit_from_nodes=NEVER), make, budget)
        out[name] = (fast, ref)
    return out


def bench_admission(quick: bool, before: dict[str, Any] | None) -> None:
    print("\n## Full admission of a Guaranteed pod (8 CPUs, 4Gi memory, 1 device), restricted, container scope")
    print(f"{'machine':>10} {'nodes':>5} {'numalign':>13} {'exhaustive':>13} {'ratio':>10} {'before':>13} "
          f"{'speed-up':>9} {'load':>5}")
    measured = measure_admission(0.5 if quick else 1.5)
    for name, (fast, ref) in measured.items():
        nodes = len(example(name).numa_ids())
        ref_s = f"{fmt_ms(ref)} {ref / fast:>9.1f}x" if ref is not None else f"{'(infeasible)':>13} {'':>10}"
        old = before["admission"][name][0] if before else None
        old_s = f"{fmt_ms(old)} {old / fast:>8.2f}x" if old else f"{'':>13} {'':>9}"
        print(f"{name:>10} {nodes:>5} {fmt_ms(fast)} {ref_s} {old_s} {_load():>5.1f}")
    at64 = measured["numa-64"][0]
    print(f"target: 64-NUMA full admission <= 1 ms: {'met' if at64 <= 0.001 else 'MISSED'} ({at64 * 1000:.3f} ms "
          "wall median)")
    print(f"(implicit hints from {DEFAULT_IMPLICIT_FROM_NODES} NUMA nodes up; below that upstream's lists are cheaper)")


def pod_mix(cycle: int) -> list[Pod]:
    """Ten pods as a GPU node sees them: 4 Burstable/BestEffort, 3 small Guaranteed, one with an init
    container, one with 8 CPUs and a GPU, one with 4 CPUs and an SR-IOV NIC. All fit together."""
    p = f"c{cycle}-"
    burst = Container("app", requests={"cpu": Q("500m"), "memory": Q("512Mi")}, limits={"cpu": Q("1")})
    pods = [Pod(name=f"{p}b{i}", uid=f"{p}b{i}", containers=(burst,)) for i in range(3)]
    pods.append(Pod(name=f"{p}be", uid=f"{p}be", containers=(Container("app"),)))
    pods += [guaranteed(f"{p}g{i}", 2, "4Gi") for i in range(3)]
    pods.append(guaranteed(f"{p}gi", 1, "1Gi", init=True))
    pods.append(guaranteed(f"{p}gpu", 8, "16Gi", {"nvidia.com/gpu": 1}))
    pods.append(guaranteed(f"{p}nic", 4, "8Gi", {"intel.com/sriov_netdevice": 1}))
    return pods


def throughput(node: Node, batches: Callable[[int], list[Pod]], budget_s: float) -> float:
    """Pods admitted and removed per second: admit a batch, remove it, repeat (medians of batches)."""
    rates: list[float] = []
    start = time.perf_counter()
    cycle = 0
    while len(rates) < 5 or time.perf_counter() - start < budget_s:
        pods = batches(cycle)
        t0 = time.perf_counter()
        for pod in pods:
            assert node.admit(pod).result.admit
        for pod in pods:
            node.remove(pod.uid)
        rates.append(len(pods) / (time.perf_counter() - t0))
        cycle += 1
    return statistics.median(rates)


def measure_throughput(budget: float) -> dict[str, tuple[float, float]]:
    """Per policy: admit+remove pods/s on dual-socket for the pod mix and for Guaranteed+GPU pods only."""
    machine = example("dual-socket")
    out: dict[str, tuple[float, float]] = {}
    for policy in ("best-effort", "restricted", "single-numa-node"):
        config = static_node_config(policy, options=RAISED_LIMIT)
        mix = throughput(Node(machine, config), pod_mix, budget)
        gpu = throughput(Node(machine, config),
                         lambda c: [guaranteed(f"{c}-{i}", 8, "16Gi", {"nvidia.com/gpu": 1}) for i in range(4)],
                         budget)
        out[policy] = (mix, gpu)
    return out


def bench_throughput(quick: bool, before: dict[str, Any] | None) -> None:
    print("\n## Admit+remove throughput on dual-socket (4 NUMA nodes, 128 CPUs), container scope")
    print(f"{'policy':>17} {'pod mix':>12} {'Guaranteed+GPU only':>20} {'mix before':>12} {'speed-up':>9} "
          f"{'load':>5}")
    measured = measure_throughput(1.0 if quick else 3.0)
    for policy, (mix, gpu) in measured.items():
        old = before["throughput"][policy][0] if before else None
        old_s = f"{old:>10,.0f}/s {mix / old:>8.2f}x" if old else f"{'':>12} {'':>9}"
        print(f"{policy:>17} {mix:>8,.0f}/s {gpu:>16,.0f}/s {old_s} {_load():>5.1f}")
    worst = min(mix for mix, _ in measured.values())
    print(f"target: admit+remove >= 10,000 pods/s on the pod mix: {'met' if worst >= 10_000 else 'MISSED'} "
          f"(slowest policy {worst:,.0f}/s, wall time on a shared machine)")
    print("(pod mix: 3 Burstable, 1 BestEffort, 3 x 2 CPUs, 1 x 1 CPU + init container, "
          "1 x 8 CPUs + GPU, 1 x 4 CPUs + NIC)")


def measure_before(ref: str, quick: bool) -> dict[str, Any]:
    """The node measurements of the code at `ref` (a temporary git worktree), in a child process."""
    with tempfile.TemporaryDirectory(prefix="numalign-before-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref], check=True,
                       capture_output=True)
        try:
            env = dict(os.environ, PYTHONPATH=str(tree / "src"))
            args = [sys.executable, str(Path(__file__).resolve()), "--node-json"] + (["--quick"] if quick else [])
            out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False,
                           capture_output=True)
    result: dict[str, Any] = json.loads(out)
    return result


def dra_inputs(devices: int = 64, per_numa: int = 8, claims: int = 8, per_claim: int = 8) -> tuple[
        list[ResourceClaim], list[ResourceSlice], dict[str, DeviceClass]]:
    """A node with `devices` GPUs, `per_numa` on each NUMA node, and `claims` claims of `per_claim` GPUs
    each, every claim's GPUs on one NUMA node (matchAttribute)."""
    gpus = tuple(
        Device(f"gpu-{i}", attributes={ATTRIBUTE_NUMA_NODE: DeviceAttribute("int", (i // per_numa,)),
                                       "model": DeviceAttribute("string", ("h100",))})
        for i in range(devices)
    )
    slices = [ResourceSlice("node-a-gpus", "gpu.example.com", ResourcePool("node-a"), node_name="node-a",
                            devices=gpus)]
    cls = DeviceClass("h100", selectors=(DeviceSelector(
        'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "h100"'),))
    wanted = (DeviceRequest("gpus", exactly=DeviceSubRequest("gpus", "h100", count=per_claim)),)
    together = (DeviceConstraint(("gpus",), match_attribute=ATTRIBUTE_NUMA_NODE),)
    claim_list = [ResourceClaim(f"claim-{i}", spec=ResourceClaimSpec(wanted, together)) for i in range(claims)]
    return claim_list, slices, {"h100": cls}


def bench_dra() -> None:
    """allocate_claims: 8 claims of 8 GPUs each on a node with 64 GPUs (8 per NUMA node); target 10 ms."""
    claims, slices, classes = dra_inputs()
    t0 = time.process_time()
    result = allocate_claims(claims, slices, classes, node="node-a")  # compiles the selector (CEL cache)
    first = time.process_time() - t0
    assert isinstance(result, AllocationResult) and len(result.devices) == 64
    assert all(len({d.numa_node for d in c.devices}) == 1 for c in result.claims)
    cpu: list[float] = []
    for _ in range(30):
        t0 = time.process_time()
        allocate_claims(claims, slices, classes, node="node-a")
        cpu.append(time.process_time() - t0)
    wall = median_time(lambda: allocate_claims(claims, slices, classes, node="node-a"), budget_s=1.0)
    print("\n## DRA: 8 claims x 8 devices on a node with 64 devices (matchAttribute numaNode), target <= 10 ms")
    print(f"CPU time median {fmt_ms(statistics.median(cpu))}, max {fmt_ms(max(cpu))}; wall median {fmt_ms(wall)}; "
          f"first call (compiles CEL) {fmt_ms(first)} CPU; load average {os.getloadavg()[0]:.1f} "
          f"on {_ncpu()} CPUs")


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
    parser.add_argument("--dra", action="store_true", help="run only the DRA allocation benchmark")
    parser.add_argument("--before", default=BEFORE, help=f"the git ref of the node ratios' other side (default "
                        f"{BEFORE}, the last commit before the issue-24 speed work; '' for none)")
    parser.add_argument("--node", action="store_true", help="run only the admission and throughput benchmarks")
    parser.add_argument("--node-json", action="store_true", help=argparse.SUPPRESS)  # the --before child
    args = parser.parse_args()
    if args.node_json:
        print(json.dumps({"admission": measure_admission(0.5 if args.quick else 1.5),
                          "throughput": measure_throughput(1.0 if args.quick else 3.0)}))
        return 0
    print(f"# numalign benchmarks on {platform.node()}: {platform.machine()}, "
          f"{platform.python_implementation()} {platform.python_version()}, {_cpu_model()}")
    if args.dra:
        bench_dra()
        return 0
    before = measure_before(args.before, args.quick) if args.before else None
    if not args.node:
        bench_merge(args.quick)
    bench_admission(args.quick, before)
    bench_throughput(args.quick, before)
    if args.node:
        return 0
    bench_dra()
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


def _load() -> float:
    return os.getloadavg()[0]


def _ncpu() -> int:
    return os.cpu_count() or 0


if __name__ == "__main__":
    sys.exit(main())
