"""Issue 33 (a): kubelet 1.36+ narrows device hint masks to the device-hosting NUMA nodes (k/k #138244) and
adds no hint spanning every node. The real 1.36.2 code, wired as the kubelet wires it, gives 11 hints on
epyc-nps4 (GPUs on NUMA nodes 1, 3, 5, 7) for `nvidia.com/gpu: 2`: every mask of two or more of those four."""

from __future__ import annotations

from itertools import combinations

from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.node import Node
from numalign.machine.examples import epyc_nps4


def gpu_hints(version: KubeletVersion) -> list[TopologyHint]:
    config = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="restricted",
                           kube_reserved={"cpu": Quantity.parse("1")})
    node = Node(epyc_nps4(), config, kubelet_version=version)
    limits = {"cpu": Quantity.parse("24"), "memory": Quantity.parse("8Gi"), "nvidia.com/gpu": Quantity.parse("2")}
    pod = Pod("gpu2", uid="u1", containers=(Container("c", requests=dict(limits), limits=dict(limits)),))
    (decision,) = node.admit(pod).decisions
    (devices,) = [p for p in decision.providers if p.provider == "devices"]
    assert devices.hints is not None
    hints = devices.hints["nvidia.com/gpu"]
    if isinstance(hints, ImplicitHints):  # large machines describe the list implicitly
        assert hints.materialize is not None
        return list(hints.materialize())
    assert isinstance(hints, list)
    return hints


def test_136_gives_the_11_masks_over_the_gpu_nodes_and_nothing_else() -> None:
    hints = gpu_hints(KubeletVersion(1, 36, 2))
    want = [frozenset(c) for k in (2, 3, 4) for c in combinations((1, 3, 5, 7), k)]
    assert len(hints) == 11
    assert sorted(hints, key=lambda h: h.mask or 0) == sorted(
        (TopologyHint.of(sorted(m), len(m) == 2) for m in want), key=lambda h: h.mask or 0)


def test_135_still_enumerates_every_node() -> None:
    """Before 1.36 every mask over the 8 nodes holding two GPUs: 2^8 minus those with fewer than two."""
    hints = gpu_hints(KubeletVersion(1, 35, 2))
    assert len(hints) == 2**8 - 2**4 - 4 * 2**4
