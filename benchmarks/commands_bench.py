"""Speed as users measure it (issue 29): `scripts/bench commands [--quick] [--runs N] [-o json]`.

Two kinds of figure, each with the load beside it:

1. Whole commands, from process start to exit, as a user types them: CPU time (user + system, from
   wait4) and peak RSS of the process, wall time too; repeated, the minimum and the median reported.
   The minimum CPU time is the figure held to a target: wall time on a shared machine measures the
   other tenants. The package is byte-compiled first, as pip installs it.
2. numalign against the real upstream Go code, on the same cases in the same run: each conformance
   area's cases (tests/conformance) answered by the Go harness built against the newest supported
   release and by numalign. Go's CPU is the harness process's CPU minus that of an empty run (start-up);
   numalign's is its CPU answering the cases in this process, with the benchmark's own objects (every
   area's generated cases, some 360,000) frozen out of the collector: the harness process holds only its
   input, and walking the benchmark's heap on each full collection cost numalign's side up to 45%.
   Ratios, not seconds, are compared across machines: absolute seconds vary by 30% between runs and
   machines, ratios measured together do not.
3. Full admissions per second against the real Go managers at 2, 4, 8 and 64 NUMA nodes
   (benchmarks/admissions_go.py): the admit area's harness and numalign on the same cases, each side's
   start-up per case taken off; targets >= 20x on the dual-socket mix, >= 1x at every size.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conformance.areas import AREAS  # noqa: E402

from conformance import harness  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import admissions_go  # noqa: E402

NUMALIGN = str(ROOT / ".venv" / "bin" / "numalign")


@dataclass
class CommandFigure:
    name: str
    argv: list[str]
    runs: int
    cpu_min_s: float
    cpu_median_s: float
    wall_min_s: float
    wall_median_s: float
    peak_rss_mb: float
    load: tuple[float, float]
    target: str
    met: bool | None


@dataclass
class AreaFigure:
    area: str
    kubernetes: str
    cases: int
    numalign_cpu_s: float
    go_cpu_s: float
    throughput_ratio: float  # numalign cases/s over Go's: > 1 is faster than the real code
    load: tuple[float, float]
    target: str
    met: bool | None
    notes: list[str] = field(default_factory=list)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def run_once(argv: Sequence[str], stdin: bytes | None = None) -> tuple[float, float, float, int]:
    """(CPU s, wall s, peak RSS MB, exit status) of one process, stdout and stderr discarded."""
    with tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), stdin=inp if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, proc.returncode


def measure_command(name: str, argv: list[str], runs: int, target: str, limit: tuple[str, float] | None,
                    ok_status: tuple[int, ...] = (0,)) -> CommandFigure:
    before = _load()
    cpus, walls, rss = [], [], 0.0
    for _ in range(runs):
        cpu, wall, peak, status = run_once(argv)
        if status not in ok_status:
            raise SystemExit(f"bench: {' '.join(argv)} exited {status}; run it by hand to see why")
        cpus.append(cpu)
        walls.append(wall)
        rss = max(rss, peak)
    met: bool | None = None
    if limit is not None:
        kind, seconds = limit
        met = (min(cpus) if kind == "cpu" else min(walls)) <= seconds
    return CommandFigure(name, argv, runs, min(cpus), statistics.median(cpus), min(walls),
                         statistics.median(walls), round(rss, 1), (before, _load()), target, met)


def commands(quick: bool, runs: int, short_only: bool = False) -> list[CommandFigure]:
    pod = str(ROOT / "docs" / "examples" / "train.yaml")
    figures = [
        measure_command("numalign --help", [NUMALIGN, "--help"], runs, "<= 150 ms CPU", ("cpu", 0.150)),
        measure_command("admit one pod on a built-in machine", [NUMALIGN, "admit", pod, "--machine", "dual-socket"],
                        runs, "<= 300 ms CPU", ("cpu", 0.300), ok_status=(0, 1)),
    ]
    if short_only:
        return figures
    pods = "2000" if quick else "20000"
    for scheduler, seconds in (("default", 6.0), ("exact", 12.0)):
        argv = [NUMALIGN, "simulate", "--cluster", "bench", "--generate", pods, "--seed", "1",
                "--scheduler", scheduler, "--jobs", "1", "-o", "json"]
        target = f"<= {seconds:g} s CPU (1,000 nodes x 20,000 pods, lowest of 3)"
        figures.append(measure_command(f"simulate bench {pods} pods, {scheduler}", argv, min(runs, 3),
                                       target if not quick else "(quick: no target)",
                                       None if quick else ("cpu", seconds)))
    return figures


# Each area's target (issue 29): numalign's throughput over the real code's, at least this much.
AREA_TARGETS: dict[str, float] = {"admit": 1.0, "dra-alloc": 1.0}


def dra_8x8_case() -> dict[str, Any]:
    """Issue 28's benchmark as a dra-alloc case: 8 claims of 8 GPUs each, every claim's GPUs on one NUMA
    node (matchAttribute), on a node with 64 GPUs, 8 per NUMA node."""
    devices = [{"name": f"gpu-{i}", "attributes": {"resource.kubernetes.io/numaNode": {"int": i // 8},
                                                   "model": {"string": "h100"}}} for i in range(64)]
    selector = 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "h100"'
    claims = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": f"claim-{i}", "namespace": "default", "uid": f"uid-{i}"},
               "spec": {"devices": {
                   "requests": [{"name": "gpus", "exactly": {"deviceClassName": "h100", "count": 8}}],
                   "constraints": [{"requests": ["gpus"], "matchAttribute": "resource.kubernetes.io/numaNode"}]}}}
              for i in range(8)]
    return {"gate_overrides": {}, "node": {"name": "node-a", "labels": {}},
            "slices": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                        "metadata": {"name": "node-a-gpus"},
                        "spec": {"driver": "gpu.example.com", "nodeName": "node-a", "devices": devices,
                                 "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1}}}],
            "classes": [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h100"},
                         "spec": {"selectors": [{"cel": {"expression": selector}}]}}],
            "claims": claims, "allocated": []}


# The recorded vectors (../shared/oracle/dra) were recorded from 1.36.2: the 1.36 harness answers them.
VECTORS_MINOR = "1.36"


def _cel_vector_case(case: dict[str, Any]) -> dict[str, Any]:
    """A recorded CEL vector as a dra-cel case: the gates the recording used as the area's features."""
    from conformance.areas import dracel

    gates = case.get("gate_overrides") or {}
    minor = int(str(case["version"]).split(".")[1])
    d = case["device"]
    return {"expr": case["expr"],
            "features": {"consumable_capacity": gates.get("DRAConsumableCapacity", minor >= 36),
                         "list_type_attributes": gates.get("DRAListTypeAttributes", False)},
            "device": {"driver": d["driver"], "allow_multiple_allocations": d.get("allowMultipleAllocations"),
                       "attributes": d["attributes"],
                       "capacity": {name: raw["value"] for name, raw in d["capacity"].items()}},
            "with_cost": dracel._OVER_A_MAP.search(case["expr"]) is None}


def _vector_runs() -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Issue 29's 5,600 recorded vectors: the 2,600 allocator cases (apart the two upstream stopped by its
    10 s timeout: Go's CPU there is wall-bounded, so it depends on the load; numalign's on its work
    bound) and the 3,000 CEL selectors."""
    from support.dra_oracle import vectors

    rows = [r for name in ("allocator-1.36.2.jsonl.gz", "allocator-1.36.2-alpha.jsonl.gz") for r in vectors(name)]
    timed_out = [r["case"] for r in rows if r["upstream"]["outcome"] == "timeout"]
    return [
        ("dra-alloc vectors", VECTORS_MINOR, [r["case"] for r in rows if r["upstream"]["outcome"] != "timeout"]),
        ("dra-alloc vectors-timeout", VECTORS_MINOR, timed_out),
        ("dra-cel vectors", VECTORS_MINOR, [_cel_vector_case(r["case"]) for r in vectors("cel-1.36.2.jsonl.gz")]),
    ]


def _area_runs(cases: int, seed: int, dra_only: bool = False) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(area, minor, cases) to measure: every area at the newest release; dra-alloc at each release it
    runs, and issue 28's 8 x 8 benchmark (200 times) at the newest. `dra_only`: the DRA areas, the 8 x 8
    and the recorded vectors."""
    newest = harness.minors()[-1]
    runs = []
    for name, area in sorted(AREAS.items()):
        if getattr(area, "FIXED_CASES", False) or (dra_only and not name.startswith("dra-")):
            continue
        minors = [m for m in area.MINORS if m in harness.minors()] if name == "dra-alloc" else [newest]
        for minor in minors:
            if minor not in area.MINORS:
                continue
            version = harness.kubernetes_version(harness.modfile(minor))
            rng = random.Random(f"{seed}/{name}/{minor}")
            runs.append((name, minor, [area.generate(rng, version) for _ in range(cases)]))
    if "dra-alloc" in AREAS:
        runs.append(("dra-alloc 8x8", newest, [dra_8x8_case()] * 200))
    if dra_only:
        runs.extend(_vector_runs())
    return runs


def _cold_caches() -> None:
    """Each of Go's runs is a new process: numalign's repetitions start without the compiled selectors of
    the one before (within a run both keep what they compiled, as upstream's CEL compiler cache does)."""
    from numalign.k8s.dra.cel import compile_selector

    compile_selector.cache_clear()


def against_go(cases: int, seed: int, dra_only: bool = False) -> list[AreaFigure]:
    runs = _area_runs(cases, seed, dra_only)
    harness.ensure_built(sorted({minor for _, minor, _ in runs}))
    figures = []
    for label, minor, generated in runs:
        name = label.split()[0]
        area = AREAS[name]
        version = harness.kubernetes_version(harness.modfile(minor))
        binary = str(harness.binary(minor))
        lines = "".join(json.dumps({"id": str(i), "area": name, "case": c}) + "\n" for i, c in enumerate(generated))
        before = _load()
        empty = min(run_once([binary], b"")[0] for _ in range(3))
        go_cpu = min(run_once([binary], lines.encode())[0] for _ in range(3)) - empty
        ours = []
        # What exists now is the benchmark's (the cases of every area, read and generated): kept out of
        # the collector's walks while numalign answers, as a process of its own would not hold it.
        gc.collect()
        gc.freeze()
        try:
            for _ in range(3):
                _cold_caches()
                c0 = time.process_time()
                for c in generated:
                    area.numalign(c, version)
                ours.append(time.process_time() - c0)
        finally:
            gc.unfreeze()
        numalign_cpu = min(ours)
        ratio = go_cpu / numalign_cpu if numalign_cpu > 0 else float("inf")
        want = AREA_TARGETS.get(name)
        if label.endswith(" vectors"):  # issue 29: the recorded vectors, allocator and CEL alike
            want = 1.0
        elif label.endswith("-timeout"):  # Go's side is its 10 s wall-clock timeout: reported only
            want = None
        figures.append(AreaFigure(
            label, version, len(generated), round(numalign_cpu, 4), round(go_cpu, 4), round(ratio, 3),
            (before, _load()),
            f">= {want:g}x the real code's throughput" if want else "(reported)",
            None if want is None else ratio >= want,
        ))
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench commands", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 2,000 pods, fewer cases, no simulate targets")
    p.add_argument("--runs", type=int, default=5,
                   help="runs of each short command and rounds of the full admissions against Go (default 5; "
                        "simulate: 3)")
    p.add_argument("--cases", type=int, default=0, help="cases per area against Go (default 500; quick 100)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", choices=("admissions", "dra"),
                   help="admissions: only `--help`, one-pod `admit` and the full admissions against the Go managers; "
                        "dra: only the DRA areas, the 8 x 8 and the 5,600 recorded vectors (../shared/oracle/dra) "
                        "against the Go harness")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = p.parse_args(argv)
    cases = args.cases or (100 if args.quick else 500)
    if not Path(NUMALIGN).exists():
        raise SystemExit("bench: .venv/bin/numalign is missing; run scripts/setup")
    # As installed by pip, numalign runs from bytecode; an editable checkout under
    # PYTHONDONTWRITEBYTECODE=1 would compile every module on every run (~1 s of CPU per command).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "numalign")],
                   check=True, stdout=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                               if k != "PYTHONDONTWRITEBYTECODE"})
    minor = harness.minors()[-1]
    version = harness.kubernetes_version(harness.modfile(minor))
    text = args.output == "text"
    # Which numalign the figures are of: a source edited while the core compiled leaves it pure Python
    # (about half the speed), which a figure must not pass for the compiled one's.
    from numalign import _compiled

    if text:
        print(f"numalign: {_compiled.STATUS}", flush=True)
    only_admissions = args.only == "admissions"
    only_dra = args.only == "dra"
    cmd = [] if only_dra else commands(args.quick, args.runs, short_only=only_admissions)
    if text and cmd:  # each part printed as it is measured: a long run shows what it has so far
        print(f"whole commands (min / median of runs; load 1-min before..after; {os.cpu_count()} CPUs)")
        for f in cmd:
            verdict = "" if f.met is None else ("  met" if f.met else "  MISSED")
            print(f"  {f.name:<42} CPU {f.cpu_min_s:7.3f} / {f.cpu_median_s:7.3f} s  wall {f.wall_min_s:7.3f} / "
                  f"{f.wall_median_s:7.3f} s  RSS {f.peak_rss_mb:6.0f} MB  load {f.load[0]}..{f.load[1]}  "
                  f"{f.target}{verdict}", flush=True)
    areas = [] if only_admissions else against_go(cases, args.seed, dra_only=only_dra)
    if text and areas:
        print("\nagainst the real upstream code (the Go harness), same cases, same run")
        for a in areas:
            verdict = "" if a.met is None else ("  met" if a.met else "  MISSED")
            print(f"  {a.area:<25} at {a.kubernetes}: {a.cases} cases  numalign {a.numalign_cpu_s:.3f} s CPU  "
                  f"Go {a.go_cpu_s:.3f} s CPU  numalign/Go throughput {a.throughput_ratio:.2f}x  "
                  f"load {a.load[0]}..{a.load[1]}  {a.target}{verdict}", flush=True)
    if only_dra:
        if not text:
            print(json.dumps({"schemaVersion": 1, "numalign": _compiled.STATUS,
                              "againstGo": [asdict(f) for f in areas]}, indent=2))
        return 0
    harness.ensure_built([minor])
    admissions = admissions_go.measure(str(harness.binary(minor)), version, run_once,
                                       cases=2 if args.quick else 4, cycles=5 if args.quick else 20,
                                       runs=args.runs)
    if not text:
        print(json.dumps({"schemaVersion": 1, "numalign": _compiled.STATUS, "commands": [asdict(f) for f in cmd],
                          "againstGo": [asdict(f) for f in areas],
                          "admissionsAgainstGo": [asdict(f) for f in admissions]}, indent=2))
        return 0
    print(f"\nfull admissions per second, numalign against the real Go managers (the admit area's harness at "
          f"{version}), the dual-socket pod mix admitted and deleted; start-up per case taken off")
    for adm in admissions:
        verdict = "  met" if adm.met else "  MISSED"
        print(f"  {adm.numa_nodes:>2} NUMA nodes ({adm.machine}, {adm.policy}): {adm.admissions} admissions  numalign "
              f"{adm.numalign_per_s:,.0f}/s ({adm.numalign_cpu_s:.3f} s CPU)  Go {adm.go_per_s:,.0f}/s "
              f"({adm.go_cpu_s:.3f} s CPU)  {adm.ratio:.1f}x (median of {adm.runs} rounds {adm.ratio_median:.1f}x)  "
              f"cases differing {adm.differing_cases}  "
              f"load {adm.load[0]}..{adm.load[1]}  {adm.target}{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
