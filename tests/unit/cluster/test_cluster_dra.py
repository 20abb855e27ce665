"""DRA in the simulated cluster: the DynamicResources filter over each node's slices, Reserve and
release, shared claims tied to their node, the figures, and capacity counting claims."""

from __future__ import annotations

from pathlib import Path

import yaml

from numalign.cluster.capacity import capacity
from numalign.cluster.model import load_cluster
from numalign.cluster.result import RunResult
from numalign.cluster.simulate import RunSpec, run_one
from numalign.cluster.workload import Event, load_workload

DATA = Path(__file__).resolve().parents[2] / "data" / "dra"
CLUSTER = DATA / "cluster" / "cluster.yaml"
WORKLOAD = DATA / "cluster" / "workload.yaml"


def test_two_gpus_per_numa_node_on_three_gpu_nodes_place_twelve_pairs() -> None:
    cluster, workload = load_cluster(CLUSTER), load_workload([WORKLOAD])
    for scheduler in ("default", "exact"):
        r = run_one(cluster, workload, RunSpec(scheduler), 1)
        assert r.dra is not None
        # 3 gpu nodes x 4 NUMA nodes x one pair of GPUs each (matchAttribute numaNode); the cpu pool has none.
        assert (r.dra.pods, r.dra.placed, r.placed) == (16, 12, 12)
        assert r.dra.unschedulable == {"cannot allocate all claims": 4}
        assert r.unschedulable_reasons == {"cannot allocate all claims": 4}
        assert r.dra.aligned + r.dra.not_aligned + r.dra.nothing_pinned + r.dra.unknown == 12
        # The kubelet pins each trainer's 4 CPUs without regard to its GPUs: some land apart.
        assert 0 < r.dra.aligned < 12 and r.dra.not_aligned > 0
        assert RunResult.from_dict(r.to_dict()) == r
        # Nodes of a pool in the same state share the allocator's answer.
        assert r.dra.allocations < 16 * 5


def test_deleting_the_workload_frees_the_devices_for_the_next_one() -> None:
    cluster, workload = load_cluster(CLUSTER), load_workload([WORKLOAD])
    second = yaml.safe_load_all(WORKLOAD.read_text())
    docs = list(second)
    docs[-1]["metadata"]["name"] = "trainer-b"
    other = WORKLOAD.parent / "workload-b.yaml"
    other.write_text(yaml.safe_dump_all(docs))
    try:
        both = load_workload([WORKLOAD, other])
    finally:
        other.unlink()
    both.events = [Event(0, "create", "trainer"), Event(1, "delete", "trainer"), Event(2, "create", "trainer-b")]
    r = run_one(cluster, both, RunSpec("default"), 1)
    assert r.dra is not None and r.deleted == 12 + 4
    assert r.placed == 12  # trainer-b took the GPUs trainer released
    assert workload.pod_count() == 16


def test_a_shared_claim_ties_its_pods_to_one_node() -> None:
    cluster = load_cluster(CLUSTER)
    docs = list(yaml.safe_load_all(WORKLOAD.read_text()))
    cls, template, deployment = docs
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared"},
             "spec": template["spec"]["spec"]}
    deployment["spec"]["replicas"] = 3
    deployment["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "shared"}]
    f = WORKLOAD.parent / "shared.yaml"
    f.write_text(yaml.safe_dump_all([cls, claim, deployment]))
    try:
        workload = load_workload([f])
    finally:
        f.unlink()
    r = run_one(cluster, workload, RunSpec("default"), 1)
    assert r.dra is not None and r.placed == 3
    # One allocation per pool for the first pod; then the claim is allocated and ties the others to its
    # node: one more run of the allocator (with the claim kept) on that node only.
    assert r.dra.allocations == 3
    assert (r.dra.aligned, r.dra.not_aligned) == (3, 0)  # gpu-0, gpu-1 on NUMA 0, where the kubelet starts too


def test_capacity_counts_copies_whose_claims_still_fit() -> None:
    cluster = load_cluster(CLUSTER)
    docs = list(yaml.safe_load_all((DATA / "claim-and-pod.yaml").read_text()))
    f = WORKLOAD.parent / "pod.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    try:
        workload = load_workload([f])
    finally:
        f.unlink()
    pools = {p.pool: p for p in capacity(cluster, workload.groups[0].pods[0], dra_objects=workload.dra)}
    assert pools["gpu"].exact == 12 and pools["gpu"].limited_by == {"cannot allocate all claims": 3}
    assert pools["cpu"].exact == 0 and pools["cpu"].limited_by == {"cannot allocate all claims": 2}
    assert pools["gpu"].by_requests > pools["gpu"].exact


def test_the_preview_dra_topology_hints_puts_every_trainers_cpus_with_its_gpus() -> None:
    cluster, workload = load_cluster(CLUSTER), load_workload([WORKLOAD])
    plain = run_one(cluster, workload, RunSpec("default"), 1)
    preview = run_one(cluster, workload, RunSpec("default", previews="dra-topology-hints=true"), 1)
    assert plain.dra is not None and preview.dra is not None
    assert plain.dra.aligned_share < 1.0
    assert (preview.dra.placed, preview.dra.aligned, preview.dra.aligned_share) == (12, 12, 1.0)
    assert preview.config.previews == {"dra-topology-hints": "true"}  # labelled as a preview
