"""The "cpu" area: the CPU manager's static policy over additions and removals (conformance/area_cpu.go).

Cases are CPU topologies shaped as machines are (sockets of NUMA nodes of cores of 1, 2 or 4 threads,
uncore caches splitting a socket, thread ids adjacent or Linux-style), reserved CPUs given or counted,
any combination of the static policy's options and each addition's stored NUMA affinity.
"""

from __future__ import annotations

import random
from typing import Any

from conformance.kubelet_options import CPU_MANAGER_POLICY_OPTIONS
from conformance.versions import kubelet_version
from numalign.core.decision import KUBELET_HANGS
from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, ConfigError, NumalignError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.manager import new_cpu_manager_policy
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.versions import behaviours, effective_gates, option_maturity

NAME = "cpu"
MINORS = ("1.33", "1.34", "1.35", "1.36", "1.37")


def generate(rng: random.Random, version: str, wide: bool = False) -> dict[str, Any]:
    if wide and rng.random() < WIDE_NUMA_SHARE:
        nodes = rng.choice((16, 16, 32, 64))
        sockets = rng.choice((1, 2, 4)) if nodes == 16 else rng.choice((2, 4, 8))
        numa_per_socket = nodes // sockets
        cores_per_numa = rng.randint(1, 2)
        threads = rng.choice((1, 2))
    else:
        sockets = rng.choice((1, 1, 2, 2, 2, 4))
        numa_per_socket = rng.choice((1, 1, 2, 4)) if sockets < 4 else rng.choice((1, 2))
        cores_per_numa = rng.randint(1, 6)
        threads = rng.choice((1, 2, 2, 2, 4))
    uncores_per_numa = rng.choice((1, 1, 2))
    adjacent = rng.random() < 0.5
    total_cores = sockets * numa_per_socket * cores_per_numa
    rows: list[list[int]] = []
    core_index = 0
    for s in range(sockets):
        for n in range(numa_per_socket):
            numa = s * numa_per_socket + n
            for c in range(cores_per_numa):
                uncore = numa * uncores_per_numa + (c * uncores_per_numa) // cores_per_numa
                ids = (
                    [core_index * threads + t for t in range(threads)]
                    if adjacent
                    else [core_index + t * total_cores for t in range(threads)]
                )
                for cpu in ids:
                    rows.append([cpu, numa, s, min(ids), uncore])
                core_index += 1
    rows.sort()
    all_cpus = [r[0] for r in rows]
    numas = sorted({r[1] for r in rows})
    # The kubelet refuses the static policy without reserved CPUs (NewManager), before the policy
    # exists: every case reserves some, as a set (reservedSystemCPUs) or as a count.
    case: dict[str, Any] = {"cpus": rows, "reserved_cpus": None, "num_reserved": 0}
    count = rng.randint(1, min(4 if not wide else 8, max(1, len(all_cpus) - 1)))
    if wide and rng.random() < 0.3:
        # whole cores, as administrators reserve them: the first `count` cores in id order
        core_ids = sorted({r[3] for r in rows})
        cores = set(core_ids[:min(count, len(core_ids) - 1)])  # some core left unreserved
        case["reserved_cpus"] = sorted(r[0] for r in rows if r[3] in cores) or [all_cpus[0]]
    elif rng.random() < 0.5:
        case["reserved_cpus"] = sorted(rng.sample(all_cpus, count))
    else:
        case["num_reserved"] = count
    case["topology_manager_policy"] = rng.choice(("none", "best-effort", "restricted", "single-numa-node"))
    options = {name: "true" for name in CPU_MANAGER_POLICY_OPTIONS if rng.random() < (0.25 if not wide else 0.4)}
    case["options"] = options
    case["gates"] = {"CPUManagerPolicyAlphaOptions": True} if rng.random() < 0.5 else {}
    steps: list[dict[str, Any]] = []
    live: list[str] = []
    for i in range(rng.randint(1, 7)):
        if live and rng.random() < 0.25:
            pod = live.pop(rng.randrange(len(live)))
            steps.append({"op": "remove", "pod": pod, "container": "c"})
            continue
        pod = f"p{i}"
        affinity: list[int] | None = None
        if rng.random() < 0.7:
            affinity = sorted(rng.sample(numas, rng.randint(1, len(numas))))
        n = rng.choice((1, 2, 2, 3, 4, 4, 6, 8, threads, 2 * threads, cores_per_numa * threads))
        steps.append(
            {"op": "add", "pod": pod, "container": "c", "cpus": n, "affinity": affinity, "preferred": True}
        )
        live.append(pod)
    case["steps"] = steps
    return case


WIDE_NUMA_SHARE = 0.35  # of the wide profile's cases: machines of 16, 32 or 64 NUMA nodes


def generate_wide(rng: random.Random, version: str) -> dict[str, Any]:
    """A case of the wide profile (scripts/conformance --wide; not run by CI): as generate's, with machines
    of 16, 32 or 64 NUMA nodes (1-2 cores each) in a third of the cases, up to 8 reserved CPUs (whole cores
    in some), and each of the static policy's options drawn more often."""
    return generate(rng, version, wide=True)


def equivalent(ours: Any, theirs: Any) -> bool:
    """Equal answers; a start-up refusal matches when numalign's line carries upstream's text (it adds
    NewManager's "new static policy error: " and the fix, as every refusal of a bad input does)."""
    if isinstance(ours, dict) and isinstance(theirs, dict) and "start_error" in ours and "start_error" in theirs:
        # Upstream names one of several bad options by Go map order (start_error_map_order lists every
        # text it gave); numalign names the first in sorted order, which is one of them.
        texts = theirs.get("start_error_map_order", [theirs["start_error"]])
        return any(str(t) in str(ours["start_error"]) for t in texts)
    return bool(ours == theirs)


def size(case: dict[str, Any]) -> int:
    return len(case["cpus"]) * 10 + len(case["steps"]) * 3 + len(case["options"])


class _Store:
    def __init__(self) -> None:
        self.hints: dict[str, TopologyHint] = {}

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return self.hints.get(f"{pod_uid}/{container_name}", TopologyHint.of(None, False))


def _pod(uid: str, container: str, cpus: int) -> tuple[Pod, Container]:
    rl = {"cpu": Quantity.from_int(cpus), "memory": Quantity.parse("1Gi")}
    ctr = Container(name=container, requests=rl, limits=rl)
    return Pod(name=uid, uid=uid, containers=(ctr,)), ctr


def numalign(case: dict[str, Any], version: str) -> dict[str, Any]:
    kv = kubelet_version(version)
    infos = [CPUInfo(cpu=r[0], numa_node=r[1], socket=r[2], core=r[3], uncore=r[4]) for r in case["cpus"]]
    topo = CPUTopology.from_cpu_infos(infos)
    store = _Store()
    explicit = case["reserved_cpus"]
    try:
        policy = new_cpu_manager_policy(
            "static",
            topo,
            reserved_cpu=Quantity.from_int(case["num_reserved"]),
            reserved_system_cpus=explicit or (),
            policy_options=case["options"],
            feature_gates=effective_gates(case["gates"], kv),
            affinity=store,
            topology_manager_policy=case["topology_manager_policy"],
            option_maturity=option_maturity("cpu", kv),
            behaviours=behaviours(kv),
        )
        policy.start()
    except (ConfigError, NumalignError) as e:
        if "(k/k #140730" in str(e):
            return {"hang": True}  # taking the reserved CPUs never returns: the kubelet does not start
        return {"start_error": str(e)}
    assert isinstance(policy, StaticPolicy)
    steps: list[dict[str, Any]] = []
    for s in case["steps"]:
        if s["op"] == "remove":
            policy.remove_container(s["pod"], s["container"])
            steps.append({"removed": True})
            continue
        pod, ctr = _pod(s["pod"], s["container"], s["cpus"])
        store.hints[f"{s['pod']}/{s['container']}"] = TopologyHint.of(s["affinity"], s["preferred"])
        try:
            policy.allocate(pod, ctr)
        except AllocationError as e:
            if e.reason == KUBELET_HANGS:
                return {"hang": True}  # upstream's Allocate never returns (k/k #140730): no answer at all
            steps.append({"error": str(e)})
            continue
        got = policy.get_cpu_set(s["pod"], s["container"]) or frozenset()
        steps.append({"cpus": sorted(got)})
    return {
        "reserved": sorted(policy.reserved_cpus),
        "steps": steps,
        "default": sorted(policy.get_default_cpu_set()),
    }
