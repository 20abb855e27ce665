"""The "topology" area: the Topology Manager alone, with scripted hint providers (conformance/area_topology.go).

Cases are machines of 1 to 10 NUMA nodes (sockets of 1, 2 or 4 nodes, distances as SLIT tables give them,
or none), any policy and scope, the policy options (prefer-closest-numa-nodes, max-allowable-numa-nodes,
bad values included) at the release's option gates, and a sequence of pods admitted and removed. Each
provider answers a container (container scope) or the pod (pod scope) with the case's hints: no
preference, a resource that does not care, a resource that cannot be satisfied, or a few masks, and
may fail Allocate for a container. The answers are the verdict and the affinity stored per container.
"""

from __future__ import annotations

import random
from typing import Any

from conformance.versions import kubelet_version
from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.numa import NUMAInfo
from numalign.errors import AllocationError, ConfigError, NumalignError
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.topologymanager.manager import TopologyManager
from numalign.kubelet.versions import effective_gates, option_maturity

NAME = "topology"
MINORS = ("1.33", "1.34", "1.35", "1.36", "1.37")

_RESOURCES = ("cpu", "memory", "hugepages-1Gi", "nvidia.com/gpu", "example.com/nic")


def _distances(numas: int, per_socket: int, rng: random.Random) -> dict[str, list[int]]:
    near, far = rng.choice((11, 12, 16)), rng.choice((20, 21, 32))
    return {
        str(a): [10 if a == b else near if a // per_socket == b // per_socket else far for b in range(numas)]
        for a in range(numas)
    }


def _hints(rng: random.Random, numas: int, home: list[int]) -> dict[str, Any] | None:
    """One provider's answer for a container or a pod; most resources can sit on the pod's `home` nodes,
    as a pod sized for the machine's free resources can."""
    roll = rng.random()
    if roll < 0.2:
        return None  # no preference at all
    out: dict[str, Any] = {}
    for res in rng.sample(_RESOURCES, rng.randint(1, 2)):
        r = rng.random()
        if r < 0.1:
            out[res] = None  # don't care
        elif r < 0.13:
            out[res] = []  # cannot be satisfied
        else:
            need = rng.choice((1, 1, 1, 2, 2, 3))
            masks: set[tuple[int, ...]] = set()
            for _ in range(rng.randint(1, 6)):
                size = min(numas, rng.choice((need, need, need + 1, numas)))
                masks.add(tuple(sorted(rng.sample(range(numas), size))))
            if rng.random() < 0.7:
                masks.add(tuple(home))
            hints = [{"mask": list(m), "preferred": len(m) <= max(need, len(home)) and rng.random() < 0.9}
                     for m in sorted(masks)]
            if rng.random() < 0.05:
                hints.append({"mask": None, "preferred": rng.random() < 0.5})
            out[res] = hints
    return out


def _pod(rng: random.Random, uid: str, numas: int, providers: int) -> dict[str, Any]:
    inits = [f"init{i}" for i in range(rng.choice((0, 0, 1, 2)))]
    ctrs = [f"c{i}" for i in range(rng.randint(1, 3))]
    names = inits + ctrs
    home = sorted(rng.sample(range(numas), rng.choice((1, 1, 1, 2)) if numas > 1 else 1))
    errors: list[dict[str, str]] = []
    for _ in range(providers):
        fail = {n: "device plugin endpoint closed" for n in names if rng.random() < 0.03}
        errors.append(fail)
    return {
        "uid": uid,
        "init_containers": inits,
        "containers": ctrs,
        "hints": [{n: _hints(rng, numas, home) for n in names} for _ in range(providers)],
        "pod_hints": [_hints(rng, numas, home) for _ in range(providers)],
        "allocate_errors": errors,
    }


def generate(rng: random.Random, version: str, wide: bool = False) -> dict[str, Any]:
    per_socket = rng.choice((1, 2, 2, 4))
    sockets = rng.choice((1, 2, 2, 2, 4)) if per_socket < 4 else rng.choice((1, 2))
    numas = per_socket * sockets
    if wide and rng.random() < WIDE_NUMA_SHARE:
        # 12 or 16 nodes (4 sockets of 3 or 4, EPYC in NPS4 over 4 sockets, 2 sockets of 8 under SNC)
        per_socket, sockets = rng.choice(((3, 4), (4, 4), (8, 2)))
        numas = per_socket * sockets
    elif rng.random() < 0.06:
        numas = rng.choice((9, 10))  # beyond the default limit of 8
    case: dict[str, Any] = {
        "numa_nodes": list(range(numas)),
        "distances": _distances(numas, per_socket, rng) if rng.random() < 0.93 else None,
        "policy": rng.choice(("none", "best-effort", "restricted", "restricted", "single-numa-node")),
        "scope": rng.choice(("container", "container", "pod", "pod")) if rng.random() < 0.98 else "node",
    }
    options: dict[str, str] = {}
    if rng.random() < 0.45:
        options["prefer-closest-numa-nodes"] = rng.choice(("true", "true", "true", "false", "1", "yes"))
    if numas > 8 or rng.random() < 0.1:
        options["max-allowable-numa-nodes"] = rng.choice(("10", "16", "8", "10", "0", "many"))
        if wide and numas > 10 and rng.random() < 0.8:
            options["max-allowable-numa-nodes"] = str(rng.choice((numas, 16, 64)))
    if rng.random() < 0.02:
        options["unknown-option"] = "true"
    case["options"] = options
    gates: dict[str, bool] = {}
    if rng.random() < 0.1:
        gates["TopologyManagerPolicyBetaOptions"] = False
    if rng.random() < 0.1:
        gates["TopologyManagerPolicyAlphaOptions"] = True
    case["gates"] = gates
    providers = rng.randint(1, 3)
    case["providers"] = providers
    steps: list[dict[str, Any]] = []
    live: list[dict[str, Any]] = []
    for i in range(rng.randint(1, 4)):
        if live and rng.random() < 0.3:
            steps.append({"op": "remove", "pod": live.pop(rng.randrange(len(live)))})
            continue
        pod = _pod(rng, f"p{i}", numas, providers)
        steps.append({"op": "admit", "pod": pod})
        live.append(pod)
    case["steps"] = steps
    return case


WIDE_NUMA_SHARE = 0.4  # of the wide profile's cases: machines of 12 or 16 NUMA nodes


def generate_wide(rng: random.Random, version: str) -> dict[str, Any]:
    """A case of the wide profile (scripts/conformance --wide; not run by CI): as generate's, with machines
    of 12 or 16 NUMA nodes (distances of 2 or 4 sockets) in 40% of the cases, most of them allowed by
    max-allowable-numa-nodes."""
    return generate(rng, version, wide=True)


def equivalent(ours: Any, theirs: Any) -> bool:
    """Equal answers; a start-up refusal matches when numalign's line carries upstream's text (numalign
    adds the fix). With several bad options upstream names one by Go map order (start_error_map_order
    lists every text it gave); numalign names one of them."""
    if isinstance(ours, dict) and isinstance(theirs, dict) and "start_error" in ours and "start_error" in theirs:
        texts = theirs.get("start_error_map_order", [theirs["start_error"]])
        return any(str(t) in str(ours["start_error"]) for t in texts)
    return bool(ours == theirs)


def size(case: dict[str, Any]) -> int:
    hints = sum(len(str(s["pod"])) for s in case["steps"])
    return len(case["numa_nodes"]) * 50 + len(case["steps"]) * 200 + hints // 20


def _to_hints(raw: dict[str, Any] | None) -> ProviderHints:
    if raw is None:
        return None
    return {
        res: None if hints is None else [TopologyHint.of(h["mask"], h["preferred"]) for h in hints]
        for res, hints in raw.items()
    }


class _Scripted:
    """A hint provider answering with the hints the case gives for the pod being admitted."""

    def __init__(self, index: int) -> None:
        self.name = f"provider{index}"
        self.index = index
        self.pod: dict[str, Any] = {}

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return _to_hints(self.pod["hints"][self.index].get(container.name))

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        return _to_hints(self.pod["pod_hints"][self.index])

    def allocate(self, pod: Pod, container: Container) -> None:
        text = self.pod["allocate_errors"][self.index].get(container.name)
        if text is not None:
            raise AllocationError(text)

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        pass


def _pod_object(raw: dict[str, Any]) -> Pod:
    return Pod(
        name=raw["uid"],
        uid=raw["uid"],
        init_containers=tuple(Container(n, is_init=True) for n in raw["init_containers"]),
        containers=tuple(Container(n) for n in raw["containers"]),
    )


def _hint_answer(h: TopologyHint) -> dict[str, Any]:
    return {"mask": h.nodes(), "preferred": h.preferred}


def numalign(case: dict[str, Any], version: str) -> dict[str, Any]:
    kv = kubelet_version(version)
    distances = case["distances"]
    try:
        numa = NUMAInfo.create(case["numa_nodes"], None if distances is None else
                               {int(k): row for k, row in distances.items()})
        tm = TopologyManager(numa, case["policy"], case["scope"], case["options"],
                             effective_gates(case["gates"], kv), option_maturity=option_maturity("topology", kv))
    except (ConfigError, NumalignError) as e:
        return {"start_error": str(e)}
    providers = [_Scripted(i) for i in range(case["providers"])]
    for p in providers:
        tm.add_hint_provider(p)
    steps: list[dict[str, Any]] = []
    for s in case["steps"]:
        for p in providers:
            p.pod = s["pod"]
        pod = _pod_object(s["pod"])
        out: dict[str, Any] = {}
        if s["op"] == "admit":
            result = tm.decide(pod).result
            out.update(admit=result.admit, reason=result.reason, message=result.message)
            if result.admit:
                for c in pod.all_containers():
                    tm.add_container(pod, c, f"{pod.uid}/{c.name}")
        else:
            for c in pod.all_containers():
                tm.remove_container(f"{pod.uid}/{c.name}")
        out["affinity"] = {c.name: _hint_answer(tm.get_affinity(pod.uid, c.name)) for c in pod.all_containers()}
        steps.append(out)
    return {"steps": steps}
