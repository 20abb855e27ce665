"""k/k #140730: with distribute-cpus-across-numa and full-pcpus-only, kubelet <= 1.37 never returns from
Allocate when a remainder subset's free CPUs add up to the remainder but not in whole cores; 1.38 checks
whole groups. numalign says the kubelet hangs instead of giving an allocation upstream never makes."""

from __future__ import annotations

import pytest

from numalign.errors import AllocationError
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.cpumanager.distributed import KUBELET_HANGS
from numalign.kubelet.cpumanager.options import StaticPolicyOptions
from numalign.kubelet.cpumanager.take import take_by_topology
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.versions import behaviours

# 4 NUMA nodes x 4 cores x 2 threads, siblings c and c+16; each node has two whole cores and one lone
# thread free (5 CPUs). 14 CPUs: 2 per node, then a remainder of 6 whose 2-node subsets hold {3, 3}: the
# sum passes upstream's check, two cores go, and {1, 1} never holds another core.
TOPO = CPUTopology.from_cpu_infos(
    [CPUInfo(c + 16 * t, c // 4, 0, c, c // 4) for c in range(16) for t in range(2)])
FREE = [cpu for node in range(4) for cpu in (4 * node, 4 * node + 16, 4 * node + 1, 4 * node + 17, 4 * node + 2)]
OPTIONS = StaticPolicyOptions(full_pcpus_only=True, distribute_cpus_across_numa=True)


@pytest.mark.parametrize("version", ["1.33.0", "1.36.3", "1.37.2"])
def test_released_kubelets_hang(version: str) -> None:
    take = OPTIONS.take_options(behaviours(KubeletVersion.parse(version)))
    with pytest.raises(AllocationError) as err:
        take_by_topology(TOPO, FREE, 14, take)
    assert err.value.reason == KUBELET_HANGS
    assert "groups of 2" in str(err.value)


def test_the_138_preview_answers() -> None:
    take = OPTIONS.take_options(behaviours(KubeletVersion.parse("1.38.0-beta.0")))
    got = take_by_topology(TOPO, FREE, 14, take)
    assert len(got) == 14 and got <= set(FREE)
    # whole cores only: every CPU taken has its sibling taken too
    assert all((cpu + 16) % 32 in got for cpu in got)
