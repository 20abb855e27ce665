"""k/k #139778 (v1.37.0): distribute-cpus-across-numa honours align-by-socket when it picks NUMA nodes.

The machine is the conformance harness's smallest reproduction: 2 sockets x 2 NUMA nodes x 1 core x 2
threads, CPU 0 reserved. A 4-CPU container without a stored affinity needs two NUMA nodes. 1.36 picks
the best-balanced pair, NUMA 1 and 2, across the sockets; 1.37 prefers a pair within one socket
(NUMA 2 and 3, socket 1: NUMA 0 has only one CPU free, so socket 0 cannot give two CPUs from each)."""

from __future__ import annotations

import pytest

from numalign.core.hint import TopologyHint
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.cpumanager.manager import new_cpu_manager_policy
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.node import Node
from numalign.kubelet.versions import CHANGES, DISTRIBUTE_ACROSS_NUMA_BY_SOCKET, behaviours
from numalign.machine.shorthand import parse_shorthand

CHANGE = next(c for c in CHANGES if c.name == DISTRIBUTE_ACROSS_NUMA_BY_SOCKET)
LAST_WITHOUT = CHANGE.last_without((1, 36))
FIRST_WITH = KubeletVersion(1, 37, 0)
OPTIONS = {"distribute-cpus-across-numa": "true", "align-by-socket": "true"}
GATES = {"CPUManagerPolicyAlphaOptions": True}


class _NoAffinity:
    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return TopologyHint.of(None, False)


def _topology() -> CPUTopology:
    # [cpu, numa, socket, core]: NUMA n holds CPUs 2n and 2n+1 (one core); sockets hold NUMA 0-1 and 2-3.
    return CPUTopology.from_cpu_infos(
        [CPUInfo(cpu=c, numa_node=c // 2, socket=c // 4, core=c // 2 * 2, uncore=c // 2) for c in range(8)]
    )


def _allocate(version: KubeletVersion | None, options: dict[str, str] = OPTIONS) -> list[int]:
    policy = new_cpu_manager_policy(
        "static", _topology(), reserved_cpu=Quantity.from_int(1), policy_options=options,
        feature_gates=GATES, affinity=_NoAffinity(), topology_manager_policy="best-effort",
        behaviours=behaviours(version),
    ) if version is not None else new_cpu_manager_policy(
        "static", _topology(), reserved_cpu=Quantity.from_int(1), policy_options=options,
        feature_gates=GATES, affinity=_NoAffinity(), topology_manager_policy="best-effort",
    )
    assert isinstance(policy, StaticPolicy)
    policy.start()
    assert policy.reserved_cpus == frozenset({0})
    rl = {"cpu": Quantity.from_int(4), "memory": Quantity.parse("1Gi")}
    ctr = Container("c", requests=rl, limits=rl)
    policy.allocate(Pod("p", uid="p", containers=(ctr,)), ctr)
    return sorted(policy.get_cpu_set("p", "c") or ())


def test_the_table_says_where_the_change_lands() -> None:
    assert LAST_WITHOUT is not None and LAST_WITHOUT.minor_key == (1, 36)
    assert not behaviours(LAST_WITHOUT).distribute_across_numa_by_socket
    assert behaviours(FIRST_WITH).distribute_across_numa_by_socket


def test_before_137_balance_alone_picks_the_nodes_across_sockets() -> None:
    assert _allocate(LAST_WITHOUT) == [2, 3, 4, 5]


def test_from_137_a_pair_within_one_socket_wins() -> None:
    assert _allocate(FIRST_WITH) == [4, 5, 6, 7]


def test_a_policy_built_without_a_version_decides_as_the_default() -> None:
    assert _allocate(None) == [4, 5, 6, 7]


@pytest.mark.parametrize("version", [LAST_WITHOUT, FIRST_WITH])
def test_without_align_by_socket_the_versions_agree(version: KubeletVersion | None) -> None:
    assert _allocate(version, {"distribute-cpus-across-numa": "true"}) == [2, 3, 4, 5]


def test_the_node_decides_at_its_kubelet_version() -> None:
    """The same through the kubelet's configuration and admission (containermanager passes the version)."""
    machine = parse_shorthand("2s x 2n x 1c x 2t, 4Gi/node")
    config = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="none",
                           reserved_system_cpus="0", cpu_manager_policy_options=dict(OPTIONS),
                           feature_gates=dict(GATES))
    rl = {"cpu": Quantity.parse("4"), "memory": Quantity.parse("1Gi")}
    pod = Pod("p", uid="u", containers=(Container("c", requests=dict(rl), limits=dict(rl)),))
    sockets = []
    for version in (LAST_WITHOUT, FIRST_WITH):
        assert version is not None
        node = Node(machine, config, kubelet_version=version)
        record = node.admit(pod)
        assert record.result.admit
        allocation = node.allocation("u", "c")
        assert allocation.exclusive and len(allocation.cpus) == 4
        sockets.append({machine.cpu(c).socket for c in allocation.cpus})
    assert sockets == [{0, 1}, {1}]
