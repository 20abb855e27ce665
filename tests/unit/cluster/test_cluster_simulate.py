"""Simulation runs: default's kubelet rejections that exact avoids, retries, churn, determinism, capacity."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from numalign.cluster.capacity import capacity
from numalign.cluster.examples import example_cluster, example_shapes, example_workload, gpu_node
from numalign.cluster.model import Cluster, NodePool, example_config
from numalign.cluster.result import RunResult, SimulationResult
from numalign.cluster.simulate import RunSpec, run_one
from numalign.cluster.state import ClusterState
from numalign.cluster.sweep import Sweep, run_sweep, sweep_from_dict
from numalign.cluster.workload import Event, Workload, WorkloadGroup, load_timeline
from numalign.errors import InvalidInputError
from numalign.k8s.manifest import pods_from_yaml
from numalign.k8s.pod import Pod


def _pod(name: str, limits: str) -> object:
    return pods_from_yaml(f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: t}}
spec:
  containers:
  - name: c
    resources:
      limits: {limits}
""")[0]


def test_builtin_example_default_rejects_exact_never() -> None:
    cluster, workload = example_cluster(), example_workload(1)
    default = run_one(cluster, workload, RunSpec("default"), 1)
    exact = run_one(cluster, workload, RunSpec("exact"), 1)
    nrt = run_one(cluster, workload, RunSpec("nrt"), 1)
    assert default.kubelet_rejections.get("TopologyAffinityError", 0) > 0
    # NodeResourceTopologyMatch avoids them all here: the NRT counts what NFD's topology-updater counts,
    # the memory the memory manager pins for Guaranteed pods with a fractional CPU (the built-in "cache"
    # shape) included, and nothing in this workload needs what the per-NUMA sums leave out (SMT).
    assert nrt.rejections == 0 and nrt.placed >= default.placed
    assert default.rejected_pods > 0 and default.retries > 0
    assert exact.kubelet_rejections == {} and exact.rejected_pods == 0 and exact.retries == 0
    for r in (default, nrt, exact):
        assert r.pods == workload.pod_count() == 320
        assert r.placed + r.unschedulable + r.failed == r.pods
        # single-numa-node aligns every exclusive allocation; the "cache" pods (fractional CPU) run on the
        # shared pool, which spans NUMA nodes, so they are the Guaranteed pods not on one NUMA node.
        share = r.alignment.share
        assert share is not None and 0.5 < share < 1.0
        assert sum(r.alignment.numa_nodes.values()) == r.alignment.guaranteed
        used = r.resources["cpu"].utilisation
        assert used is not None and 0 < used <= 1
    # Same seed, same result; the result model round-trips.
    again = run_one(cluster, workload, RunSpec("default"), 1)
    assert again == default
    assert RunResult.from_dict(default.to_dict()) == default


def test_retries_are_bounded() -> None:
    # Two-GPU pods on nodes with one GPU per NUMA node: the default scheduler sees 4 GPUs per node and
    # the kubelet (single-numa-node) rejects every one.
    node = gpu_node(gpus_per_numa=1)
    cluster = Cluster("c", (NodePool("p", 3, node, example_config()),))
    pods = tuple(dataclasses.replace(_pod("two-gpu", "{cpu: '2', memory: 1Gi, nvidia.com/gpu: '2'}"),  # type: ignore[type-var]
                                     name=f"two-gpu-{i}", uid=f"u{i}") for i in range(2))
    wl = Workload([WorkloadGroup("two-gpu", pods)])  # type: ignore[arg-type]
    r = run_one(cluster, wl, RunSpec("default"), 3, max_retries=2)
    assert r.placed == 0 and r.failed == 2 and r.rejected_pods == 2
    assert r.retries == 4 and r.kubelet_rejections == {"TopologyAffinityError": 6}
    # the reason's words come with it: the message, the node and pod that gave it first, how many gave it
    (example,) = r.rejection_examples.values()
    assert list(r.rejection_examples) == ["TopologyAffinityError"]
    assert (example.message, example.pod, example.rejections, example.other) == (
        "Resources cannot be allocated with Topology locality", "t/two-gpu-0", 6, 0)
    assert example.node in {sn.name for sn in ClusterState(cluster, set()).nodes}
    assert r.to_dict()["kubeletRejectionMessages"] == {"TopologyAffinityError": {
        "message": "Resources cannot be allocated with Topology locality", "node": example.node,
        "pod": "t/two-gpu-0", "rejections": 6, "otherMessages": 0}}
    assert RunResult.from_dict(r.to_dict()) == r
    exact = run_one(cluster, wl, RunSpec("exact"), 3, max_retries=2)
    assert exact.unschedulable == 2 and exact.rejections == 0
    (reason,) = exact.unschedulable_reasons
    assert "would reject" in reason


def test_timeline_deletes_free_room_for_pending_pods(tmp_path: Path) -> None:
    cluster = Cluster("c", (NodePool("p", 1, gpu_node(), example_config()),))
    big = pods_from_yaml("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: big, namespace: t}
spec:
  replicas: 8
  template:
    spec:
      containers:
      - name: c
        resources: {limits: {cpu: '8', memory: 8Gi, nvidia.com/gpu: '1'}}
""", expand_replicas=True)
    late = [dataclasses.replace(p, name=f"late-{i}", uid=f"late-{i}") for i, p in enumerate(big)]
    wl = Workload([WorkloadGroup("big", tuple(big)), WorkloadGroup("late", tuple(late))])
    timeline = tmp_path / "t.csv"
    timeline.write_text("time,op,name\n0,create,big\n1,create,late\n2,delete,big\n", encoding="utf-8")
    wl.events = load_timeline(timeline, wl)
    assert wl.events[1] == Event(1.0, "create", "late")
    r = run_one(cluster, wl, RunSpec("exact"), 1)
    # 8 GPUs: big takes them all, late waits, big is deleted, late gets them.
    assert r.deleted == 8 and r.placed == 8 and r.unschedulable == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"time": 0, "op": "create", "name": "nothing"}\n', encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"bad.jsonl:1: name: 'nothing' names no workload"):
        load_timeline(bad, wl)


def test_a_timeline_key_or_column_written_twice_is_refused(tmp_path: Path) -> None:
    """A timeline line whose op is written twice kept the last value silently (the pods deleted at 0 that
    the user meant to create); refused as every other file users give refuses a key written twice."""
    wl = Workload([WorkloadGroup("web", ())])
    lines = tmp_path / "t.jsonl"
    lines.write_text('{"time": 0, "op": "create", "name": "web"}\n{"time": 1, "op": "create", "name": "web", '
                     '"op": "delete"}\n', encoding="utf-8")
    with pytest.raises(InvalidInputError) as e:
        load_timeline(lines, wl)
    assert str(e.value).startswith(f'{lines}:2: duplicate field "op": a key written twice')
    assert str(e.value).endswith("keep one of the two (merge their values, or rename the one that belongs elsewhere)")
    table = tmp_path / "t.csv"
    table.write_text("time,op,name,op\n0,create,web,delete\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=rf"^{table}: CSV header column 'op' written twice; expected JSON "
                                                r"lines or CSV with time, op, name; keep one of the two$"):
        load_timeline(table, wl)
    lines.write_text('{"time": 0, "op": "create", "name": "web"}\n', encoding="utf-8")
    table.write_text("time,op,name\n0,create,web\n", encoding="utf-8")
    assert load_timeline(lines, wl) == load_timeline(table, wl) == [Event(0.0, "create", "web")]


def test_sweep_runs_identically_in_worker_processes() -> None:
    cluster, workload = example_cluster(), example_workload(2, count=120)
    specs = Sweep(["default", "exact"], {}, {"topologyManagerPolicies": ["restricted", "best-effort"]}).specs()
    assert [(s.scheduler, s.kubelet_flags) for s in specs] == [
        ("default", (("--topology-manager-policy", "restricted"),)),
        ("exact", (("--topology-manager-policy", "restricted"),)),
        ("default", (("--topology-manager-policy", "best-effort"),)),
        ("exact", (("--topology-manager-policy", "best-effort"),)),
    ]
    here = run_sweep(cluster, workload, specs, 2, 3, jobs=1)
    there = run_sweep(cluster, workload, specs, 2, 3, jobs=2)
    assert here == there
    policies = [r.config.topology_manager_policy for r in here]
    assert policies == ["restricted", "restricted", "best-effort", "best-effort"]
    sim = SimulationResult("example", 12, "w", 120, 2, 3, tuple(here))
    assert SimulationResult.from_dict(sim.to_dict()) == sim


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"schedulers": ["fancy"]}, "scheduler 'fancy'; expected one of default, nrt, exact"),
        ({"schedulers": ["default"], "scoring": {"default": "LeastNUMANodes"}}, "not a strategy of the default"),
        ({"scoring": {"nrt2": "MostAllocated"}}, "scheduler 'nrt2' is not in schedulers"),
        ({"topologyManagerPolicies": ["restricted", "restricted"]}, "'restricted' is listed twice"),
        ({"topologyManagerPolicies": ["none"], "topologyManagerPolicyOptions": ["prefer-closest-numa-nodes=true"]},
         "the only policy is none"),
        ({"topologyManagerPolicies": []}, "empty"),
        ({"colour": ["red"]}, "colour: unknown field"),
    ],
)
def test_contradictory_or_unknown_sweeps_are_refused(obj: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        sweep_from_dict({"kind": "Sweep", **obj}, "sweep.yaml")


def test_capacity_per_pool_exact_beside_sum_of_requests() -> None:
    shapes, _ = example_shapes()
    training = next(s for s in shapes if s.name == "training")  # 20 CPUs, 96Gi, 2 GPUs
    pools = {p.pool: p for p in capacity(example_cluster(), training.pod)}
    # dual-socket GPU nodes: 2 GPUs and ~30 CPUs per NUMA node, so 4 per node, as the sum says.
    assert (pools["gpu"].exact, pools["gpu"].by_requests) == (32, 32)
    # EPYC nodes: 4 GPUs, one per NUMA node: the sum of requests says 2 per node, the kubelet none.
    assert (pools["cpu"].exact, pools["cpu"].by_requests) == (0, 8)
    assert pools["cpu"].limited_by == {"TopologyAffinityError": 4}


@pytest.mark.parametrize(("flags", "seed"), [
    ((), 1),
    ((("--topology-manager-scope", "pod"),), 2),
    ((("--topology-manager-policy", "restricted"),
      ("--topology-manager-policy-options", "prefer-closest-numa-nodes=true")), 3),
    ((("--topology-manager-policy", "best-effort"),), 4),
])
def test_exact_keeps_only_answers_a_change_cannot_affect(monkeypatch: pytest.MonkeyPatch,
                                                         flags: tuple[tuple[str, str], ...], seed: int) -> None:
    """Cached kubelet answers survive an admission whose NUMA footprint misses them; asking every
    node again after every change gives the very same run."""
    from numalign.cluster.state import ClusterState

    cluster, workload = example_cluster(), example_workload(seed, count=150)
    changed = ClusterState._changed
    for scheduler in ("exact", "nrt"):
        spec = RunSpec(scheduler, "LeastNUMANodes" if scheduler == "exact" else "LeastAllocated", flags)
        kept = run_one(cluster, workload, spec, seed)
        with monkeypatch.context() as m:
            m.setattr(ClusterState, "_changed", lambda self, i, footprint=-1: changed(self, i, -1))
            asked_again = run_one(cluster, workload, spec, seed)
        assert kept == asked_again


def test_stranded_is_measured_against_every_shape_of_the_workload() -> None:
    """Stranded capacity uses the same yardstick in every run: free capacity on nodes whose kubelet would
    admit no pod shape of the workload, whatever a scheduler left pending. A scheduler that leaves a
    huge pod pending does not make the room its small pods could still use look stranded."""
    cluster = Cluster("c", (NodePool("p", 2, gpu_node(gpus_per_numa=1), example_config()),))
    small = tuple(dataclasses.replace(_pod("small", "{cpu: '4', memory: 4Gi}"), name=f"small-{i}",  # type: ignore[type-var]
                                      uid=f"s{i}") for i in range(2))
    huge = (_pod("huge", "{cpu: '200', memory: 4Gi}"),)
    wl = Workload([WorkloadGroup("small", small), WorkloadGroup("huge", huge)])  # type: ignore[arg-type]
    r = run_one(cluster, wl, RunSpec("default"), 1)
    assert r.unschedulable == 1 and r.placed == 2
    # Both nodes still admit a small pod: nothing is stranded, although the pending pod fits nowhere.
    assert {k: f.stranded for k, f in r.resources.items()} == dict.fromkeys(r.resources, 0)


def test_a_timeline_run_adds_up() -> None:
    from numalign.cluster.examples import example_cluster

    cluster = example_cluster()
    shapes: list[Pod] = [pods_from_yaml(f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: t}}
spec:
  containers:
  - {{name: c, resources: {{limits: {limits}}}}}
""")[0] for name, limits in (("a", "{cpu: '30', memory: 8Gi}"), ("b", "{cpu: '2', memory: 1Gi}"))]
    groups = [WorkloadGroup(f"g{k}", tuple(dataclasses.replace(shapes[k % 2], name=f"g{k}-{i}", uid=f"g{k}-{i}")
                                           for i in range(9)))
              for k in range(4)]
    events = [Event(0, "create", "g0"), Event(1, "create", "g1"), Event(2, "create", "g2"), Event(3, "delete", "g0"),
              Event(4, "create", "g3"), Event(5, "delete", "g2")]
    wl = Workload(groups, events)
    for scheduler in ("default", "nrt", "exact"):
        r = run_one(cluster, wl, RunSpec(scheduler), 1)
        assert r.deleted > 0
        assert r.placed + r.unschedulable + r.failed + r.deleted == r.pods == 36


def test_stranded_probes_leave_the_bound_pods_holding_what_they_hold() -> None:
    """The stranded-capacity probes admit each workload shape and release it again: under the bound pod's
    own uid that release would free the bound pod's CPUs (found by the DRA work; it skewed later figures)."""
    from numalign.cluster.simulate import _resources
    from numalign.cluster.state import ClusterState
    from numalign.cluster.workload import Placement

    cluster = Cluster("c", (NodePool("p", 1, gpu_node(gpus_per_numa=1), example_config()),))
    state = ClusterState(cluster)
    pod = _pod("bound", "{cpu: '4', memory: 4Gi}")
    assert isinstance(pod, Pod)
    assert state.admit(0, pod, state.vector(pod)).result.admit
    node = state.nodes[0].node()
    held = node.allocation(pod.uid, pod.containers[0].name).cpus
    assert held
    _resources(state, [(pod, Placement())])
    assert node.allocation(pod.uid, pod.containers[0].name).cpus == held


def _burstable(name: str, requests: str, limits: str) -> Pod:
    pod = pods_from_yaml(f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: t, uid: {name}-uid}}
spec:
  containers:
  - name: c
    resources: {{requests: {requests}, limits: {limits}}}
""")[0]
    assert isinstance(pod, Pod)
    return pod


def test_exact_keeps_an_answer_no_provider_hinted_for_across_aligned_admissions() -> None:
    """A Burstable pod gets no hint from any provider, so its admission read no NUMA node's state: its
    cached answer on a node stands after a Guaranteed pod is bound there (which asks again every answer
    whose merged hint covers the pinned NUMA node), and equals the kubelet's answer asked afresh. A
    Burstable pod asking for a GPU gets the device manager's hints, and is asked again."""
    from numalign.cluster.state import ClusterState

    cluster = Cluster("c", (NodePool("gpu", 2, gpu_node(), example_config(gpu_node())),))
    state = ClusterState(cluster)
    web = _burstable("web", "{cpu: 500m, memory: 512Mi}", "{cpu: '1', memory: 1Gi}")
    gpu = _burstable("gpu", "{cpu: 500m, memory: 512Mi, nvidia.com/gpu: '1'}",
                     "{cpu: '1', memory: 1Gi, nvidia.com/gpu: '1'}")
    pinned = _pod("db", "{cpu: '12', memory: 48Gi}")
    assert isinstance(pinned, Pod)
    for pod in (web, gpu):
        assert state.probe(0, pod, state.vector(pod))[0]
    assert state.admit(0, pinned, state.vector(pinned)).result.admit
    web_valid = state.answers(state.vector(web))[0]
    gpu_valid = state.answers(state.vector(gpu))[0]
    assert bool(web_valid[0]) and not bool(gpu_valid[0])
    # The kept answer is the kubelet's: a probe of a node with no cached answer (no history shared) agrees.
    fresh = ClusterState(cluster)
    assert fresh.admit(0, pinned, fresh.vector(pinned)).result.admit
    assert fresh.probe(0, web, fresh.vector(web)) == (True, int(state.answers(state.vector(web))[2][0]))


def test_what_a_pod_holds_read_at_admission_is_what_the_managers_hold_at_the_end() -> None:
    """The NUMA alignment report reads each Guaranteed pod's exclusive CPUs, memory and devices as its
    admission left them (ClusterState.held): the same NUMA nodes the managers give at the end of a run,
    after later admissions and removals on the same nodes, and whether it has a container in the shared pool."""
    import random

    import numpy as np

    from numalign.cluster.schedulers import DefaultScheduler
    from numalign.cluster.state import ClusterState
    from numalign.k8s.qos import QOSClass, get_pod_qos

    st = ClusterState(example_cluster())
    sched = DefaultScheduler(st, 5)
    rng = random.Random(5)
    shapes = [s.pod for s in example_shapes()[0]]
    bound: list[tuple[int, Pod]] = []
    for step in range(400):
        if bound and rng.random() < 0.2:
            i, gone = bound.pop(rng.randrange(len(bound)))
            st.remove(i, gone.uid)
            assert gone.uid not in st.held
            continue
        pod = rng.choice(shapes).with_identity(name=f"p{step}", uid=f"u{step}")
        pv = st.vector(pod)
        sel = sched.select(pod, pv, np.ones(len(st.nodes), dtype=np.bool_))
        if sel.node is not None and st.admit(sel.node, pod, pv).result.admit:
            bound.append((sel.node, pod))
    guaranteed = [(i, p) for i, p in bound if get_pod_qos(p) is QOSClass.GUARANTEED]
    assert len(guaranteed) > 20 and any(st.held[p.uid][0] for _i, p in guaranteed)
    for i, pod in guaranteed:
        node = st.nodes[i].node()
        numa_of = {c.id: c.numa_node for c in node.machine.cpus if c.numa_node is not None}
        pinned: set[int] = set()
        shared = False
        for c in pod.all_containers():
            own = node.cpu.get_cpu_set(pod.uid, c.name)
            shared = shared or own is None
            pinned.update(numa_of[cpu] for cpu in own or () if cpu in numa_of)
            for block in node.memory.get_memory(pod.uid, c.name) or ():
                pinned.update(block.numa_affinity)
            for ids in (node.devices.get_container_devices(pod.uid, c.name) or {}).values():
                for dev in ids.values():
                    pinned.update(dev.topology or ())
        assert st.held[pod.uid] == (frozenset(pinned), shared), pod.name
