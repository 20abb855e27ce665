"""Whole-node admission with implicit hints decides exactly as with upstream's exhaustive lists.

Two Nodes on the same machine and kubelet configuration see the same random sequence of admits and
removals. One describes every provider's hints implicitly and merges them with merge_implicit (the
threshold forced to 0 NUMA nodes); the other lists every mask with upstream's generators and merges
with make_policy(...).merge (the threshold forced out of reach). Every verdict, merged hint,
rejection reason, CPU set, memory block and device must be the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.core.decision import DecisionRecord
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.machine.examples import example
from numalign.machine.topology import Machine
from numalign.node import Node
from numalign.providers.hint_sources import set_implicit_threshold

Q = Quantity.parse
ALWAYS, NEVER = 0, 1 << 30

CONFIG_YAML = """
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
reservedSystemCPUs: "0"
memoryManagerPolicy: Static
topologyManagerPolicy: {policy}
topologyManagerScope: {scope}
topologyManagerPolicyOptions: {{{options}}}
kubeReserved: {{memory: 1Gi}}
systemReserved: {{memory: 1Gi}}
evictionHard: {{memory.available: 100Mi}}
reservedMemory:
- numaNode: 0
  limits: {{memory: 2148Mi}}
"""

_MACHINES: dict[str, Machine] = {}


def machine(name: str) -> Machine:
    if name not in _MACHINES:
        _MACHINES[name] = example(name)
    return _MACHINES[name]


@contextmanager
def implicit_threshold(nodes: int) -> Iterator[None]:
    old = set_implicit_threshold(nodes)
    try:
        yield
    finally:
        set_implicit_threshold(old)


def container(name: str, cpu: int, mem_gi: int, huge_mi: int, devices: dict[str, int], init: bool) -> Container:
    limits = {"cpu": Q(str(cpu)), "memory": Q(f"{mem_gi}Gi")}
    if huge_mi:
        limits["hugepages-2Mi"] = Q(f"{huge_mi}Mi")
    for res, n in devices.items():
        if n:
            limits[res] = Q(str(n))
    return Container(name, requests=dict(limits), limits=limits, is_init=init)


@st.composite
def pods(draw: st.DrawFn, resources: list[str], uid: int) -> Pod:
    if draw(st.integers(0, 5)) == 0:  # a Burstable pod: no hints, shared CPUs
        app = Container("app", requests={"cpu": Q("100m")}, limits={"cpu": Q("2")})
        return Pod(name=f"b{uid}", uid=f"uid-{uid}", containers=(app,))
    ctrs = []
    for i in range(draw(st.integers(1, 2))):
        devs = {r: draw(st.integers(0, 2)) for r in resources}
        ctrs.append(container(f"c{i}", draw(st.integers(1, 40)), draw(st.integers(1, 120)),
                              draw(st.sampled_from([0, 0, 4, 512])), devs, False))
    inits: tuple[Container, ...] = ()
    if draw(st.booleans()):
        inits = (container("init", draw(st.integers(1, 8)), draw(st.integers(1, 8)), 0, {}, True),)
    return Pod(name=f"g{uid}", uid=f"uid-{uid}", init_containers=inits, containers=tuple(ctrs))


def outcome(node: Node, rec: DecisionRecord) -> dict[str, Any]:
    """What must not depend on the path: verdicts, merged hints, reasons, allocations, free CPUs."""
    return {
        "result": rec.result.to_dict(),
        "merged": [(d.container, d.merged, d.admit, d.allocation_error) for d in rec.decisions],
        "allocations": dict(rec.allocations),
        "free_cpus": sorted(node.cpu.get_default_cpu_set()) if hasattr(node.cpu, "get_default_cpu_set") else None,
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    name=st.sampled_from(["dual-socket", "epyc-nps4"]),
    policy=st.sampled_from(["best-effort", "restricted", "single-numa-node"]),
    scope=st.sampled_from(["container", "pod"]),
    closest=st.booleans(),
    data=st.data(),
)
def test_implicit_admission_equals_exhaustive(
    name: str, policy: str, scope: str, closest: bool, data: st.DataObject
) -> None:
    m = machine(name)
    options = '"prefer-closest-numa-nodes": "true"' if closest and policy != "single-numa-node" else ""
    config = KubeletConfig.from_yaml(CONFIG_YAML.format(policy=policy, scope=scope, options=options))
    with implicit_threshold(ALWAYS):
        fast = Node(m, config)
    with implicit_threshold(NEVER):
        ref = Node(m, config)
    resources = sorted({d.resource for d in m.devices})
    admitted: list[str] = []
    for step in range(data.draw(st.integers(1, 12), label="steps")):
        if admitted and data.draw(st.integers(0, 3), label="remove?") == 0:
            uid = data.draw(st.sampled_from(admitted), label="remove")
            admitted.remove(uid)
            with implicit_threshold(ALWAYS):
                fast.remove(uid)
            with implicit_threshold(NEVER):
                ref.remove(uid)
            continue
        pod = data.draw(pods(resources, step), label="pod")
        with implicit_threshold(ALWAYS):
            got = fast.admit(pod)
        with implicit_threshold(NEVER):
            want = ref.admit(pod)
        assert outcome(fast, got) == outcome(ref, want), pod
        # the reference path lists every hint; the fast one described at least one list implicitly
        # whenever a provider had hints (the decision record stays JSON-able either way)
        assert got.to_dict()["result"] == want.to_dict()["result"]
        if got.result.admit:
            admitted.append(pod.uid)


def test_fast_path_describes_hints_and_the_record_is_json() -> None:
    """On the 8-node machine the fast path really is implicit, and its record serialises."""
    import json

    config = KubeletConfig.from_yaml(CONFIG_YAML.format(policy="restricted", scope="container", options=""))
    with implicit_threshold(ALWAYS):
        node = Node(machine("epyc-nps4"), config)
        rec = node.admit(Pod(name="g", uid="u", containers=(
            container("app", 4, 8, 0, {"nvidia.com/gpu": 1}, False),)))
    assert rec.result.admit
    doc = rec.to_dict()
    hints = doc["decisions"][0]["providers"][0]["hints"]["cpu"]
    assert hints["implicit"] is True and hints["narrowest_count"] == 1
    assert doc["decisions"][0]["considered"]
    json.dumps(doc)
    assert "every mask of nodes" in rec.render()
