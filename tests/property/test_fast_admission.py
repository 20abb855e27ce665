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

from numalign.core.decision import DecisionRecord
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.machine.topology import CPU, Device, Machine, NUMANode

Q = Quantity.parse
ALWAYS, NEVER = 0, 1 << 30

_MACHINES: dict[str, Machine] = {}


def machine(name: str) -> Machine:
    if name not in _MACHINES:
        _MACHINES[name] = example(name)
    return _MACHINES[name]


GiB = 1 << 30


@st.composite
def small_machines(draw: st.DrawFn) -> Machine:
    """1-2 sockets of 1-3 NUMA nodes (2-6 cores, SMT 1-2), maybe a CPU-less memory node, random
    memory, symmetric random distances, and GPUs/NICs on random nodes (some without a node)."""
    sockets, per_socket = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    cores, threads = draw(st.integers(2, 6)), draw(st.integers(1, 2))
    cpu_nodes = sockets * per_socket
    n_nodes = cpu_nodes + draw(st.integers(0, 1))
    n_cores = cpu_nodes * cores
    cpus, node_cpus = [], {i: set[int]() for i in range(n_nodes)}
    for g in range(n_cores):
        node = g // cores
        socket = node // per_socket
        for t in range(threads):
            cpus.append(CPU(g + t * n_cores, socket, g - socket * per_socket * cores, node, 0, g // 2))
            node_cpus[node].add(g + t * n_cores)
    far = {(i, j): draw(st.integers(11, 40)) for i in range(n_nodes) for j in range(i + 1, n_nodes)}

    def dist(i: int, j: int) -> int:
        return 10 if i == j else far[min(i, j), max(i, j)]

    nodes = [
        NUMANode(i, frozenset(node_cpus[i]), draw(st.integers(4, 48)) * GiB, {2 << 20: 512},
                 tuple(dist(i, j) for j in range(n_nodes)))
        for i in range(n_nodes)
    ]
    devices = []
    for res in ("nvidia.com/gpu", "intel.com/sriov_netdevice"):
        for k in range(draw(st.integers(0, 4))):
            where = draw(st.one_of(st.none(), st.integers(0, n_nodes - 1)))
            devices.append(Device(f"{res[:3]}{k}", res, None if where is None else (where,)))
    return Machine("random", tuple(nodes), tuple(sorted(cpus, key=lambda c: c.id)), tuple(devices))


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
        ctrs.append(container(f"c{i}", draw(st.integers(1, 24)), draw(st.integers(1, 64)),
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
        pod = data.draw(pods(resources, step), label="pod")
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
        container("app", 4, 8, 0, {"nvidia.com/gpu": 1}, False),)))
    assert rec.result.admit
    doc = rec.to_dict()
    by_name = {p["provider"]: p for p in doc["decisions"][0]["providers"]}
    assert list(by_name) == ["devices", "cpu", "memory"]  # the kubelet's registration order
    hints = by_name["cpu"]["hints"]["cpu"]
    assert hints["implicit"] is True and hints["narrowest_count"] == 1
    assert doc["decisions"][0]["considered"]
    json.dumps(doc)
    assert "any mask of nodes {0-7}" in rec.render()
