"""Whole-node admission with implicit hints decides exactly as with upstream's exhaustive lists.

Two Nodes on the same machine (dual-socket, epyc-nps4, or a small random one) and kubelet
configuration see the same random sequence of admits and removals. One describes every provider's
hints implicitly (implicit_from_nodes=0); the other lists every mask with upstream's generators
(implicit_from_nodes out of reach); both merge through Policy.merge.
Every verdict, merged hint, rejection reason, CPU set, memory block and device must be the same.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.configs import static_node_config
from support.strategies import admission_pods, small_machines, static_container

from numalign.answer.present.admit import record_text
from numalign.core.decision import DecisionRecord
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.machine.topology import Machine

Q = Quantity.parse
ALWAYS, NEVER = 0, 1 << 30

_MACHINES: dict[str, Machine] = {}


def machine(name: str) -> Machine:
    if name not in _MACHINES:
        _MACHINES[name] = example(name)
    return _MACHINES[name]


def outcome(node: Node, rec: DecisionRecord) -> dict[str, Any]:
    """What must not depend on the path: verdicts, merged hints, reasons, allocations, free CPUs."""
    return {
        "result": rec.result.to_dict(),
        "merged": [(d.container, d.merged, d.admit, d.allocation_error) for d in rec.decisions],
        "allocations": dict(rec.allocations),
        "free_cpus": sorted(node.cpu.get_default_cpu_set()) if hasattr(node.cpu, "get_default_cpu_set") else None,
    }


@settings(max_examples=60)
@given(
    name=st.sampled_from(["dual-socket", "epyc-nps4", "random", "random"]),
    policy=st.sampled_from(["best-effort", "restricted", "single-numa-node"]),
    scope=st.sampled_from(["container", "pod"]),
    closest=st.booleans(),
    data=st.data(),
)
def test_implicit_admission_equals_exhaustive(
    name: str, policy: str, scope: str, closest: bool, data: st.DataObject
) -> None:
    m = data.draw(small_machines(), label="machine") if name == "random" else machine(name)
    options = '"prefer-closest-numa-nodes": "true"' if closest and policy != "single-numa-node" else ""
    config = static_node_config(policy, scope, options)
    fast = Node(m, config, implicit_from_nodes=ALWAYS)
    ref = Node(m, config, implicit_from_nodes=NEVER)
    resources = sorted({d.resource for d in m.devices})
    admitted: list[str] = []
    for step in range(data.draw(st.integers(1, 12), label="steps")):
        if admitted and data.draw(st.integers(0, 3), label="remove?") == 0:
            uid = data.draw(st.sampled_from(admitted), label="remove")
            admitted.remove(uid)
            fast.remove(uid)
            ref.remove(uid)
            continue
        pod = data.draw(admission_pods(resources, step), label="pod")
        got = fast.admit(pod)
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

    config = static_node_config("restricted")
    node = Node(machine("epyc-nps4"), config, implicit_from_nodes=ALWAYS)
    rec = node.admit(Pod(name="g", uid="u", containers=(
        static_container("app", 4, 8, 0, {"nvidia.com/gpu": 1}, False),)))
    assert rec.result.admit
    doc = rec.to_dict()
    by_name = {p["provider"]: p for p in doc["decisions"][0]["providers"]}
    assert list(by_name) == ["devices", "cpu", "memory"]  # the kubelet's registration order
    hints = by_name["cpu"]["hints"]["cpu"]
    assert hints["implicit"] is True and hints["narrowest_count"] == 1
    assert doc["decisions"][0]["considered"]
    json.dumps(doc)
    assert "any mask of nodes {0-7}" in record_text(rec)
