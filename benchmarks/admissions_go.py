"""Full admissions per second, numalign against the real Go managers (issue 29), for
`scripts/bench commands`.

The cases are the conformance area `admit`'s (tests/conformance/areas/admit.py, conformance/area_admit.go:
the kubelet's real Topology, CPU, memory and device managers wired as the kubelet wires them, the
Topology Manager's and the predicate admit handlers, devices served by the kubelet's own device-plugin
stub), on a machine of 2, 4, 8 and 64 NUMA nodes: the dual-socket pod mix (3 Burstable, 1 BestEffort,
3 Guaranteed of 2 CPUs, 1 of 1 CPU with an init container, 1 of 8 CPUs with a GPU, 1 of 4 CPUs with a
NIC) admitted and then deleted, cycle after cycle. An admission is the whole of it: the pod read, the
admit handlers, the managers' hints, merge and allocation, the answer written out, and the pod's
deletion later. Each side's start-up per case (Go: the managers, the plugin stubs' gRPC servers and
their registration; numalign: its Node) is measured on the same cases without steps and taken off.

At 64 NUMA nodes the Topology Manager's policy is `none` and the memory manager's `None`: with any
other policy the Go managers enumerate all 2^64 NUMA masks (hint generation, the memory manager's
default hint) and never answer, so that is the only configuration both sides can be timed on. There a
case has 5 cycles (50 admissions; the Go managers take about 40 ms an admission at this size): the
harness answers a case that has used 20 s of CPU time with a hang, which 20 cycles reach; the timed
runs give the harness -hang-after-cpu 10m and -hang-after 10m besides.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from conformance.areas import admit as area

from numalign.machine.cadvisor import machine_to_cadvisor
from numalign.machine.examples import example
from numalign.machine.shorthand import parse_shorthand
from numalign.machine.topology import Machine

VERSION_MINOR = "1.37"  # the admit area's release
# (NUMA nodes, the machine's name, how it is built, the most cycles a case has)
MACHINES: tuple[tuple[int, str, Callable[[], Machine], int], ...] = (
    (2, "2s x 1n x 32c x 2t, 256Gi/node", lambda: parse_shorthand("2s x 1n x 32c x 2t, 256Gi/node"), 1000),
    (4, "dual-socket", lambda: example("dual-socket"), 1000),
    (8, "epyc-nps4", lambda: example("epyc-nps4"), 1000),
    (64, "numa-64", lambda: example("numa-64"), 5),
)
HANG_AFTER = "10m"  # the timed runs' limit per case, CPU and wall (the harness's default, 20 s of CPU, is for CI)
TARGET_DUAL_SOCKET = 20.0  # numalign's admissions per second over Go's on the dual-socket mix
TARGET_EVERY_SIZE = 1.0
MIX_SIZE = 10


@dataclass
class AdmissionFigure:
    numa_nodes: int
    machine: str
    policy: str
    cases: int
    admissions: int
    numalign_cpu_s: float  # admissions only: start-up per case taken off
    go_cpu_s: float
    numalign_per_s: float
    go_per_s: float
    ratio: float  # numalign's admissions per second over Go's, from each side's minimum CPU time
    ratio_median: float  # the median of the rounds' own ratios (each round runs both sides in turn)
    runs: int
    differing_cases: int  # cases whose answers differ (0: the same admissions were timed)
    load: tuple[float, float]
    target: str
    met: bool


def _limits(cpu: str, memory: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    lim = {"cpu": cpu, "memory": memory, **(extra or {})}
    return {"requests": dict(lim), "limits": lim}


def _pod(name: str, containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    for c in (*containers, *(init or [])):
        c["image"] = "pause"
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": spec}


def pod_mix(prefix: str) -> list[dict[str, Any]]:
    """The dual-socket pod mix of benchmarks/bench.py, as the admit area's pods."""
    burst = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1"}}
    pods = [_pod(f"{prefix}b{i}", [{"name": "app", "resources": json.loads(json.dumps(burst))}]) for i in range(3)]
    pods.append(_pod(f"{prefix}be", [{"name": "app", "resources": {}}]))
    pods += [_pod(f"{prefix}g{i}", [{"name": "app", "resources": _limits("2", "4Gi")}]) for i in range(3)]
    pods.append(_pod(f"{prefix}gi", [{"name": "app", "resources": _limits("1", "1Gi")}],
                     init=[{"name": "init", "resources": _limits("1", "1Gi")}]))
    pods.append(_pod(f"{prefix}gpu", [{"name": "app", "resources": _limits("8", "16Gi", {"example.com/gpu": "1"})}]))
    pods.append(_pod(f"{prefix}nic", [{"name": "app", "resources": _limits("4", "8Gi", {"example.com/nic": "1"})}]))
    return pods


def case_for(numa_nodes: int, machine: Machine, cycles: int) -> dict[str, Any]:
    """One case: the machine with 2 GPUs and a NIC a NUMA node, `cycles` x (admit the mix, delete it)."""
    aligned = numa_nodes <= 8
    devices = [{"resource": r, "id": f"{r.rsplit('/', 1)[1]}{n}-{k}", "numa": [n]}
               for n in machine.numa_ids() for r, count in (("example.com/gpu", 2), ("example.com/nic", 1))
               for k in range(count)]
    config: dict[str, Any] = {
        "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
        "topologyManagerPolicy": "single-numa-node" if aligned else "none", "topologyManagerScope": "container",
        "evictionHard": {"memory.available": "100Mi"}, "maxPods": 110,
        "systemReserved": {"memory": "1Gi"},
        "memoryManagerPolicy": "Static" if aligned else "None",
    }
    if aligned:
        config["reservedMemory"] = [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]
    steps: list[dict[str, Any]] = []
    for c in range(cycles):
        pods = pod_mix(f"c{c}-")
        steps += [{"op": "admit", "pod": p} for p in pods]
        steps += [{"op": "delete", "uid": p["metadata"]["uid"]} for p in pods]
    return {"machine": machine_to_cadvisor(machine), "config": config, "devices": devices, "steps": steps}


def _admissions(case: dict[str, Any]) -> int:
    return sum(1 for s in case["steps"] if s["op"] == "admit")


def measure(binary: str, version: str, run_once: Callable[[Sequence[str], bytes | None], tuple[float, ...]],
            cases: int = 4, cycles: int = 20, runs: int = 5) -> list[AdmissionFigure]:
    """Per machine: the same cases answered by the Go harness and by numalign, CPU time of the
    admissions alone (minimum of `runs` rounds, less the same cases without steps), and whether they agree."""
    out = []
    for numa_nodes, name, build, most in MACHINES:
        machine = build()
        full = [case_for(numa_nodes, machine, min(cycles, most)) for _ in range(cases)]
        empty = [{**c, "steps": []} for c in full]
        before = round(os.getloadavg()[0], 2)

        def lines(cs: list[dict[str, Any]]) -> bytes:
            return "".join(json.dumps({"id": str(i), "area": area.NAME, "case": c}) + "\n"
                           for i, c in enumerate(cs)).encode()

        argv = [binary, "-hang-after-cpu", HANG_AFTER, "-hang-after", HANG_AFTER]

        def ours(cs: list[dict[str, Any]]) -> float:
            c0 = time.process_time()
            for c in cs:
                area.numalign(c, version)
            return time.process_time() - c0

        # Rounds interleave the two sides (Go with and without steps, then numalign with and without), so a
        # change of the machine's load reaches both sides of a round alike: each round gives a ratio of its
        # own, and their median is printed beside the ratio of the minimums (the figure held to the target).
        rounds = [(run_once(argv, lines(full))[0], run_once(argv, lines(empty))[0], ours(full), ours(empty))
                  for _ in range(runs)]
        go_full, go_empty = min(r[0] for r in rounds), min(r[1] for r in rounds)
        ours_full, ours_empty = min(r[2] for r in rounds), min(r[3] for r in rounds)
        ratio_median = statistics.median(max(r[0] - r[1], 1e-9) / max(r[2] - r[3], 1e-9) for r in rounds)
        from conformance import harness

        theirs = harness.answer(VERSION_MINOR, [{"id": str(i), "area": area.NAME, "case": c}
                                                for i, c in enumerate(full)])
        differing = sum(1 for c, t in zip(full, theirs, strict=True)
                        if not area.equivalent(area.numalign(c, version), t.get("answer", t)))
        admissions = sum(_admissions(c) for c in full)
        go_cpu, our_cpu = max(go_full - go_empty, 1e-9), max(ours_full - ours_empty, 1e-9)
        ratio = go_cpu / our_cpu
        want = TARGET_DUAL_SOCKET if name == "dual-socket" else TARGET_EVERY_SIZE
        out.append(AdmissionFigure(
            numa_nodes, name, "single-numa-node" if numa_nodes <= 8 else "none (memory None)", cases, admissions,
            round(our_cpu, 4), round(go_cpu, 4), round(admissions / our_cpu, 1), round(admissions / go_cpu, 1),
            round(ratio, 3), round(ratio_median, 3), runs, differing, (before, round(os.getloadavg()[0], 2)),
            f">= {want:g}x the real managers' admissions per second", ratio >= want and differing == 0))
    return out
