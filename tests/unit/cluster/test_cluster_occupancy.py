"""NUMA occupancy per pool: exclusive CPUs held per NUMA node over the pool's allocatable CPUs there."""

from __future__ import annotations

import dataclasses

from numalign.cluster.model import Cluster, NodePool, example_config
from numalign.cluster.simulate import RunSpec, run_one
from numalign.cluster.workload import Workload, WorkloadGroup
from numalign.k8s.manifest import pods_from_yaml
from numalign.machine.examples import example

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: t}}
spec:
  containers:
  - name: c
    resources:
      limits: {{cpu: "8", memory: 8Gi}}
"""


def test_occupancy_counts_exclusive_cpus_per_numa_node() -> None:
    pool = NodePool("big", 2, example("dual-socket"), example_config())
    cluster = Cluster("two", (pool,))
    pods = tuple(pods_from_yaml(POD.format(name=f"p{i}"))[0] for i in range(3))
    workload = Workload([WorkloadGroup("g", pods)], source="three 8-CPU pods")
    r = run_one(cluster, workload, RunSpec("exact"), 1)
    assert r.placed == 3
    occ = r.numa_occupancy["big"]
    assert sorted(occ) == [0, 1, 2, 3]
    # 24 exclusive CPUs in all over 2 nodes x 4 NUMA nodes of 32 CPUs (less the reserved ones).
    reserved = example_config().reserved_cpus()
    allocatable = {n.id: 2 * len(n.cpus - reserved) for n in example("dual-socket").numa_nodes}
    held = sum(round(share * allocatable[numa]) for numa, share in occ.items())
    assert held == 24, occ
    assert all(0 <= share <= 1 for share in occ.values())


def test_no_occupancy_without_pinned_cpus() -> None:
    none = dataclasses.replace(example_config(), cpu_manager_policy="none")
    cluster = Cluster("none", (NodePool("p", 1, example("dual-socket"), none),))
    workload = Workload([WorkloadGroup("g", tuple(pods_from_yaml(POD.format(name="p"))))], source="one pod")
    assert run_one(cluster, workload, RunSpec("default"), 1).numa_occupancy == {}
