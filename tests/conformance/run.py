"""scripts/conformance: numalign against the real upstream code, case by case, per kubelet release.

For each release and area: generate cases (seeded), have the Go harness built against that release's
k8s.io/kubernetes answer them, have numalign answer them at the same kubelet version, and compare. A
release is a minor's committed newest patch (what CI runs) or, with --all-patches or a patch named in
--versions, any patch the Go module proxy serves (its harness built on the fly, conformance/build).
Prints the counts per version and area, then each class of difference with its smallest reproduction.
Exit status 1 when a difference is found that is not a deliberate one allowed with --allow.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance import harness, merge_budget
from conformance.areas import AREAS

# Deliberate differences: name -> (what and why, whether a case's difference is this one: area, release,
# case, numalign's answer, upstream's). Each is named in --help and docs/fidelity.md, and skipped only when
# named with --allow (scripts/test names the ones CI allows).
Deliberate = Callable[[str, str, dict[str, Any], Any, Any], bool]


def _upstream_panics(theirs: Any, text: str) -> bool:
    """Upstream's answer (or, over Go map orders, one of them) is a panic whose text starts with `text`."""
    answers = theirs.get("map_order", [theirs]) if isinstance(theirs, dict) else [theirs]
    return any(isinstance(a, dict) and str(a.get("harness_error", "")).startswith(f"panic: {text}") for a in answers)


def _all_meets_counters(case: dict[str, Any]) -> bool:
    """A claim asks for All devices (a request or one of its subrequests) and some device of the node
    consumes counters: where kube-scheduler 1.35, 1.36.0 and 1.36.1 build the All list without pools."""
    requests = [r for c in case.get("claims", []) for r in c.get("spec", {}).get("devices", {}).get("requests", [])]
    wants_all = any(
        sub.get("allocationMode") == "All"
        for r in requests
        for sub in ([r["exactly"]] if "exactly" in r else r.get("firstAvailable", []))
    )
    devices = [d for s in case.get("slices", []) for d in s.get("spec", {}).get("devices", [])]
    counters = any(d.get("consumesCounters") for d in devices)
    return wants_all and counters


def _upstream_times_out(theirs: Any) -> bool:
    """Every answer upstream gave (one, or one per pool order at 1.34/1.35) is its timeout."""
    answers = theirs.get("map_order", [theirs]) if isinstance(theirs, dict) else [theirs]
    return all(isinstance(a, dict) and a.get("outcome") == "timeout" for a in answers)


_NIL_POINTER = "runtime error: invalid memory address or nil pointer dereference"

MASK_WALK_NUMA_NODES = merge_budget.MASK_WALK_NUMA_NODES


def _mask_walk_hangs(case: dict[str, Any], ours: Any, theirs: Any) -> bool:
    """An admit case where upstream used up its CPU-time bound ({"hang": true}) on a machine of
    MASK_WALK_NUMA_NODES or more NUMA nodes whose kubelet walks masks (the memory manager's Static policy,
    or a Topology Manager policy other than none: its hint providers), and numalign answered."""
    config = case["config"]
    walks = config.get("memoryManagerPolicy") == "Static" or config.get("topologyManagerPolicy") != "none"
    return (theirs == {"hang": True} and not (isinstance(ours, dict) and ours.get("hang")) and walks
            and len(case["machine"]["topology"]) >= MASK_WALK_NUMA_NODES)

def _distributed_walk_hangs(area: str, case: dict[str, Any], ours: Any, theirs: Any) -> bool:
    """A cpu or admit case where upstream used up its CPU-time bound ({"hang": true}) on a machine of
    MASK_WALK_NUMA_NODES or more NUMA nodes whose static CPU policy has distribute-cpus-across-numa (its
    takeByTopologyNUMADistributed walks every combination of k of the free NUMA nodes), and numalign
    answered (numalign says HANGS where that code truly loops, k/k #140730: then both sides hang)."""
    if theirs != {"hang": True} or (isinstance(ours, dict) and ours.get("hang")):
        return False
    if area == "cpu":
        options, nodes = case.get("options") or {}, len({row[1] for row in case["cpus"]})
    elif area == "admit":
        config = case["config"]
        if config.get("cpuManagerPolicy") != "static":
            return False
        options, nodes = config.get("cpuManagerPolicyOptions") or {}, len(case["machine"]["topology"])
    else:
        return False
    return str(options.get("distribute-cpus-across-numa")).lower() == "true" and nodes >= MASK_WALK_NUMA_NODES


DELIBERATE: dict[str, tuple[str, Deliberate]] = {
    "dra-134-capacity-index": (
        "kube-scheduler 1.34 with the alpha gate DRAConsumableCapacity on checks a device's capacity, when it "
        "allocates it, against the slice's device at the index of the request's device count "
        "(allocator_experimental.go, fixed in 1.35) and panics (index out of range) when the slice has fewer "
        "devices; numalign checks the device itself and answers",
        lambda area, version, case, ours, theirs: area == "dra-alloc" and version.startswith("1.34.")
        and bool(case.get("gate_overrides", {}).get("DRAConsumableCapacity"))
        and _upstream_panics(theirs, "runtime error: index out of range"),
    ),
    "dra-135-all-counters-panic": (
        "kube-scheduler 1.35 (every patch) with the alpha gate DRAPartitionableDevices on panics (nil pointer "
        "dereference) when a request for All devices meets a device that consumes counters: the devices listed "
        "for All carry no pool, and the counter check reads it (allocator_incubating.go; 1.34 reads the slice, "
        "1.36.2 fills the pool in); numalign answers as 1.34 and 1.36.2+ do",
        lambda area, version, case, ours, theirs: area == "dra-alloc" and version.startswith("1.35.")
        and bool(case.get("gate_overrides", {}).get("DRAPartitionableDevices"))
        and _all_meets_counters(case) and _upstream_panics(theirs, _NIL_POINTER),
    ),
    "dra-work-bound": (
        "numalign stops a DRA search after 3,000,000 units of its own work (devices looked at, steps, failed "
        "states recognised: scheduler/dra/allocator.py DEFAULT_WORK_BOUND, about 10 s of pure Python at worst "
        "on the reference machine) and answers with the scheduler's timeout; the real allocator, some 10 times "
        "faster per device, may finish such a search inside its 10 s filter timeout (1.33 has none: upstream searches "
        "on, past the harness's CPU guard if need be; docs/dra.md, the budget)",
        lambda area, version, case, ours, theirs: area == "dra-alloc" and isinstance(ours, dict)
        and ours.get("stoppedBy") == "work" and not _upstream_times_out(theirs),
    ),
    "mask-walk": (
        "on machines of 25 or more NUMA nodes (the wide profile's 32 and 64) the kubelet walks every subset of "
        "the NUMA nodes (bitmask.IterateBitMasks, 2^N - 1 masks: 4.3 billion on 32 nodes) where the memory "
        "manager's Static policy finds a container's default hint (Topology Manager policy none) or a hint "
        "provider lists its hints, and does not return for hours to centuries (the harness's hang guard); "
        "numalign finds the same masks without walking them and answers (docs/fidelity.md)",
        lambda area, version, case, ours, theirs: area == "admit" and _mask_walk_hangs(case, ours, theirs),
    ),
    "distributed-walk": (
        "on machines of 25 or more NUMA nodes (the wide profile's 32 and 64) the static CPU policy's "
        "distribute-cpus-across-numa walks every combination of k of the free NUMA nodes "
        "(takeByTopologyNUMADistributed: C(32, 8) = 10.5 million for 8 reserved CPUs on 32 one-CPU nodes), "
        "each with maps and CPU sets rebuilt, past the harness's CPU bound; upstream answers after minutes "
        "(1.35.4: 1,021 s for that reservation, the CPUs numalign gives), numalign walks the same combinations "
        "with per-node counts and answers (docs/fidelity.md)",
        lambda area, version, case, ours, theirs: _distributed_walk_hangs(area, case, ours, theirs),
    ),
    "dra-1361-all-counters-panic": (
        "kube-scheduler 1.36.0 and 1.36.1 panic (nil pointer dereference) when a request for All devices meets "
        "a device that consumes counters: the devices listed for All carry no pool, and the counter check reads "
        "it (allocator_incubating.go, fixed in 1.36.2); numalign answers",
        lambda area, version, case, ours, theirs: area == "dra-alloc" and version in ("1.36.0", "1.36.1")
        and _all_meets_counters(case) and _upstream_panics(theirs, _NIL_POINTER),
    ),
}


@dataclass
class Difference:
    area: str
    version: str
    case_id: str
    case: dict[str, Any]
    ours: Any
    theirs: Any
    size: int


@dataclass
class DifferenceClass:
    """The cases that first differ at one place: how many, and the smallest (the reproduction printed).
    Only the smallest is kept, so a long run with many differences holds one case per class."""
    count: int
    smallest: Difference


@dataclass
class Tally:
    version: str
    area: str
    cases: int = 0
    equal: int = 0
    allowed: int = 0
    different: int = 0
    numalign_cpu_s: float = 0.0
    harness_wall_s: float = 0.0
    classes: dict[str, DifferenceClass] = field(default_factory=dict)  # first difference -> its class
    named: dict[str, bool] = field(default_factory=dict)  # named case -> equal

    def add_difference(self, d: Difference) -> None:
        self.different += 1
        where = first_difference(d.ours, d.theirs)
        known = self.classes.get(where)
        if known is None:
            self.classes[where] = DifferenceClass(1, d)
            return
        known.count += 1
        if d.size < known.smallest.size:
            known.smallest = d


def first_difference(ours: Any, theirs: Any, path: str = "") -> str:
    """Where two answers first differ, as a path with list indices folded to [*] (the class)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            if key not in ours or key not in theirs:
                side = "upstream only" if key not in ours else "numalign only"
                return f"{path}.{key} ({side})"
            if ours[key] != theirs[key]:
                return first_difference(ours[key], theirs[key], f"{path}.{key}")
        return path or "."
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for a, b in zip(ours, theirs, strict=True):
            if a != b:
                return first_difference(a, b, f"{path}[*]")
    return path or "."


def numalign_answer(area: Any, case: dict[str, Any], version: str) -> Any:
    try:
        return area.numalign(case, version)
    except Exception as e:  # a crash is a difference to report, not the end of the run
        return {"numalign_exception": f"{type(e).__name__}: {e}", "at": traceback.format_exc(limit=-2)}


def _requests(name: str, area: Any, cases: int, seed: int, minor: str, version: str, wide: bool,
              named: dict[str, str]) -> Iterator[dict[str, Any]]:
    """The area's requests to the harness, generated one at a time as the harness reads them."""
    # Seeded by minor: every patch of a minor answers the same cases. The wide profile's cases are
    # another series (an area without a wide generator answers its usual cases).
    profile = wide and hasattr(area, "generate_wide")
    rng = random.Random(f"{seed}/{name}/{minor}" + ("/wide" if profile else ""))
    generate = area.generate_wide if profile else area.generate
    # An area over a fixed set of inputs (the sysfs dumps) has its cases, whatever --cases says.
    generated: Iterable[dict[str, Any]] = (
        area.fixed_cases(version) if hasattr(area, "fixed_cases") else (generate(rng, version) for _ in range(cases)))
    # A case may carry its own CPU-time bound in the harness (cpu_bound: the wide profile's machines
    # where upstream walks 2^N masks, which would otherwise use up the default 20 s each).
    bound = getattr(area, "cpu_bound", None)
    for i, c in enumerate(generated):
        yield {"id": f"{name}-{i}", "area": name, "case": c,
               **({"hang_after_cpu": b} if bound is not None and (b := bound(c)) is not None else {})}
    # Named cases (a known upstream hang) come last, each with its own CPU-time bound in the harness.
    for case_name, case, cpu_bound in (area.named_cases(version) if hasattr(area, "named_cases") else []):
        yield {"id": f"{name}-{case_name}", "area": name, "case": case, "hang_after_cpu": cpu_bound}


def run_version(target: str, areas: Sequence[str], cases: int, seed: int, allow: Sequence[str],
                wide: bool = False) -> list[Tally]:
    version = harness.version_of(target)
    minor = harness.minor_of(target)
    tallies: list[Tally] = []
    for name in areas:
        area = AREAS[name]
        if minor not in area.MINORS:
            continue
        named = {f"{name}-{case_name}": case_name
                 for case_name, _, _ in (area.named_cases(version) if hasattr(area, "named_cases") else [])}
        tally = Tally(version=version, area=name)
        t0 = time.perf_counter()
        # Case by case as the harness answers: numalign answers each while the harness works on the next
        # ones, and only the differences' smallest cases are kept (Tally.add_difference).
        for req, got in harness.stream(target, _requests(name, area, cases, seed, minor, version, wide, named)):
            tally.cases += 1
            c0 = time.process_time()
            ours = numalign_answer(area, req["case"], version)
            tally.numalign_cpu_s += time.process_time() - c0
            theirs = got.get("answer", {"harness_error": got.get("error")})
            same = area.equivalent(ours, theirs) if hasattr(area, "equivalent") else ours == theirs
            if req["id"] in named:
                tally.named[named[req["id"]]] = same
            if same:
                tally.equal += 1
                continue
            if any(DELIBERATE[n][1](name, version, req["case"], ours, theirs) for n in allow):
                tally.allowed += 1
                continue
            tally.add_difference(
                Difference(name, version, req["id"], req["case"], ours, theirs, area.size(req["case"])))
        tally.harness_wall_s = time.perf_counter() - t0
        tallies.append(tally)
    return tallies


def report(tallies: Sequence[Tally], out: Any) -> int:
    total = sum(t.different for t in tallies)
    cases = sum(t.cases for t in tallies)
    print(f"conformance: {cases} cases, {total} differences", file=out)
    for t in tallies:
        extra = f", {t.allowed} allowed" if t.allowed else ""
        if t.named:
            extra += " (named: " + ", ".join(f"{n} {'equal' if ok else 'DIFFERENT'}" for n, ok in t.named.items()) + ")"
        print(
            f"  kubelet {t.version:<8} {t.area:<10} {t.cases:>5} cases  {t.equal:>5} equal  "
            f"{t.different:>4} different{extra}",
            file=out,
        )
    classes = sorted((((t.area, t.version, where), cls) for t in tallies for where, cls in t.classes.items()),
                     key=lambda item: item[0])
    for (area, version, where), cls in classes:
        smallest = cls.smallest
        print(f"\ndifference: {area} at {version}, first at {where}: {cls.count} cases", file=out)
        print(f"  smallest ({smallest.case_id}): {json.dumps(smallest.case, separators=(',', ':'))}", file=out)
        print(f"  upstream: {json.dumps(smallest.theirs, separators=(',', ':'))}", file=out)
        print(f"  numalign: {json.dumps(smallest.ours, separators=(',', ':'))}", file=out)
    return 1 if total else 0


def main(argv: Sequence[str] | None = None) -> int:
    deliberate = "; ".join(f"{n}: {d}" for n, (d, _) in DELIBERATE.items()) or "none"
    p = argparse.ArgumentParser(
        prog="scripts/conformance",
        description="Compare numalign with the real upstream Kubernetes code (the Go harness in conformance/).",
        epilog=f"Deliberate differences (skipped only when named with --allow): {deliberate}.",
    )
    p.add_argument("--versions", nargs="+", metavar="VERSION",
                   help="kubelet minors (their newest patch, as CI runs them) or released patches such as 1.34.2 "
                        "(built on first use); default: every minor")
    p.add_argument("--all-patches", action="store_true",
                   help="every released patch of every supported minor the Go module proxy serves (before a release)")
    p.add_argument("--areas", nargs="+", choices=sorted(AREAS), help="areas (default: all)")
    p.add_argument("--cases", type=int, default=None, help="cases per area and version (default 200)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 30 cases per area and version (--cases wins)")
    p.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    p.add_argument("--wide", action="store_true",
                   help="the wide profile: areas with a wider generator (admit, cpu, topology) draw from it, "
                        "another series of cases per seed (machines of 12-64 NUMA nodes, max-allowable-numa-nodes, "
                        "more CPU manager options, init containers and pod-level resources); not run by CI")
    p.add_argument("--allow", action="append", default=[], choices=sorted(DELIBERATE) or None,
                   help="skip a deliberate difference by name")
    args = p.parse_args(argv)
    if args.cases is None:
        args.cases = 30 if args.quick else 200
    if args.all_patches and args.versions:
        p.error("--all-patches and --versions: give one of them")
    if args.all_patches:
        wanted = harness.released_patches()
    else:
        wanted = args.versions or harness.minors()
        patches = [v for v in wanted if v.count(".") == 2]
        if patches:
            served = harness.released_patches()
            missing = [v for v in patches if v.lstrip("v") not in served]
            if missing:
                p.error(f"--versions: the Go module proxy serves no k8s.io/kubernetes v{', v'.join(missing)} "
                        f"(it serves {', '.join(served)})")
    targets = list(dict.fromkeys(harness.target(v) for v in wanted))
    harness.ensure_built(targets)
    tallies: list[Tally] = []
    areas = args.areas or sorted(AREAS)
    for n, target in enumerate(targets, start=1):
        # Said before each release: its areas take minutes at load, and nothing else prints until the end.
        print(f"conformance: kubelet {target} ({n} of {len(targets)}): {len(areas)} area(s) x {args.cases} cases, "
              "numalign and the Go harness", file=sys.stderr, flush=True)
        tallies += run_version(target, areas, args.cases, args.seed, args.allow, args.wide)
    status = report(tallies, sys.stdout)
    for target in targets:
        for line in harness.substitutions(target):
            print(f"note: the {target} harness: {line}")
    return status


if __name__ == "__main__":
    sys.exit(main())
