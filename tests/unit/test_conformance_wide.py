"""scripts/conformance --wide: the admit and cpu areas' wider generators (machines of 16-64 NUMA nodes,
more options, init containers and pod-level resources), kept apart from the default cases CI runs, and
the named difference mask-walk (upstream walking 2^N NUMA masks on 32 and 64 nodes)."""

from __future__ import annotations

import json
import random
from typing import Any

from conformance.areas import admit, cpu, topology

from conformance import run
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.quantity import Quantity
from numalign.k8s.requests import pod_requests
from numalign.machine.cadvisor import machine_to_cadvisor
from numalign.machine.shorthand import parse_shorthand


def _cases(area: Any, wide: bool, n: int = 150, minor: str = "1.37") -> list[dict[str, Any]]:
    rng = random.Random(f"3/{area.NAME}/{minor}")
    gen = area.generate_wide if wide else area.generate
    return [gen(rng, f"{minor}.2") for _ in range(n)]


def _admit_numas(case: dict[str, Any]) -> int:
    return len(case["machine"]["topology"])


def test_the_default_cases_stay_within_8_numa_nodes_and_the_wide_ones_reach_16_32_and_64() -> None:
    assert max(_admit_numas(c) for c in _cases(admit, wide=False)) <= 8
    assert {_admit_numas(c) for c in _cases(admit, wide=True)} >= {16, 32, 64}
    assert max(len({r[1] for r in c["cpus"]}) for c in _cases(cpu, wide=False)) <= 8
    assert {len({r[1] for r in c["cpus"]}) for c in _cases(cpu, wide=True)} >= {16, 32, 64}
    assert max(len(c["numa_nodes"]) for c in _cases(topology, wide=False)) <= 10
    assert {len(c["numa_nodes"]) for c in _cases(topology, wide=True)} >= {12, 16}


def test_a_wide_machine_beyond_8_nodes_starts_only_where_the_kubelet_can_answer() -> None:
    # beyond 8 nodes the Topology Manager needs max-allowable-numa-nodes under any policy but none; beyond
    # 16 the hint providers would walk 2^32 masks, so those machines run with policy none (or are refused)
    for case in _cases(admit, wide=True, n=300):
        numas, cfg = _admit_numas(case), case["config"]
        allowed = int(cfg.get("topologyManagerPolicyOptions", {}).get("max-allowable-numa-nodes", "8"))
        if numas > 16 and cfg["topologyManagerPolicy"] != "none":
            assert allowed < numas  # a start-up refusal, cheap on both sides
        if numas > 8 and allowed >= numas:
            assert numas <= 16  # 16, or 9-10: up to 8 nodes with memory-only ones after them (1,023 masks)


def test_wide_pod_level_resources_cover_the_containers_that_keep_their_own() -> None:
    # the API server refuses pod-level requests below what the containers need together
    seen = 0
    for case in _cases(admit, wide=True, n=300):
        for step in case["steps"]:
            spec = step.get("pod", {}).get("spec", {})
            pod_level = spec.get("resources")
            if not pod_level:
                continue
            # what the containers need together (component-helpers' PodRequests without the pod's own)
            bare = {**step["pod"], "spec": {k: v for k, v in spec.items() if k != "resources"}}
            need = pod_requests(pod_from_dict(bare, "case pod"))
            if "cpu" in need:
                seen += 1
                for name in ("cpu", "memory"):
                    assert Quantity.parse(pod_level["requests"][name]) >= need[name]
                assert pod_level["requests"] == pod_level["limits"]
    assert seen >= 10


def test_the_wide_profile_is_a_series_of_its_own_and_leaves_the_default_cases_unchanged() -> None:
    # generate(wide=False) is the function CI's cases come from: the same draws as before the profile
    default = _cases(admit, wide=False, n=40)
    again = [admit.generate(rng, "1.37.2") for rng in [random.Random("3/admit/1.37")] for _ in range(40)]
    assert json.dumps(default) == json.dumps(again)
    assert json.dumps(_cases(admit, wide=True, n=40)) != json.dumps(default)


def _many_numa_case(numas: int) -> dict[str, Any]:
    machine = machine_to_cadvisor(parse_shorthand(f"4s x {numas // 4}n x 1c x 2t, 4Gi/node"))
    res = {"cpu": "2", "memory": str(1 << 30)}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p0", "namespace": "default", "uid": "u0"},
           "spec": {"containers": [{"name": "c0", "image": "pause",
                                    "resources": {"requests": dict(res), "limits": res}}]}}
    config = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "systemReserved": {"memory": "256Mi"},
              "evictionHard": {"memory.available": "100Mi"}, "maxPods": 110, "memoryManagerPolicy": "Static",
              "reservedMemory": [{"numaNode": 0, "limits": {"memory": "356Mi"}}],
              "topologyManagerPolicy": "none", "topologyManagerScope": "container"}
    return {"machine": machine, "config": config, "devices": [], "steps": [{"op": "admit", "pod": pod}]}


def test_numalign_answers_where_the_kubelet_walks_every_mask_of_32_nodes() -> None:
    # memory manager Static under Topology Manager policy none: the container's default hint is the best of
    # calculateHints' masks, which upstream walks (2^32 - 1 of them; the 1.37.2 harness answered this shape
    # {"hang": true}); numalign finds the narrowest node that holds the memory without walking them
    case = _many_numa_case(32)
    ours = admit.numalign(case, "1.37.2")
    c0 = ours["steps"][0]["containers"]["c0"]
    assert ours["steps"][0]["admit"] is True
    assert c0["memory"] == [{"numa": [0], "type": "memory", "size": 1 << 30}]
    hanging = run.DELIBERATE["mask-walk"][1]
    assert hanging("admit", "1.37.2", case, ours, {"hang": True})
    assert not hanging("admit", "1.37.2", case, ours, ours)  # only where upstream did not answer
    assert not hanging("admit", "1.37.2", case, {"hang": True}, {"hang": True})
    assert not hanging("admit", "1.37.2", _many_numa_case(16), ours, {"hang": True})  # 16 nodes: upstream answers
    no_walk = {**case, "config": {**case["config"], "memoryManagerPolicy": "None"}}
    assert not hanging("admit", "1.37.2", no_walk, ours, {"hang": True})  # nothing walks masks there
    assert admit.cpu_bound(case) == "5s" and admit.cpu_bound(_many_numa_case(16)) is None


def test_numalign_answers_a_32_node_case_under_a_topology_manager_policy_without_listing_every_mask() -> None:
    # single-numa-node, pod scope, max-allowable-numa-nodes raised, GPUs on node 0: upstream's device
    # manager walks 2^32 masks for the pod's GPU (mask-walk); the merge budget's count of upstream's lists
    # listed them too (the 4.3 billion hints filled the machine's memory), and at 64 nodes the CPU
    # manager's exhaustive generator refused (InvalidInputError). No merge is counted from 25 nodes on.
    case = _many_numa_case(32)
    case["config"] = {**case["config"], "memoryManagerPolicy": "None", "topologyManagerPolicy": "single-numa-node",
                      "topologyManagerScope": "pod", "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "32"}}
    case["config"].pop("reservedMemory")
    case["devices"] = [{"resource": "example.com/gpu", "id": f"gpu{i}", "numa": [0], "unhealthy": False}
                       for i in range(2)]
    pod = case["steps"][0]["pod"]
    for res in pod["spec"]["containers"][0]["resources"].values():
        res.update({"cpu": "1", "example.com/gpu": "1"})  # CPU 0 is reserved: node 0 has one free
    ours = admit.numalign(case, "1.37.2")
    assert ours["steps"][0]["admit"] is True
    c0 = ours["steps"][0]["containers"]["c0"]
    assert c0["affinity"] == {"mask": [0], "preferred": True} and c0["devices"] == {"example.com/gpu": ["gpu0"]}
    assert run.DELIBERATE["mask-walk"][1]("admit", "1.37.2", case, ours, {"hang": True})
    wide = _many_numa_case(64)
    wide["config"] = {**wide["config"], "topologyManagerPolicy": "best-effort",
                      "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "64"}}
    answered = admit.numalign(wide, "1.37.2")
    assert answered["steps"][0]["admit"] is True and answered["steps"][0]["containers"]["c0"]["cpus"] is not None


def test_upstreams_long_distributed_walk_is_named_only_where_it_can_be() -> None:
    # cpu-29 of the wide profile at 1.35 (seed 23), reserved CPUs only: 8 of 32 one-CPU NUMA nodes taken by
    # takeByTopologyNUMADistributed, C(32, 8) combinations. harness-1.35 answered {"hang": true} at its 20 s
    # bound; given 1,200 s it answered after 1,021 s (load 15) with reserved 0-4,29-31, numalign's answer.
    rows = [[i, i, i // 8, i, i] for i in range(32)]
    case = {"cpus": rows, "reserved_cpus": None, "num_reserved": 8, "topology_manager_policy": "single-numa-node",
            "options": {"full-pcpus-only": "true", "distribute-cpus-across-numa": "true"}, "steps": []}
    ours = {"reserved": [0, 1, 2, 3, 4, 29, 30, 31], "steps": [], "default": list(range(32))}
    walk = run.DELIBERATE["distributed-walk"][1]
    assert walk("cpu", "1.35.4", case, ours, {"hang": True})
    assert not walk("cpu", "1.35.4", case, ours, ours)  # only where upstream did not answer
    assert not walk("cpu", "1.35.4", case, {"hang": True}, {"hang": True})  # both hang: equal, not allowed
    sixteen = {**case, "cpus": rows[:16]}
    assert not walk("cpu", "1.35.4", sixteen, ours, {"hang": True})  # 16 nodes: upstream answers in time
    packed = {**case, "options": {"full-pcpus-only": "true"}}
    assert not walk("cpu", "1.35.4", packed, ours, {"hang": True})  # no combination walk without the option
    # the admit area: the same option in the kubelet configuration, on a machine of 32 NUMA nodes
    admit_case = _many_numa_case(32)
    admit_case["config"] = {**admit_case["config"], "memoryManagerPolicy": "None",
                            "cpuManagerPolicyOptions": {"distribute-cpus-across-numa": "true"}}
    assert walk("admit", "1.35.4", admit_case, {"steps": []}, {"hang": True})
    assert not walk("topology", "1.35.4", admit_case, {"steps": []}, {"hang": True})


def test_wide_machines_have_memory_only_nodes_and_devices_on_several_nodes_in_some() -> None:
    memory_only = spread = 0
    for case in _cases(admit, wide=True, n=300):
        machine, topology = case["machine"], case["machine"]["topology"]
        bare = [n for n in topology if not n["cores"]]
        if bare:
            memory_only += 1
            # cadvisor's view stays whole: counts, every node's row of distances, hugepage sizes on each
            cores = [c for n in topology for c in n["cores"]]
            assert machine["num_physical_cores"] == len(cores)
            assert machine["num_cores"] == sum(len(c["thread_ids"]) for c in cores)
            assert machine["memory_capacity"] == sum(n["memory"] for n in topology)
            sizes = {h["page_size"] for h in topology[0]["hugepages"]}
            assert all({h["page_size"] for h in n["hugepages"]} == sizes for n in topology)
            if "distances" in topology[0]:
                assert all(len(n["distances"]) == len(topology) for n in topology)
            reserved = case["config"].get("reservedSystemCPUs")
            held = {t for c in cores for t in c["thread_ids"]}
            assert not reserved or {int(c) for c in reserved.split(",")} <= held
        spread += any(d["numa"] and len(d["numa"]) > 1 for d in case["devices"])
    assert memory_only >= 20 and spread >= 10
    # drawn from each case's own generator: the wide series' machines and pods are the ones seeds gave before
    rng, again = random.Random("5/admit/1.37/wide"), random.Random("5/admit/1.37/wide")
    for _ in range(20):
        case, plain = admit.generate_wide(rng, "1.37.2"), admit.generate(again, "1.37.2", wide=True)
        assert case["steps"] == plain["steps"] and case["config"]["topologyManagerPolicy"] == plain["config"][
            "topologyManagerPolicy"]
