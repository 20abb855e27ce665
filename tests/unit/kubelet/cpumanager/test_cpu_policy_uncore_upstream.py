"""Upstream TestStaticPolicyAddWithUncoreAlignment cases (prefer-align-cpus-by-uncorecache)."""

from __future__ import annotations

import pytest

from numalign.core.hint import TopologyHint
from numalign.k8s.cpuset import parse_cpuset
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology

P = parse_cpuset


def build(rows: dict[int, tuple[int, int, int, int]]) -> CPUTopology:
    return CPUTopology.from_cpu_infos(
        CPUInfo(cpu=c, core=core, socket=s, numa_node=n, uncore=u) for c, (core, s, n, u) in rows.items()
    )


# 128 CPUs, siblings i / i+64, 8 CPUs (4 cores) per uncore cache, one socket and NUMA node.
SMT_SMALL_UNCORE = build({c: (c % 64, 0, 0, (c % 64) // 4) for c in range(128)})
# 32 CPUs, no SMT, 8 CPUs per uncore cache.
NOSMT_SMALL_UNCORE = build({c: (c, 0, 0, c // 8) for c in range(32)})
# 240 CPUs, siblings i / i+120, two sockets of two sub-NUMA nodes, one (monolithic) L3 per socket.
HT_MONOLITHIC = build({c: (c % 120, (c % 120) // 60, (c % 120) // 30, (c % 120) // 60) for c in range(240)})
# 384 CPUs, siblings i / i+192, two sockets (one NUMA node each), 16 CPUs (8 cores) per uncore.
DUAL_SOCKET_SMT_UNCORE = build({c: (c % 192, (c % 192) // 96, (c % 192) // 96, (c % 192) // 8) for c in range(384)})

FULL = {"full-pcpus-only": "true", "prefer-align-cpus-by-uncorecache": "true"}
UNCORE = {"prefer-align-cpus-by-uncorecache": "true"}
STRICT = {"strict-cpu-reservation": "true", "prefer-align-cpus-by-uncorecache": "true"}


class NoHint:
    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return TopologyHint(None, False)


def run(
    topo: CPUTopology, reserved: str, options: dict[str, str], default: frozenset[int], cpus: list[str]
) -> tuple[StaticPolicy, Pod]:
    res = P(reserved)
    p = StaticPolicy(topo, len(res), reserved_cpus=res, affinity=NoHint(), options=options)
    # As upstream's runner: a mock state without validation, reserved CPUs removed from the default set.
    p.state = CPUManagerState("static", default - res, {})
    containers = []
    for i, cpu in enumerate(cpus):
        q = {"cpu": Quantity.parse(cpu), "memory": Quantity.parse("1G")}
        containers.append(Container(f"appContainer-{i}", requests=q, limits=q))
    pod = Pod("p", uid="pod", containers=tuple(containers))
    for c in containers:
        p.allocate(pod, c)
    return p, pod


def uncores(topo: CPUTopology, p: StaticPolicy) -> set[int]:
    out: set[int] = set()
    for cset in p.state.entries.get("pod", {}).values():
        for cpu in cset:
            info = topo.info(cpu)
            assert info is not None
            out.add(info.uncore)
    return out


def all_but(topo: CPUTopology, *uncore_ids: int) -> frozenset[int]:
    return topo.details.cpus() - topo.details.cpus_in_uncore_caches(*uncore_ids)


@pytest.mark.parametrize(
    ("cpus", "default_without", "expect"),
    [
        (["16000m"], (0, 12), {1}),
        (["12000m", "2000m"], (0, 12), {1}),
        (["2000m", "12000m"], (0, 12), {1}),
        (["10000m", "2000m", "2000m", "2000m"], (0, 12), {1}),
        (["12000m", "2000m"], (), {0, 1}),
    ],
)
def test_dual_socket_smt_uncore(cpus: list[str], default_without: tuple[int, ...], expect: set[int]) -> None:
    topo = DUAL_SOCKET_SMT_UNCORE
    p, _ = run(topo, "0,1,96,97,192,193,288,289", FULL, all_but(topo, *default_without), cpus)
    assert uncores(topo, p) == expect


@pytest.mark.parametrize(
    ("default_without", "cpus", "expect"),
    [((), ["8000m"], {1}), ((1,), ["12000m"], {0, 2})],
)
def test_smt_small_uncore(default_without: tuple[int, ...], cpus: list[str], expect: set[int]) -> None:
    topo = SMT_SMALL_UNCORE
    p, _ = run(topo, "0,1,64,65", FULL, all_but(topo, *default_without), cpus)
    assert uncores(topo, p) == expect


def test_no_smt_partial_uncores_best_effort() -> None:
    topo = NOSMT_SMALL_UNCORE
    p, _ = run(topo, "0-3", FULL, topo.details.cpus() - P("8-11,16-19,24-27"), ["8000m"])
    assert uncores(topo, p) == {0, 1}


@pytest.mark.parametrize(
    ("topo", "reserved", "options", "default", "cpu", "expect"),
    [
        (NOSMT_SMALL_UNCORE, "0-3", FULL, "0-31", "5000m", "8-12"),
        (SMT_SMALL_UNCORE, "0,1,64,65", UNCORE, "0-127", "3000m", "2,3,66"),
        (SMT_SMALL_UNCORE, "0,1,64", UNCORE, "0-127", "3000m", "2,65,66"),
        (SMT_SMALL_UNCORE, "0,1,64", UNCORE, "0-127", "4000m", "4,5,68,69"),
        (SMT_SMALL_UNCORE, "0,1,64", UNCORE, "0-127", "11000m", "2,65,66,4-7,68-71"),
        (HT_MONOLITHIC, "0,1,120", UNCORE, "0-127", "5000m", "2,3,121-123"),
        (HT_MONOLITHIC, "0,1,120", UNCORE, "0-127", "4000m", "2,3,122,123"),
        (HT_MONOLITHIC, "0,1,120,121", FULL, "0-239", "6000m", "2-4,122-124"),
        (SMT_SMALL_UNCORE, "0,1,64,65", STRICT, "0-127", "2000m", "2,66"),
        (HT_MONOLITHIC, "0,1,120,121", STRICT, "0-239", "4000m", "2,3,122,123"),
    ],
)
def test_exact_sets(
    topo: CPUTopology, reserved: str, options: dict[str, str], default: str, cpu: str, expect: str
) -> None:
    p, _ = run(topo, reserved, options, P(default), [cpu])
    assert p.get_cpu_set("pod", "appContainer-0") == P(expect)
