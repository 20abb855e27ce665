"""The default scheduler's arithmetic, checked against kube-scheduler's own test tables
(pkg/scheduler/framework/plugins/noderesources/*_test.go, schedule_one_test.go)."""

from __future__ import annotations

import numpy as np
import pytest

from numalign.cluster.examples import gpu_node
from numalign.cluster.model import Cluster, NodePool, example_config
from numalign.cluster.schedulers import DefaultScheduler, ExactScheduler, broken_linear, num_feasible_nodes_to_find
from numalign.cluster.state import ClusterState, PodVector


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (0, 10, 10),  # fewer than 100 nodes: all
        (0, 99, 99),
        (0, 100, 100),  # 49% of 100 = 49, raised to the minimum of 100
        (0, 1000, 420),  # adaptive: 50 - 1000/125 = 42%
        (0, 5000, 500),  # 50 - 40 = 10%
        (0, 6000, 300),  # 50 - 48 = 2%, raised to 5%
        (30, 1000, 300),
        (10, 500, 100),  # 50, raised to 100
        (100, 1000, 1000),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def _state(allocs: list[tuple[int, int]]) -> ClusterState:
    """Nodes with the given (milli-cpu, memory) allocatable and nothing requested."""
    st = ClusterState(Cluster("t", (NodePool("p", len(allocs), gpu_node(), example_config()),)))
    for i, (cpu, mem) in enumerate(allocs):
        st.alloc[i, 0], st.alloc[i, 1] = cpu, mem
        st.alloc_of[i][0], st.alloc_of[i][1] = cpu, mem
    return st


def _pod(st: ClusterState, cpu: int, mem: int) -> PodVector:
    vec = np.zeros(len(st.resources), dtype=np.int64)
    vec[0], vec[1] = cpu, mem
    req = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v}
    return PodVector(("t", cpu, mem), req, (cpu or 100, mem or 200 * 1024 * 1024), vec, not req)


# (pod cpu, pod mem), nodes [(alloc cpu, alloc mem)], node requested (non-zero), expected per strategy.
# The first row is upstream's (least_allocated_test, most_allocated_test); the others are worked by hand.
CASES = [
    # "nothing scheduled, resources requested, differently sized nodes"
    ((3000, 5000), [(4000, 10000), (6000, 10000)], [(0, 0), (0, 0)],
     {"LeastAllocated": [37, 50], "MostAllocated": [62, 50]}),
    # pods already on the nodes (worked by hand from the formulas: (alloc - req) * 100 / alloc, averaged)
    ((3000, 5000), [(10000, 20000), (10000, 50000)], [(3000, 0), (3000, 5000)],
     {"LeastAllocated": [57, 60], "MostAllocated": [42, 40]}),
    # requested more than allocatable: LeastAllocated gives 0, MostAllocated caps at the capacity
    ((6000, 10000), [(4000, 10000)], [(0, 0)], {"LeastAllocated": [0], "MostAllocated": [100]}),
]


@pytest.mark.parametrize(("pod", "nodes", "requested", "expected"), CASES)
def test_fit_scores_match_upstream_tables(
    pod: tuple[int, int], nodes: list[tuple[int, int]], requested: list[tuple[int, int]], expected: dict[str, list[int]]
) -> None:
    st = _state(nodes)
    for i, (cpu, mem) in enumerate(requested):
        st.non_zero[i] = (cpu, mem)
    pv = _pod(st, *pod)
    pv = PodVector(pv.key, pv.requests, pod, pv.vec, pv.zero)  # the pods of these tables request both
    idx = np.arange(len(nodes))
    for strategy, scores in expected.items():
        assert DefaultScheduler(st, 1, strategy).fit_scores(pv, idx).tolist() == scores, strategy


def test_balanced_allocation_matches_upstream_table() -> None:
    # "nothing scheduled, resources requested, differently sized nodes": 87 and 100
    st = _state([(4000, 10000), (6000, 10000)])
    pv = _pod(st, 3000, 5000)
    assert DefaultScheduler(st, 1).balanced_scores(pv, np.arange(2)).tolist() == [87, 100]
    # best-effort pods are skipped (kubernetes#129138)
    assert DefaultScheduler(st, 1).balanced_scores(_pod(st, 0, 0), np.arange(2)).tolist() == [0, 0]


def test_requested_to_capacity_ratio_broken_linear() -> None:
    shape = ((0, 0), (100, 100))
    assert broken_linear(shape, np.array([0, 25, 50, 100, 120])).tolist() == [0, 25, 50, 100, 100]
    shape2 = ((10, 100), (50, 0))
    assert broken_linear(shape2, np.array([0, 10, 30, 50, 90])).tolist() == [100, 100, 50, 0, 0]


def test_cut_off_and_rotating_start_index() -> None:
    st = _state([(64000, 1 << 40)] * 200)
    sched = DefaultScheduler(st, 7)
    pv = _pod(st, 1000, 1 << 30)
    mask = np.ones(200, dtype=np.bool_)
    idx, processed = sched.feasible(pv_pod := None, pv, mask)  # type: ignore[arg-type]
    del pv_pod
    # 200 nodes: 50 - 1 = 49% = 98, raised to 100; the search stops after 100 feasible nodes.
    assert len(idx) == 100 and processed == 100 and idx[0] == 0
    sel = sched.select(None, pv, mask)  # type: ignore[arg-type]
    assert sel.feasible == 100 and sched.next_start == 100
    assert 0 <= (sel.node or 0) < 100  # every node scores alike: a seeded pick among the first 100
    sched.select(None, pv, mask)  # type: ignore[arg-type]
    assert sched.next_start == 0
    # Infeasible nodes count as processed too. Upstream stops only when a feasible node beyond the
    # wanted number turns up, so with exactly 100 feasible nodes (every other one) all 200 are processed.
    mask[1::2] = False
    idx, processed = sched.feasible(None, pv, mask)  # type: ignore[arg-type]
    assert len(idx) == 100 and processed == 200 and bool(np.all(idx % 2 == 0))
    mask[1] = True  # one more feasible node: the 101st (node 198) stops the search; 0-197 were processed
    idx, processed = sched.feasible(None, pv, mask)  # type: ignore[arg-type]
    assert len(idx) == 100 and processed == 198


@pytest.mark.parametrize("start", [0, 1, 57, 150, 199])
def test_exact_visits_nodes_round_the_list_from_the_start_index(start: int) -> None:
    """exact's filter over cached kubelet answers: the first k nodes passing every filter in visiting
    order (from next_start round the list), the nodes processed up to the (k+1)th, and the kubelet's
    refusals among those, as a node-by-node walk finds them."""
    st = _state([(64000, 1 << 40)] * 200)
    sched = ExactScheduler(st, 7)
    pv = _pod(st, 1000, 1 << 30)
    rng = np.random.default_rng(start)
    mask = rng.random(200) < 0.9
    valid, ok, _numa = st.answers(pv)
    valid[:] = True
    ok[:] = rng.random(200) < 0.6
    sched.next_start = start
    idx, processed = sched.feasible(None, pv, mask)  # type: ignore[arg-type]
    k = num_feasible_nodes_to_find(0, 200)
    walk = [(start + j) % 200 for j in range(200)]
    passing = [j for j, i in enumerate(walk) if mask[i] and ok[i]]
    expected_processed = passing[k] if len(passing) > k else 200
    assert idx.tolist() == [walk[j] for j in passing[:k]] and processed == expected_processed
    refused = sum(1 for j in range(expected_processed) if mask[walk[j]] and not ok[walk[j]])
    assert sched._rejected_by_kubelet == refused


@pytest.mark.parametrize("start", [0, 3, 120, 199])
def test_exact_asks_the_unknown_nodes_it_meets_and_then_walks_as_on_known_answers(start: int) -> None:
    """exact's filter with answers missing: it asks the kubelet of each unknown node among the first k + 1
    candidates (and further, past refusals), and the result is the node-by-node walk over every answer
    known; nodes beyond the search stay unasked."""
    st = _state([(64000, 1 << 40)] * 200)
    sched = ExactScheduler(st, 7)
    pv = _pod(st, 1000, 1 << 30)
    rng = np.random.default_rng(start)
    mask = rng.random(200) < 0.9
    truth = rng.random(200) < 0.5  # what each node's kubelet answers
    valid, ok, _numa = st.answers(pv)
    valid[:] = rng.random(200) < 0.5  # half the answers are known already
    ok[:] = truth
    ok[~valid] = ~truth[~valid]  # an unknown node's stale entry says the opposite
    unknown = set(np.flatnonzero(~valid).tolist())
    asked: list[int] = []

    def probe(i: int, pod: object, shape: PodVector) -> tuple[bool, int]:
        assert not valid[i] and shape is pv
        asked.append(i)
        valid[i], ok[i] = True, truth[i]
        return bool(truth[i]), 1

    st.probe = probe  # type: ignore[method-assign,assignment]
    sched.next_start = start
    idx, processed = sched.feasible(None, pv, mask)  # type: ignore[arg-type]
    k = num_feasible_nodes_to_find(0, 200)
    walk = [(start + j) % 200 for j in range(200)]
    passing = [j for j, i in enumerate(walk) if mask[i] and truth[i]]
    expected_processed = passing[k] if len(passing) > k else 200
    assert idx.tolist() == [walk[j] for j in passing[:k]] and processed == expected_processed
    refused = sum(1 for j in range(expected_processed) if mask[walk[j]] and not truth[walk[j]])
    assert sched._rejected_by_kubelet == refused
    # Asked: every node passing the other filters whose answer was unknown, up to the (k+1)th admitting
    # node (which stops the search), each once.
    reached = expected_processed + 1 if len(passing) > k else 200
    assert sorted(asked) == sorted(i for i in walk[:reached] if mask[i] and i in unknown)


def test_fit_counts_overhead_hugepages_devices_and_the_pods_limit() -> None:
    from numalign.k8s.manifest import pods_from_yaml

    st = ClusterState(Cluster("t", (NodePool("p", 1, gpu_node(), example_config(), max_pods=3),)))
    alloc = dict(zip(st.resources, st.alloc[0].tolist(), strict=True))
    # The kubelet's node status: 128 CPUs less the 2 reserved ones, memory less the reservations and
    # the hugepage pools, 8 GPUs, every hugepage pool.
    assert alloc["cpu"] == 126_000 and alloc["nvidia.com/gpu"] == 8
    assert alloc["hugepages-1Gi"] == 4 * 16 << 30
    assert alloc["memory"] == 4 * (256 << 30) - 4 * (16 << 30) - 4 * 4096 * (2 << 20) - (2148 << 20)

    def pod(limits: str, overhead: str = "{}") -> PodVector:
        (p,) = pods_from_yaml(f"""
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  overhead: {overhead}
  containers: [{{name: c, resources: {{limits: {limits}}}}}]
""")
        return st.vector(p)

    assert bool(st.fit_mask(pod("{cpu: '126', memory: 1Gi}"))[0])
    assert not bool(st.fit_mask(pod("{cpu: '126', memory: 1Gi}", "{cpu: 250m}"))[0])  # overhead counts
    assert not bool(st.fit_mask(pod("{cpu: '1', memory: 1Gi, nvidia.com/gpu: '9'}"))[0])
    assert not bool(st.fit_mask(pod("{cpu: '1', memory: 1Gi, hugepages-1Gi: 65Gi}"))[0])
    assert not bool(st.fit_mask(pod("{cpu: '1', memory: 1Gi, example.com/fpga: '1'}"))[0])  # no node has it
    st.pod_count[0] = 3
    assert not bool(st.fit_mask(pod("{cpu: '1', memory: 1Gi}"))[0])  # maxPods reached
    reasons = st.insufficient(pod("{cpu: '1', memory: 1Gi, nvidia.com/gpu: '9'}"), np.ones(1, dtype=np.bool_))
    assert reasons == {"Too many pods": 1, "Insufficient nvidia.com/gpu": 1}


def test_cached_filter_and_scores_equal_the_vector_forms_as_nodes_change() -> None:
    """select keeps each shape's filter and scores and recomputes only the nodes changed since (in
    Python numbers for LeastAllocated, in numpy rows otherwise): the same values as computing every
    node afresh, whatever the strategy, after admissions and removals."""
    import dataclasses
    import random

    from numalign.cluster.examples import example_shapes

    for strategy in ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"):
        st = ClusterState(Cluster("t", (NodePool("p", 40, gpu_node(), example_config()),)))
        sched = DefaultScheduler(st, 3, strategy)
        rng = random.Random(strategy)
        pods = [shape.pod for shape in example_shapes()[0]]
        bound: list[tuple[int, str]] = []
        for step in range(150):
            pod = rng.choice(pods)
            pod = dataclasses.replace(pod, name=f"p{step}", uid=f"u{step}")
            pv = st.vector(pod)
            every = np.arange(len(st.nodes))
            assert sched.candidates(pv, np.ones(len(st.nodes), dtype=np.bool_)).tolist() == st.fit_mask(pv).tolist()
            expected = (sched.fit_scores(pv, every) + sched.balanced_scores(pv, every)).tolist()
            assert sched.scores(pod, pv, every).tolist() == expected, (strategy, step)
            # The Python copies the per-node updates read hold what the arrays hold.
            assert (st.requested_of, st.non_zero_of, st.pods_of) == (
                st.requested.tolist(), st.non_zero.tolist(), st.pod_count.tolist())
            assert (st.alloc_of, st.max_pods_of) == (st.alloc.tolist(), st.max_pods.tolist())
            if bound and rng.random() < 0.25:
                node, uid = bound.pop(rng.randrange(len(bound)))
                st.remove(node, uid)
            else:
                sel = sched.select(pod, pv, np.ones(len(st.nodes), dtype=np.bool_))
                if sel.node is not None and st.admit(sel.node, pod, pv).result.admit:
                    bound.append((sel.node, pod.uid))


@pytest.mark.parametrize("size", [0, 1, 7, 300, 2500])
def test_first_feasible_nodes_round_the_list_as_a_walk_finds_them(size: int) -> None:
    # _first reads the flags window by window; the answer is a walk from `start` round the list, taking the
    # first `count` set flags, whatever the windows (dense, sparse, wrapping, fewer set than wanted).
    from numalign.cluster.schedulers import _first

    rng = np.random.default_rng(size)
    for density in (0.0, 0.01, 0.3, 1.0):
        flags = rng.random(size) < density
        for start in sorted({0, size // 2, max(size - 1, 0)}):
            for count in (1, 5, 257, 3000):
                walk = [(start + j) % size for j in range(size) if flags[(start + j) % size]][:count]
                got = _first(flags, start, count)
                assert got.dtype == np.intp
                assert got.tolist() == walk
