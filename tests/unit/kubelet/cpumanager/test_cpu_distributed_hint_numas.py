"""k/k #139456 (1.38.0-alpha.1, the 1.38.0-beta.0 preview): with distribute-cpus-across-numa, the allocation from
the Topology Manager's affinity keeps its NUMA node count (e.g. an affinity over the two nodes of a GPU pair)
instead of shrinking to the fewest nodes that hold the request, as every released kubelet does (k/k #139430)."""

from __future__ import annotations

import pytest

from numalign.core.bitmask import mask_of
from numalign.errors import ConfigError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.quantity import Quantity
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.cpumanager.options import StaticPolicyOptions
from numalign.kubelet.cpumanager.take import allocate_cpus
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.node import Node
from numalign.kubelet.versions import behaviours
from numalign.machine.shorthand import parse_shorthand

# 4 NUMA nodes of 4 single-thread cores, all free; 4 CPUs with the affinity {0, 1}.
TOPO = CPUTopology.from_cpu_infos([CPUInfo(c, c // 4, c // 8, c, c // 4) for c in range(16)])
OPTIONS = StaticPolicyOptions(distribute_cpus_across_numa=True)


def numa_nodes_used(version: str) -> set[int]:
    take = OPTIONS.take_options(behaviours(KubeletVersion.parse(version)))
    got = allocate_cpus(TOPO, 4, mask_of([0, 1]), range(16), (), take)
    assert len(got) == 4
    return {c // 4 for c in got}


@pytest.mark.parametrize("version", ["1.33.13", "1.36.3", "1.37.2"])
def test_released_kubelets_shrink_to_one_node(version: str) -> None:
    assert numa_nodes_used(version) == {0}


def test_the_138_preview_keeps_both_nodes_of_the_affinity() -> None:
    assert numa_nodes_used("1.38.0-beta.0") == {0, 1}


def test_the_preview_refuses_what_it_does_not_model() -> None:
    config = KubeletConfig(cpu_manager_policy="static", kube_reserved={"cpu": Quantity.parse("1")},
                           cpu_manager_policy_options={"distribute-cpus-across-cores": "true"},
                           feature_gates={"CPUManagerPolicyAlphaOptions": True})
    machine = parse_shorthand("1s x 2n x 4c x 2t, 8Gi/node")
    Node(machine, config, kubelet_version=KubeletVersion.parse("1.37.2"))
    with pytest.raises(ConfigError, match=r"^cpuManagerPolicyOptions: distribute-cpus-across-cores at kubelet "
                                          r"1\.38\.0-beta\.0 \(a preview\): numalign does not model k/k #140766"):
        Node(machine, config, kubelet_version=KubeletVersion.parse("1.38.0-beta.0"))
