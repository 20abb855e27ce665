"""Issue 33 (d): prefer-align-cpus-by-uncorecache with an odd count on SMT differs at 1.33 (k/k #131850 is
1.34+). The issue's example: 2 sockets x 2 cores x 2 threads, adjacent thread ids, one uncore cache per
socket, CPUs 0-5 free, 3 CPUs: 0,4,5 in 1.33.3 (and every 1.33 patch) and 0,1,2 from 1.34.0 (1.36.2 too)."""

from __future__ import annotations

import pytest

from numalign.k8s.version import KubeletVersion
from numalign.kubelet.cpumanager.options import StaticPolicyOptions
from numalign.kubelet.cpumanager.take import take_by_topology
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.versions import behaviours

TOPO = CPUTopology.from_cpu_infos([CPUInfo(c, c // 4, c // 4, c - c % 2, c // 4) for c in range(8)])
OPTIONS = StaticPolicyOptions(prefer_align_cpus_by_uncorecache=True)


@pytest.mark.parametrize(("version", "cpus"), [("1.33.0", {0, 4, 5}), ("1.33.3", {0, 4, 5}), ("1.33.13", {0, 4, 5}),
                                               ("1.34.0", {0, 1, 2}), ("1.36.2", {0, 1, 2}), ("1.37.2", {0, 1, 2})])
def test_three_cpus_of_0_to_5(version: str, cpus: set[int]) -> None:
    take = OPTIONS.take_options(behaviours(KubeletVersion.parse(version)))
    assert take_by_topology(TOPO, range(6), 3, take) == cpus
