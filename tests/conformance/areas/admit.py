"""The "admit" area: a kubelet's pod admission with the real managers wired as the kubelet wires them
(conformance/area_admit.go): the Topology Manager, the device, CPU and memory managers as its hint
providers, the predicate admit handler's resource fit, over a sequence of admissions and deletions.

Cases are machines of 1 to 4 or 8 NUMA nodes as cadvisor reports them (sockets of NUMA nodes of cores of 1
or 2 threads, memory and hugepages per node), the kubelet configuration's fields these managers read
(every policy and scope, the CPU manager's options at the release's gates, reserved CPUs as a set or a
count, the memory manager's reserved memory per NUMA node), devices per NUMA node (some without
topology), and pods of every QoS class with init containers, hugepages and devices. numalign answers
with its own node (numalign.Node) at the same kubelet version.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any, cast

from conformance import merge_budget
from conformance.kubelet_options import CPU_MANAGER_POLICY_OPTIONS
from conformance.versions import kubelet_version
from numalign import Node
from numalign import metrics as m
from numalign.core.decision import KUBELET_HANGS
from numalign.errors import AllocationError, ConfigError, EmptyAllocateError, NumalignError, PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse
from numalign.k8s.deviceplugin import Device as PluginDevice
from numalign.k8s.kubeletconfig_read import config_from_dict
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.devicemanager.endpoint import StaticEndpoint
from numalign.kubelet.devicemanager.pod_devices import device_sort_key
from numalign.machine.cadvisor import machine_from_cadvisor, machine_to_cadvisor
from numalign.machine.shorthand import parse_shorthand
from numalign.machine.topology import Device

NAME = "admit"
MINORS = ("1.33", "1.34", "1.35", "1.36", "1.37")

_MI = 1 << 20
_GI = 1 << 30
_RESOURCES = ("example.com/gpu", "example.com/nic")
DEVICE_SHARE = 0.5  # the share of cases with device plugins (each case with them costs the harness ~60 ms)
# Cases at 1.36 on whose kubelet turns the alpha gate PodLevelResourceManagers on (drawn last, so the
# other cases are the ones seeds gave before).
RESOURCE_MANAGERS_SHARE = 0.25
FAILING_SHARE = 0.6  # of the cases with devices, those where a plugin's Allocate fails for some devices
EIGHT_NUMA_SHARE = 0.15  # the share of cases on machines of 8 NUMA nodes (their merges: merge_budget.py)


def _machine(rng: random.Random) -> tuple[dict[str, Any], int, int]:
    if rng.random() < EIGHT_NUMA_SHARE:
        # 8 NUMA nodes (the Topology Manager's default max-allowable-numa-nodes): each provider may list
        # up to 255 masks, and the real merge walks their product; the merge budget keeps it bounded.
        sockets, per_socket = rng.choice(((1, 8), (2, 4), (4, 2)))
        cores = rng.randint(1, 2)
    else:
        sockets = rng.choice((1, 2, 2, 2, 4))
        per_socket = 1 if sockets == 4 else rng.choice((1, 1, 2)) if sockets == 2 else rng.choice((1, 2, 4))
        cores = rng.randint(2, 6) if sockets * per_socket <= 2 else rng.randint(1, 4)
    threads = rng.choice((1, 2, 2))
    memory = rng.choice((4, 8, 16))
    spec = f"{sockets}s x {per_socket}n x {cores}c x {threads}t, {memory}Gi/node"
    if rng.random() < 0.3:
        spec += f", hugepages-2Mi={rng.choice((64, 256))}/node"
    if rng.random() < 0.15:
        spec += ", hugepages-1Gi=1/node"
    return machine_to_cadvisor(parse_shorthand(spec)), sockets * per_socket, cores * threads


def _devices(rng: random.Random, numas: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for res in _RESOURCES:
        if rng.random() < 0.5:
            continue
        # some resources sit on every other node only (GPUs on nodes 1, 3, 5, 7 of an EPYC in NPS4)
        nodes = range(numas) if rng.random() < 0.7 else range(rng.randint(0, 1), numas, 2)
        for node in nodes:
            for _ in range(rng.choice((0, 1, 2, 2))):
                numa: list[int] | None = [node] if rng.random() < 0.92 else None
                out.append({"resource": res, "id": f"{res.rsplit('/', 1)[1]}{len(out)}", "numa": numa,
                            "unhealthy": rng.random() < 0.05})
    return out


def _config(rng: random.Random, numas: int, machine: dict[str, Any]) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "cpuManagerPolicy": rng.choice(("static", "static", "static", "none")),
        "topologyManagerPolicy": rng.choice(("none", "best-effort", "restricted", "restricted", "single-numa-node")),
        "topologyManagerScope": rng.choice(("container", "pod")),
        "evictionHard": {"memory.available": rng.choice(("100Mi", "100Mi", "256Mi"))},
        "maxPods": rng.choice((110, 110, 6)),
        "memoryManagerPolicy": "None",  # every field the managers read is given: no defaulting on either side
    }
    if cfg["cpuManagerPolicy"] == "static":
        cfg["cpuManagerPolicyOptions"] = {o: "true" for o in CPU_MANAGER_POLICY_OPTIONS if rng.random() < 0.12}
    if rng.random() < 0.5:
        cpus = sorted(c for n in machine["topology"] for core in n["cores"] for c in core["thread_ids"])
        cfg["reservedSystemCPUs"] = ",".join(str(c) for c in sorted(rng.sample(cpus, rng.randint(1, 2))))
    else:
        cfg["systemReserved"] = {"cpu": rng.choice(("1", "500m", "2"))}
    system_memory = rng.choice((256, 512, 1024))
    cfg.setdefault("systemReserved", {})["memory"] = f"{system_memory}Mi"
    if rng.random() < 0.6:
        cfg["memoryManagerPolicy"] = "Static"
        total = system_memory + int(cfg["evictionHard"]["memory.available"].removesuffix("Mi"))
        if numas > 1 and rng.random() < 0.3:
            first = total // 2
            cfg["reservedMemory"] = [{"numaNode": 0, "limits": {"memory": f"{first}Mi"}},
                                     {"numaNode": 1, "limits": {"memory": f"{total - first}Mi"}}]
        else:
            cfg["reservedMemory"] = [{"numaNode": 0, "limits": {"memory": f"{total}Mi"}}]
    if rng.random() < 0.3:
        cfg["kubeReserved"] = {"cpu": "500m", "memory": "128Mi"}
        if cfg["memoryManagerPolicy"] == "Static":  # the reservation per NUMA node must add up to it
            last = cfg["reservedMemory"][-1]["limits"]
            last["memory"] = f"{int(last['memory'].removesuffix('Mi')) + 128}Mi"
    hugepages_2mi = any(h["page_size"] == 2048 for h in machine.get("hugepages") or [])
    if cfg["memoryManagerPolicy"] == "Static" and rng.random() < 0.5 and hugepages_2mi:
        cfg["reservedMemory"][0]["limits"]["hugepages-2Mi"] = "4Mi"
    gates: dict[str, bool] = {}
    if rng.random() < 0.5:
        gates["CPUManagerPolicyAlphaOptions"] = True
    if rng.random() < 0.03:
        gates["TopologyManagerPolicyOptions"] = False
    if gates:
        cfg["featureGates"] = gates
    if rng.random() < 0.3:
        cfg["topologyManagerPolicyOptions"] = {"prefer-closest-numa-nodes": "true"}
    return cfg


def _resources(rng: random.Random, per_numa_cpus: int, hugepages: list[str], devices: list[str],
               qos: str, init: bool = False) -> dict[str, Any]:
    cpu = rng.choice((1, 1, 2, 2, 3, 4, per_numa_cpus, per_numa_cpus + 1))
    cpu_text = str(cpu) if rng.random() < 0.9 else f"{cpu * 1000 - 500}m"
    memory = rng.choice((128 * _MI, 256 * _MI, 512 * _MI, _GI, 2 * _GI, 3 * _GI))
    limits: dict[str, str] = {"cpu": cpu_text, "memory": str(memory)}
    for h in hugepages:
        if rng.random() < 0.4:
            if h == "hugepages-1Gi":
                limits[h] = "1Gi"
            else:
                limits[h] = rng.choice(("2Mi", "64Mi"))
    for d in devices:
        if rng.random() < 0.4:
            # An init container's devices are reused by the containers after it; upstream takes a reuse
            # of fewer than it holds from a Go set (random), so init containers ask for one at most.
            limits[d] = "1" if init else str(rng.choice((1, 1, 2, 3)))
    if qos == "guaranteed":
        return {"requests": dict(limits), "limits": limits}
    if qos == "burstable":
        # hugepages and extended resources must have requests equal to limits (API validation)
        fixed = {k: v for k, v in limits.items() if k.startswith(("hugepages", "example"))}
        requests = {"cpu": "500m", "memory": "64Mi", **fixed}
        return {"requests": requests, "limits": limits}
    return {"limits": {k: v for k, v in limits.items() if k.startswith("example")}} if rng.random() < 0.3 else {}


def _pod(rng: random.Random, i: int, per_numa_cpus: int, hugepages: list[str], devices: list[str],
         pod_level: bool = False, wide: bool = False) -> dict[str, Any]:
    qos = rng.choice(("guaranteed", "guaranteed", "guaranteed", "burstable", "besteffort"))
    inits: list[dict[str, Any]] = [
        {"name": f"init{j}", "resources": _resources(rng, per_numa_cpus, hugepages, devices, qos, init=True)}
        for j in range(rng.choice((0, 0, 0, 1) if not wide else (0, 1, 2, 3)))
    ]
    ctrs: list[dict[str, Any]] = [
        {"name": f"c{j}", "resources": _resources(rng, per_numa_cpus, hugepages, devices, qos)}
        for j in range(rng.choice((1, 1, 2, 3)))
    ]
    for c in (*inits, *ctrs):
        c["image"] = "pause"
    for c in inits:
        if rng.random() < 0.4:
            c["restartPolicy"] = "Always"  # a sidecar: it keeps what it holds beside the app containers
    spec: dict[str, Any] = {"containers": ctrs}
    if inits:
        spec["initContainers"] = inits
    if pod_level and rng.random() < (0.15 if not wide else 0.4):
        # pod-level resources (PodLevelResources, on since 1.34): they decide the fit for cpu and memory
        res = {"cpu": str(rng.choice((1, 2, 4, 6))), "memory": str(rng.choice((1, 2, 4)) * _GI)}
        spec["resources"] = {"requests": dict(res), "limits": res}
        if wide and rng.random() < 0.5:
            _pod_level_over_containers(rng, spec, (*inits, *ctrs))
            return _pod_object(i, spec)
        for c in (*inits, *ctrs):
            for key in ("requests", "limits"):
                if key in c["resources"]:
                    c["resources"][key] = {n: q for n, q in c["resources"][key].items()
                                           if n not in ("cpu", "memory") and not n.startswith("hugepages")}
    return _pod_object(i, spec)


def _pod_object(i: int, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"uid-p{i}"}, "spec": spec}


def _pod_level_over_containers(rng: random.Random, spec: dict[str, Any], ctrs: Sequence[dict[str, Any]]) -> None:
    """Pod-level resources beside containers that keep their own cpu and memory (the wide profile), as the
    API server admits them: the pod's requests at least each container's and the app containers' sum (with
    the sidecars'), its limits equal to its requests (a Guaranteed pod when every container is)."""
    def amount(c: dict[str, Any], name: str) -> int:  # millicores of cpu, bytes of memory
        q = Quantity.parse(c["resources"].get("requests", c["resources"].get("limits", {})).get(name, "0"))
        return q.milli_value() if name == "cpu" else q.value()

    # at least what the containers need together: the ones that keep running, plus the largest of the
    # init containers that run before them
    running = [c for c in ctrs if not c["name"].startswith("init") or c.get("restartPolicy") == "Always"]
    inits = [c for c in ctrs if c["name"].startswith("init") and c.get("restartPolicy") != "Always"]
    cpu = sum(amount(c, "cpu") for c in running) + max([0, *(amount(c, "cpu") for c in inits)])
    memory = sum(amount(c, "memory") for c in running) + max([0, *(amount(c, "memory") for c in inits)])
    # whole CPUs (at least one), sometimes one more than needed
    cpu = max(1000, -(-cpu // 1000) * 1000) + rng.choice((0, 0, 1000))
    memory = max(memory, _GI) + rng.choice((0, 0, _GI))
    res = {"cpu": f"{cpu // 1000}", "memory": str(memory)}
    spec["resources"] = {"requests": dict(res), "limits": res}


def named_cases(version: str) -> list[tuple[str, dict[str, Any], str]]:
    """Cases run by name after the generated ones, each with its CPU-time bound in the harness:
    k8s-140730 and empty-allocate (empty_allocate_case).

    k8s-140730: the kubelet's static policy with full-pcpus-only and distribute-cpus-across-numa never
    returns from Allocate when whole cores must be spread over NUMA nodes whose free CPUs add up but not in
    whole cores (1.33-1.37; fixed in 1.38). 4 NUMA nodes x 4 cores x 2 threads, 3 CPUs of each node
    reserved (a core and a thread), so 5 free per node; a Guaranteed pod of 14 CPUs. Upstream spins: the
    harness answers {"hang": true} once the case has used 2 s of CPU (its admissions take milliseconds
    when they return); numalign must answer HANGS with the text docs/fidelity.md gives."""
    machine = machine_to_cadvisor(parse_shorthand("1s x 4n x 4c x 2t, 16Gi/node"))
    config = {
        "cpuManagerPolicy": "static",
        "cpuManagerPolicyOptions": {"full-pcpus-only": "true", "distribute-cpus-across-numa": "true"},
        "reservedSystemCPUs": "0,1,4,5,8,9,12,13,16,20,24,28",
        "systemReserved": {"memory": "256Mi"},
        "evictionHard": {"memory.available": "100Mi"},
        "maxPods": 110,
        "memoryManagerPolicy": "None",
        "topologyManagerPolicy": "none",
        "topologyManagerScope": "container",
    }
    res = {"cpu": "14", "memory": str(_GI)}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p0", "namespace": "default", "uid": "uid-p0"},
           "spec": {"containers": [{"name": "c0", "image": "pause",
                                    "resources": {"requests": dict(res), "limits": res}}]}}
    case = {"machine": machine, "config": config, "devices": [], "steps": [{"op": "admit", "pod": pod}]}
    return [("k8s-140730", case, "2s"), ("empty-allocate", empty_allocate_case(), "20s"),
            ("reserved-hugepages-map-order", reserved_hugepages_case(), "20s")]


def empty_allocate_case() -> dict[str, Any]:
    """A device plugin answering Allocate with no container response, reached at every release (the
    generated cases reach it in 1-5 admissions a release, seed 1). Two GPUs on NUMA 0, gpu0 the plugin's
    blank answer: p0 asks for one GPU and gets gpu0 (the plugins prefer natural order), so the kubelet
    refuses it in its words per release (Go's %v of the empty AllocateResponse: gogo's struct text at
    1.33, protoc-gen-go's empty text from 1.34) and leaves gpu0 taken; p1 gets gpu1, and p2 finds none
    left (TopologyAffinityError under single-numa-node). Each step answers what is held (the device
    checkpoint) and the case its metrics."""
    machine = machine_to_cadvisor(parse_shorthand("1s x 2n x 2c x 2t, 8Gi/node"))
    config = {
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "systemReserved": {"memory": "256Mi"},
        "evictionHard": {"memory.available": "100Mi"},
        "maxPods": 110,
        "memoryManagerPolicy": "None",
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "container",
    }
    devices = [{"resource": "example.com/gpu", "id": "gpu0", "numa": [0], "unhealthy": False, "emptyAllocate": True},
               {"resource": "example.com/gpu", "id": "gpu1", "numa": [0], "unhealthy": False}]
    limits = {"cpu": "1", "memory": str(256 * _MI), "example.com/gpu": "1"}
    steps = [{"op": "admit", "pod": {"apiVersion": "v1", "kind": "Pod",
                                     "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"uid-p{i}"},
                                     "spec": {"containers": [{"name": "c0", "image": "pause", "resources": {
                                         "requests": dict(limits), "limits": dict(limits)}}]}}}
             for i in range(3)]
    return {"machine": machine, "config": config, "devices": devices, "steps": steps, "held": True}


def reserved_hugepages_case() -> dict[str, Any]:
    """The memory manager's Static policy refusing to start where two memory types' reservedMemory differs
    from the node allocatable reservation (the wide profile's reserved 1Gi page beside a 2Mi reservation,
    neither in kubeReserved or systemReserved). validateReservedMemory walks a Go map of the types, so the
    kubelet names hugepages-1Gi or hugepages-2Mi at random: the harness answers every text it sees
    (start_error_map_order), numalign names the first in sorted order. Found by the wide profile at 1.34.4
    and 1.35.4 (seeds 21, 23), where the harness answered only the text of its first try."""
    machine = machine_to_cadvisor(parse_shorthand("1s x 2n x 2c x 2t, 8Gi/node, hugepages-2Mi=64/node, "
                                                  "hugepages-1Gi=1/node"))
    config = {
        "cpuManagerPolicy": "none",
        "systemReserved": {"cpu": "1", "memory": "256Mi"},
        "evictionHard": {"memory.available": "100Mi"},
        "maxPods": 110,
        "memoryManagerPolicy": "Static",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "356Mi", "hugepages-2Mi": "4Mi",
                                                       "hugepages-1Gi": "1Gi"}}],
        "topologyManagerPolicy": "best-effort",
        "topologyManagerScope": "container",
    }
    limits = {"cpu": "1", "memory": str(256 * _MI)}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p0", "namespace": "default", "uid": "uid-p0"},
           "spec": {"containers": [{"name": "c0", "image": "pause",
                                    "resources": {"requests": dict(limits), "limits": limits}}]}}
    return {"machine": machine, "config": config, "devices": [], "steps": [{"op": "admit", "pod": pod}]}


def _hangs(message: str, version: str) -> dict[str, Any]:
    """numalign's answer where the kubelet hangs: {"hang": true} as the harness's, when it says so in the
    documented words (docs/fidelity.md); any other text is kept, so that it shows as a difference."""
    if message.startswith(f"the kubelet {version} hangs here (k/k #140730, fixed in 1.38)"):
        return {"hang": True}
    return {"hang": True, "message": message}


def generate(rng: random.Random, version: str, wide: bool = False) -> dict[str, Any]:
    machine, numas, per_numa_cpus = _wide_machine(rng) if wide else _machine(rng)
    sizes = {h["page_size"] for h in machine.get("hugepages") or []}
    hugepages = sorted(f"hugepages-{'2Mi' if size == 2048 else '1Gi'}" for size in sizes)
    devices = _devices(rng, numas) if rng.random() < DEVICE_SHARE else []
    resources = sorted({d["resource"] for d in devices})
    steps: list[dict[str, Any]] = []
    live: list[str] = []
    for i in range(rng.randint(2, 8)):
        if live and rng.random() < 0.25:
            steps.append({"op": "delete", "uid": live.pop(rng.randrange(len(live)))})
            continue
        # 1.33's kubelet refuses pod-level resources in an admit handler of its own (gate off), not wired here
        pod = _pod(rng, i, per_numa_cpus, hugepages, resources, pod_level=not version.startswith("1.33"), wide=wide)
        steps.append({"op": "admit", "pod": pod})
        live.append(pod["metadata"]["uid"])
    config = _wide_config(rng, numas, machine) if wide else _config(rng, numas, machine)
    case: dict[str, Any] = {"machine": machine, "config": config, "devices": devices, "steps": steps}
    if devices and rng.random() < FAILING_SHARE:
        # A plugin whose Allocate fails for a request including one of these devices. Half of these cases
        # also answer what the managers hold after each step (their state and checkpoint files, after the
        # kubelet's stale-state pass); the others leave the next admission to make that pass.
        for d in rng.sample(devices, rng.randint(1, max(1, len(devices) // 2))):
            d["failAllocate"] = True
        if rng.random() < 0.5:
            case["held"] = True
        if len({d["resource"] for d in devices}) == 1 and rng.random() < 0.5:
            # A plugin answering Allocate with no container response for a request including this device.
            # One device resource only: a container of two would make which plugin is asked first (a Go
            # map's order upstream) change the calls made and, with devices left taken, later answers.
            rng.choice(devices)["emptyAllocate"] = True
    if int(version.split(".")[1]) >= 36 and rng.random() < RESOURCE_MANAGERS_SHARE:
        # The alpha gate PodLevelResourceManagers registers the resource_manager_* metrics (1.36 on), which
        # count the managers' node-level allocations too; numalign does not model pod-level resource
        # managers (refuse_unmodelled), so these cases' pods keep their resources at container level.
        case["config"].setdefault("featureGates", {})["PodLevelResourceManagers"] = True
        for s in steps:
            if s["op"] == "admit":
                s["pod"]["spec"].pop("resources", None)
    return case


def generate_wide(rng: random.Random, version: str) -> dict[str, Any]:
    """A case of the wide profile (scripts/conformance --wide; not run by CI): as generate's, with machines
    of 16, 32 or 64 NUMA nodes in a third of the cases, the CPU manager's options drawn more often and
    reserved CPUs as whole cores, max-allowable-numa-nodes, up to 3 init containers (sidecars among them),
    and pod-level resources more often, half of them beside containers that keep their own cpu and memory;
    on machines of up to 8 NUMA nodes, memory-only NUMA nodes (CXL, HBM) or a node whose CPUs are offline in
    some, and devices on two or more NUMA nodes in some (_uneven)."""
    case = generate(rng, version, wide=True)
    _uneven(random.Random(json.dumps(case, sort_keys=True)), case)
    return case


MEMORY_ONLY_SHARE = 0.2  # of the wide profile's cases of up to 8 NUMA nodes: nodes without CPUs
MULTI_NUMA_DEVICE_SHARE = 0.3  # of the wide profile's cases with devices: some devices on several nodes


def _uneven(rng: random.Random, case: dict[str, Any]) -> None:
    """Machines as they come besides sockets of equal nodes: memory-only NUMA nodes after the others
    (CXL or HBM memory: memory and hugepage sizes without pages, no cores, far from every node), or the
    last node's CPUs offline (its memory kept); and devices whose topology names two or more nodes. Drawn
    from the case's own generator (seeded by the case), so the wide series' other draws stay as they were."""
    machine = case["machine"]
    topology = machine["topology"]
    if len(topology) <= 8 and rng.random() < MEMORY_ONLY_SHARE:
        if len(topology) >= 2 and rng.random() < 0.3:
            node = topology[-1]
            machine["num_cores"] -= sum(len(core["thread_ids"]) for core in node["cores"])
            machine["num_physical_cores"] -= len(node["cores"])
            node["cores"], node["caches"] = [], []
            cpus = sorted(t for n in topology for core in n["cores"] for t in core["thread_ids"])
            reserved = case["config"].get("reservedSystemCPUs")
            if reserved and not {int(c) for c in reserved.split(",")} <= set(cpus):
                case["config"]["reservedSystemCPUs"] = str(cpus[0])  # reserve CPUs the machine has
        else:
            base = len(topology)
            for extra in range(rng.choice((1, 1, 2))):
                memory = rng.choice((4, 8)) << 30
                pages = [{"page_size": h["page_size"], "num_pages": 0} for h in topology[0].get("hugepages") or []]
                topology.append({"node_id": base + extra, "memory": memory, "hugepages": pages, "cores": [],
                                 "caches": []})
                machine["memory_capacity"] += memory
            total = len(topology)
            for i, node in enumerate(topology):
                old = node.get("distances") or []
                node["distances"] = [10 if i == j else 30 if i >= base or j >= base else old[j] if j < len(old) else 21
                                     for j in range(total)]
    numas = len(topology)
    if case["devices"] and numas > 1 and rng.random() < MULTI_NUMA_DEVICE_SHARE:
        for device in case["devices"]:
            if rng.random() < 0.35:
                device["numa"] = sorted(rng.sample(range(numas), rng.randint(2, numas)))


WIDE_NUMA_SHARE = 0.35  # of the wide profile's cases: machines of 16, 32 or 64 NUMA nodes


def cpu_bound(case: dict[str, Any]) -> str | None:
    """The harness's CPU-time bound for a case of 25 or more NUMA nodes (the wide profile's 32 and 64): 5 s.
    Their admissions return in milliseconds, or never where upstream walks 2^N masks (the named difference
    mask-walk), which the default 20 s would spend on each."""
    return "5s" if len(case["machine"]["topology"]) >= 25 else None


def _wide_machine(rng: random.Random) -> tuple[dict[str, Any], int, int]:
    if rng.random() >= WIDE_NUMA_SHARE:
        return _machine(rng)
    # AMD EPYC in NPS4 over 4 or 8 sockets, Intel SNC over 8 sockets, CXL memory nodes: one core of one or
    # two threads a node keeps the machine small enough to answer
    numas = rng.choice((16, 16, 32, 64))
    sockets = rng.choice((1, 2, 4)) if numas == 16 else rng.choice((2, 4, 8))
    threads = rng.choice((1, 2))
    spec = f"{sockets}s x {numas // sockets}n x 1c x {threads}t, {rng.choice((2, 4))}Gi/node"
    if rng.random() < 0.3:
        spec += ", hugepages-2Mi=64/node"
    return machine_to_cadvisor(parse_shorthand(spec)), numas, threads


def _wide_config(rng: random.Random, numas: int, machine: dict[str, Any]) -> dict[str, Any]:
    cfg = _config(rng, numas, machine)
    if cfg["cpuManagerPolicy"] == "static" and rng.random() < 0.6:
        cfg["cpuManagerPolicyOptions"] = {o: "true" for o in CPU_MANAGER_POLICY_OPTIONS if rng.random() < 0.35}
    if "reservedSystemCPUs" in cfg and rng.random() < 0.4:
        # whole cores, as administrators reserve them: the first core of the first one or two NUMA nodes
        nodes = machine["topology"][:rng.randint(1, 2)]
        cpus = sorted(c for n in nodes for c in n["cores"][0]["thread_ids"])
        cfg["reservedSystemCPUs"] = ",".join(str(c) for c in cpus)
    if numas > 16 and cfg["memoryManagerPolicy"] == "Static" and rng.random() < 0.7:
        # Static there walks 2^N masks upstream for a Guaranteed pod's default hint (the named difference
        # mask-walk, 20 s of the harness's CPU a case): a few of these cases are enough
        cfg["memoryManagerPolicy"] = "None"
        del cfg["reservedMemory"]
    hugepages_1gi = any(h["page_size"] == 1 << 20 for h in machine.get("hugepages") or [])
    if cfg["memoryManagerPolicy"] == "Static" and hugepages_1gi and rng.random() < 0.5:
        cfg["reservedMemory"][0]["limits"]["hugepages-1Gi"] = "1Gi"  # node 0's one 1Gi page
    options = cfg.setdefault("topologyManagerPolicyOptions", {})
    if numas > 8:
        roll = rng.random()
        if roll < 0.4 or numas > 16:
            # the kubelet checks the NUMA count under any other policy; beyond 16 nodes the hint providers'
            # masks (2^32) never end upstream, so these machines run without a Topology Manager policy
            cfg["topologyManagerPolicy"] = "none" if roll < 0.9 else cfg["topologyManagerPolicy"]
        elif roll < 0.85:
            options["max-allowable-numa-nodes"] = str(numas)
    elif rng.random() < 0.15:
        options["max-allowable-numa-nodes"] = rng.choice(("8", "16"))
    if not options:
        del cfg["topologyManagerPolicyOptions"]
    return cfg


def equivalent(ours: Any, theirs: Any) -> bool:
    """Equal answers; a start-up refusal matches when numalign's line carries upstream's text (numalign
    adds where and the fix, as every refusal of a bad input does)."""
    if isinstance(ours, dict) and isinstance(theirs, dict) and "start_error" in ours and "start_error" in theirs:
        # With several bad options upstream names one by Go map order (start_error_map_order lists every
        # text it gave); numalign names one of them.
        texts = theirs.get("start_error_map_order", [theirs["start_error"]])
        return any(str(t) in str(ours["start_error"]) for t in texts)
    if (isinstance(ours, dict) and isinstance(theirs, dict) and set(ours) == set(theirs)
            and "steps" in ours and set(ours) <= {"steps", "metrics"}):
        if len(ours["steps"]) != len(theirs["steps"]):
            return False
        by_map_order = False
        for a, b in zip(ours["steps"], map(_file_written_at_once, theirs["steps"]), strict=True):
            if a != b:
                if not _map_order_step(a, b):
                    return False
                by_map_order = True
        return _metrics_equal(ours, theirs, by_map_order)
    return bool(ours == theirs)


def _metrics_equal(ours: dict[str, Any], theirs: dict[str, Any], by_map_order: bool) -> bool:
    """The kubelet metrics the case's admissions counted (metrics_answer) are equal. Where a step matched
    only because the device manager walked a container's resources in another Go map order, the plugins
    were asked other Allocate calls: each side's Allocate count per resource must then be the calls its
    plugins saw (the steps' pluginCalls, compared above), the rest equal."""
    if not by_map_order or "metrics" not in ours:  # (both have it or neither: their keys are the same)
        return bool(ours.get("metrics") == theirs.get("metrics"))
    a, b = dict(ours.get("metrics") or {}), dict(theirs.get("metrics") or {})
    made_a, made_b = a.pop(m.DP_ALLOC_DURATION, {}), b.pop(m.DP_ALLOC_DURATION, {})
    return a == b and made_a == _allocate_calls(ours["steps"]) and made_b == _allocate_calls(theirs["steps"])


def _allocate_calls(steps: Sequence[Any]) -> dict[str, int]:
    """Allocate calls per resource over a case's steps, as the duration histogram's series count them."""
    out: dict[str, int] = {}
    for step in steps:
        for resource, calls in (step.get("pluginCalls") or {}).items() if isinstance(step, dict) else ():
            made = sum(1 for c in calls if c.get("call") == "Allocate")
            if made:
                out[f"resource_name={resource}"] = out.get(f"resource_name={resource}", 0) + made
    return out


def _file_written_at_once(step: Any) -> Any:
    """The kubelet's step with its device checkpoint file as numalign writes it: without the entries of
    pods no longer active, which the kubelet's file keeps until its next write (area_admit.go's
    deviceCheckpointAnswer lists them apart, as lagging; docs/fidelity.md)."""
    if not (isinstance(step, dict) and isinstance(step.get("held"), dict)):
        return step
    devices = {k: v for k, v in step["held"].get("devices", {}).items() if k != "lagging"}
    return {**step, "held": {**step["held"], "devices": devices}}


def _calls_by_map_order(ours: Any, theirs: Any) -> tuple[Any, Any]:
    """Two steps rejected by a container's device allocation, without their plugin calls when these agree
    but for the failing container's calls to its other resources: the device manager walks the
    container's limits, a Go map, so upstream may have asked another plugin (its GetPreferredAllocation
    and Allocate) before it met the failure, where numalign, in sorted order, met it first, or the other
    way round. Any other pair of steps is returned as it is."""
    if not (isinstance(ours, dict) and isinstance(theirs, dict)):
        return ours, theirs
    if ours.get("reason") != "UnexpectedAdmissionError" or theirs.get("reason") != "UnexpectedAdmissionError":
        return ours, theirs
    a, b = ours.get("pluginCalls", {}), theirs.get("pluginCalls", {})
    # Both met the failure on the same resource: its plugin was asked the same on both sides.
    failed = {_failing_resource(ours.get("message")), _failing_resource(theirs.get("message"))}
    same = failed.pop() if len(failed) == 1 else None
    for resource in set(a) | set(b):
        x, y = a.get(resource, []), b.get(resource, [])
        short, long = (x, y) if len(x) <= len(y) else (y, x)
        extra = 0 if same is not None and resource.rsplit("/", 1)[-1] == same else 2
        if long[:len(short)] != short or len(long) - len(short) > extra:
            return ours, theirs
    return ({k: v for k, v in ours.items() if k != "pluginCalls"},
            {k: v for k, v in theirs.items() if k != "pluginCalls"})


def _map_order_step(ours: Any, theirs: Any) -> bool:
    a, b = _calls_by_map_order(ours, theirs)
    return bool(a == b) or _device_shortage_by_map_order(a, b)


_SHORT = re.compile(r"^Allocate failed due to requested number of devices unavailable for (\S+)\. "
                    r"Requested: \d+, Available: \d+, which is unexpected$")
# A plugin's refusal as the harness's stubs answer it (allocate_answer): its devices are named after
# the resource's last segment (gpu3 is example.com/gpu's).
_REFUSED = re.compile(r"^Allocate failed due to rpc error: code = Unknown desc = device ([a-z]+)\d[^ ]* "
                      r"failed to reset, which is unexpected$")


_UNHEALTHY = re.compile(r"^Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
                        r"(\S+), which is unexpected$")


def _failing_resource(message: Any) -> str | None:
    """The resource a container's device allocation failed on: short of devices, none healthy, or its
    plugin refused."""
    for known in (_SHORT, _UNHEALTHY):
        match = known.match(str(message))
        if match is not None:
            return match.group(1).rsplit("/", 1)[-1]
    refused = _REFUSED.match(str(message))
    return refused.group(1) if refused is not None else None


def _device_shortage_by_map_order(ours: Any, theirs: Any) -> bool:
    """Both reject a container whose allocation fails for two of its device resources (too few devices,
    none healthy, or the plugin refusing), each naming another one, and agree on everything else. The device manager
    walks the container's limits, a Go map: which failure it meets first is random upstream; numalign
    names the first in sorted order (docs/fidelity.md, Go map order)."""
    if not (isinstance(ours, dict) and isinstance(theirs, dict)):
        return False
    if ours.get("reason") != "UnexpectedAdmissionError" or theirs.get("reason") != "UnexpectedAdmissionError":
        return False
    a, b = _failing_resource(ours.get("message")), _failing_resource(theirs.get("message"))
    rest = ({k: v for k, v in x.items() if k != "message"} for x in (ours, theirs))
    return a is not None and b is not None and a != b and next(rest) == next(rest)


def size(case: dict[str, Any]) -> int:
    cores: int = case["machine"]["num_cores"]
    return cores * 10 + len(case["steps"]) * 50 + len(case["devices"]) * 5 + len(str(case["steps"])) // 50


def prefer_natural(available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
    """The plugins' GetPreferredAllocation, as the harness's stubs answer it (area_admit.go's
    preferNatural): the devices that must be included, then the others in natural id order."""
    rest = sorted((d for d in available if d not in set(must_include)), key=device_sort_key)
    return [*must_include, *rest][:size]


def allocate_answer(failing: frozenset[str],
                    empty: frozenset[str] = frozenset()) -> Callable[[Sequence[str]], ContainerAllocateResponse]:
    """The plugins' Allocate, as the harness's stubs answer it (area_admit.go's allocateEach): one
    environment variable, or a refusal naming the failing devices asked for, in natural order. numalign
    is told a plugin failed as its gRPC client tells it (adapters/grpc/plugin_client.py): a PluginError
    with the text of Go's status error, code Unknown for an error the plugin returned."""

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        bad = sorted((i for i in ids if i in failing), key=device_sort_key)
        if bad:
            raise PluginError(f"rpc error: code = Unknown desc = device {','.join(bad)} failed to reset")
        if empty.intersection(ids):  # an AllocateResponse without container responses, as the client says
            raise EmptyAllocateError("the plugin answered Allocate with no container response")
        return ContainerAllocateResponse(envs={"CONFORMANCE": "1"})

    return allocate


def _node(case: dict[str, Any], version: str) -> Node:
    machine = machine_from_cadvisor(case["machine"], "case machine")
    devices = tuple(Device(d["id"], d["resource"], None if d["numa"] is None else tuple(d["numa"]),
                           health="Unhealthy" if d.get("unhealthy") else "Healthy")
                    for d in case["devices"])
    machine = dataclasses.replace(machine, devices=devices)
    config = config_from_dict({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                               **case["config"]}, "case config")
    # The device plugins register as the harness's stubs do: each offers GetPreferredAllocation.
    node = Node(machine, config, kubelet_version=kubelet_version(version), static_devices=False)
    failing = frozenset(d["id"] for d in case["devices"] if d.get("failAllocate"))
    empty = frozenset(d["id"] for d in case["devices"] if d.get("emptyAllocate"))
    for resource, devs in machine.devices_by_resource().items():
        node.devices.add_static_plugin(resource, [PluginDevice(d.id, d.health, d.numa_nodes) for d in devs],
                                       preferred_fn=prefer_natural, allocate_fn=allocate_answer(failing, empty))
    return node


def numalign(case: dict[str, Any], version: str) -> dict[str, Any]:
    try:
        node = _node(case, version)
    except (ConfigError, NumalignError) as e:
        if "(k/k #140730" in str(e):
            return {"hang": True}
        return {"start_error": str(e)}
    merge_budget.install(node.tm, case["config"]["topologyManagerPolicy"], case["steps"])
    seen: dict[str, int] = {}  # each plugin's calls answered in earlier steps
    plugins = _static_plugins(node)  # the steps register none
    steps: list[dict[str, Any]] = []
    for s in case["steps"]:
        if s["op"] == "delete":
            if s["uid"] in node.pods:  # a rejected pod is terminal already: its deletion changes nothing
                node.remove(s["uid"])
            steps.append({"deleted": s["uid"], **({"held": held(node)} if case.get("held") else {})})
            continue
        pod = pod_from_dict(s["pod"], "case pod")
        try:
            rec = node.admit(pod, allocations=False)  # the answer reads node.allocation() below
        except merge_budget.OverBudgetError as e:  # upstream's merge is not run: the case ends here on both sides
            # What the aborted admission allocated before this merge (earlier containers' CPUs) the harness's
            # final stale-state pass frees upstream (area_admit.go's finalPass); numalign frees it as it
            # frees a rejected pod's, so the CPU manager's gauges compare.
            node.cm.release_pod(pod)
            steps.append({"merge_over_budget": e.permutations})
            return {"steps": steps, "metrics": metrics_answer(node)}
        except AllocationError as e:
            if e.reason == KUBELET_HANGS:
                return _hangs(str(e), version)
            raise
        if rec.result.reason == KUBELET_HANGS:
            return _hangs(rec.result.message, version)
        out: dict[str, Any] = {"admit": rec.result.admit, "reason": rec.result.reason, "message": rec.result.message}
        calls = _plugin_calls(plugins, seen)
        if calls:
            out["pluginCalls"] = calls
        if rec.result.admit:
            out["containers"] = containers_answer(node, pod)
        if case.get("held"):
            out["held"] = held(node)
        steps.append(out)
    return {"steps": steps, "metrics": metrics_answer(node)}


def containers_answer(node: Node, pod: Pod) -> dict[str, Any]:
    """What each container of an admitted pod holds (area_admit.go's containerAnswer): its affinity, its
    exclusive CPUs (None in the shared pool), its memory blocks and its devices, as `node.allocation` tells
    them. Read from the managers' own queries, as the harness reads the Go managers' (GetCPUs, GetMemory,
    GetDevices, its ids alone): this runs per admission inside numalign's timed side, and `node.allocation`
    also builds what the answer does not compare (the shared pool's ids and text, each device's NUMA nodes);
    tests/unit/test_conformance_admit_answer.py holds the two equal."""
    ctrs: dict[str, Any] = {}
    uid = pod.uid
    # Each query's bound method looked up once a pod, and no comprehension (each is a function object and a
    # frame of its own in the interpreter): a container mostly holds one memory block or none, no device.
    get_affinity, get_cpu_set = node.tm.get_affinity, node.cpu.get_cpu_set
    get_memory, get_devices = node.memory.get_memory, node.devices.get_container_device_ids
    for c in pod.init_containers + pod.containers:
        name = c.name
        hint = get_affinity(uid, name)
        own = get_cpu_set(uid, name)
        mem: list[dict[str, Any]] = []
        blocks = get_memory(uid, name)
        if blocks:
            for b in blocks:
                mem.append({"numa": sorted(b.numa_affinity), "type": b.type, "size": b.size})
            if len(mem) > 1:
                mem.sort(key=_block_type)
        ids: dict[str, list[str]] = {}
        devs = get_devices(uid, name)
        if devs:
            for res in sorted(devs):
                ids[res] = sorted(devs[res])
        ctrs[name] = {
            "affinity": {"mask": hint.nodes(), "preferred": hint.preferred},
            "cpus": sorted(own) if own is not None else None,
            "memory": mem,
            "devices": ids,
        }
    return ctrs


def _block_type(block: dict[str, Any]) -> str:
    return str(block["type"])


# The kubelet metrics the managers count at admission and kubelet.go's admission rejections, compared
# (admit_metrics.go's comparedMetrics), and the CPU manager's gauges.
COMPARED_METRICS = frozenset({
    m.TM_ADMISSION_REQUESTS, m.TM_ADMISSION_ERRORS, m.TM_ADMISSION_DURATION, m.ALIGNED_COUNT, m.ALIGNED_FAILURE,
    m.CPU_PINNING_REQUESTS, m.CPU_PINNING_ERRORS, m.MEM_PINNING_REQUESTS, m.MEM_PINNING_ERRORS,
    m.DP_REGISTRATION, m.DP_ALLOC_DURATION, m.ADMISSION_REJECTIONS, m.CPU_SHARED_POOL, m.CPU_EXCLUSIVE,
    m.CPU_PER_NUMA, m.RM_ALLOCATIONS, m.RM_ALLOCATION_ERRORS, m.RM_ASSIGNMENTS, *m.RM_136_NAMES.values(),
    m.POD_LEVEL_ADMISSIONS,
})
# A per-NUMA gauge series whose node holds no exclusive CPU now: it exists, its value (the count it last
# had, which upstream's Go map order decides) is not compared (admit_metrics.go's keptAtZero).
KEPT_AT_ZERO = -1.0


def metrics_answer(node: Node) -> dict[str, dict[str, float]]:
    """The node's metrics as the harness answers them (admit_metrics.go): per family, each series by its
    labels ("name=value" joined by ",", sorted), a histogram by its sample count; families without a
    series left out."""
    node.cm.sync_metrics()
    held: dict[int, int] = {}  # the exclusive CPUs each NUMA node holds now, each CPU once
    for cpu in frozenset[int]().union(*(node.cpu.get_exclusive_cpus(uid, c.name)
                                        for uid, pod in node.pods.items() for c in pod.all_containers())):
        info = node.cpu.topology.info(cpu)
        numa = info.numa_node if info is not None else -1
        held[numa] = held.get(numa, 0) + 1
    out: dict[str, dict[str, float]] = {}
    for fam in node.metrics.families():
        if fam.name not in COMPARED_METRICS:
            continue
        got = {",".join(sorted(f"{k}={v}" for k, v in key)): counts[-1] for key, counts in fam.hist.items()} \
            if fam.kind == "histogram" else {",".join(sorted(f"{k}={v}" for k, v in key)): v
                                             for key, v in fam.values.items()}
        if fam.name == m.CPU_PER_NUMA:
            got = {k: v if held.get(int(k.removeprefix("numa_node=")), 0) else KEPT_AT_ZERO for k, v in got.items()}
        if got:
            out[fam.name] = got
    return out


def _static_plugins(node: Node) -> list[tuple[str, StaticEndpoint]]:
    """The node's in-process device plugins by resource name, in order (the harness's stubs)."""
    return [(resource, info.endpoint) for resource, info in sorted(node.devices.endpoints.items())
            if isinstance(info.endpoint, StaticEndpoint)]


def _plugin_calls(plugins: list[tuple[str, StaticEndpoint]], seen: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    """What each device plugin was asked since the last step (area_admit.go's pluginCalls), ids sorted."""
    out: dict[str, list[dict[str, Any]]] = {}
    for resource, ep in plugins:
        done = seen.get(resource, 0)
        if len(ep.calls) == done:
            continue  # most admissions call no plugin: nothing to copy (this runs per step, timed)
        new, seen[resource] = ep.calls[done:], len(ep.calls)
        made: list[dict[str, Any]] = []
        for call, args in new:
            if call == "Allocate":
                made.append({"call": call, "devices": sorted(cast("Sequence[str]", args[0]))})
            elif call == "GetPreferredAllocation":
                available, must, size = args
                made.append({"call": call, "available": sorted(cast("Sequence[str]", available)),
                             "mustInclude": sorted(cast("Sequence[str]", must)), "size": size})
        if made:
            out[resource] = made
    return out


def held(node: Node) -> dict[str, Any]:
    """What the managers hold, as their state and checkpoint files say (area_admit.go's heldAnswer)."""
    cpu = node.cpu.snapshot()
    _, default, cpu_entries = cpu.to_strings()
    mem = node.memory.snapshot()
    machine = {
        str(n): {"assignments": st.number_of_assignments, "cells": sorted(st.cells),
                 "memory": {r: [t.total, t.system_reserved, t.allocatable, t.reserved, t.free]
                            for r, t in st.memory_map.items()}}
        for n, st in mem.machine_state.items()
    }
    mem_entries = {uid: {name: _blocks(blocks) for name, blocks in ctrs.items()} for uid, ctrs in mem.entries.items()}
    dev = node.devices.snapshot()
    entries = sorted(({"pod": e.pod_uid, "container": e.container_name, "resource": e.resource_name,
                       "ids": {str(n): sorted(ids) for n, ids in e.device_ids.items()},
                       "allocResp": base64.b64encode(e.alloc_resp).decode()}
                      for e in dev.pod_device_entries),
                     key=lambda e: f"{e['pod']}\0{e['container']}\0{e['resource']}")
    registered = {r: sorted(ids) for r, ids in dev.registered_devices.items()}
    return {"cpus": {"default": default, "entries": cpu_entries},
            "memory": {"machine": machine, "entries": mem_entries},
            "devices": {"entries": entries, "registered": registered}}


def _blocks(blocks: Sequence[Any]) -> list[dict[str, Any]]:
    return sorted(({"numa": sorted(b.numa_affinity), "type": b.type, "size": b.size} for b in blocks),
                  key=lambda b: str(b["type"]))
