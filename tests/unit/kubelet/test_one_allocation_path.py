"""Every admission takes one path (issue 32, item 3): steps between the device plugins' Allocate calls,
each made where the kubelet makes it, so a failing call ends the admission there (the `admit` conformance
area pins the verdict, the plugins' calls, the counters and what stays held; these pin the record and
the paused plans the area does not see)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from support.configs import static_node_config

from numalign import metrics as m
from numalign.core.decision import DecisionRecord
from numalign.errors import AllocationError, EmptyAllocateError, PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.devicemanager.endpoint import StaticEndpoint
from numalign.kubelet.node import Node
from numalign.kubelet.plan import Plan
from numalign.machine.examples import example

Q = Quantity.parse
MACHINE = example("dual-socket")
GPU = "nvidia.com/gpu"


def node(scope: str = "container", failing: Sequence[str] = ()) -> tuple[Node, StaticEndpoint]:
    n = Node(MACHINE, static_node_config(policy="best-effort", scope=scope, reserved="0,64"))

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        bad = [i for i in ids if i in failing]
        if bad:
            raise PluginError(f"rpc error: code = Unknown desc = device {','.join(bad)} failed to reset")
        return ContainerAllocateResponse(envs={"GPU": ",".join(ids)})

    devices = [Device(d.id, d.health, d.numa_nodes) for d in MACHINE.devices_by_resource()[GPU]]
    return n, n.devices.add_static_plugin(GPU, devices, allocate_fn=allocate)


def ctr(name: str, gpus: int = 0) -> Container:
    limits = {"cpu": Q("2"), "memory": Q("1Gi")}
    if gpus:
        limits[GPU] = Q(str(gpus))
    return Container(name, requests=dict(limits), limits=limits)


def allocated_ids(ep: StaticEndpoint) -> list[tuple[str, ...]]:
    return [args[0] for call, args in ep.calls if call == "Allocate"]  # type: ignore[misc]


def free_cpus(n: Node) -> int:
    assert isinstance(n.cpu, StaticPolicy)
    return len(n.cpu.get_available_cpus())


def test_the_device_manager_yields_each_call_before_it_looks_at_the_next_resource() -> None:
    n, ep = node()
    n.devices.add_static_plugin("example.com/nic", [Device("nic0", topology=(0,))])
    c = Container("c", limits={GPU: Q("1"), "example.com/nic": Q("1")})
    pod = Pod("p", uid="uid-p", containers=(c,))
    steps = n.devices.allocate_steps(pod, c)
    call = next(steps)
    assert (call.resource, len(call.device_ids)) == ("example.com/nic", 1)
    assert allocated_ids(ep) == []  # the gpu's devices are not looked at before the nic's call is answered
    assert n.devices.snapshot().pod_device_entries == ()  # taken, not in the checkpoint until answered
    call = steps.send(ContainerAllocateResponse(envs={"NIC": "x"}))
    assert call.resource == GPU and n.devices.allocated[GPU] == set(call.device_ids)
    with pytest.raises(StopIteration):
        steps.send(ContainerAllocateResponse(envs={"GPU": "x"}))
    assert [e.resource_name for e in n.devices.snapshot().pod_device_entries] == ["example.com/nic", GPU]


def test_a_failed_call_gives_back_its_devices_and_an_empty_answer_keeps_them() -> None:
    """Upstream rolls allocatedDevices back to podDevices on a failing call, and returns without doing so
    when the plugin answers with no container response (manager.go allocateContainerResources)."""
    for error, kept in ((PluginError("rpc error: code = Unknown desc = no"), False),
                        (EmptyAllocateError("empty"), True)):
        n, _ = node()
        pod = Pod("p", uid="uid-p", containers=(ctr("a", gpus=1),))
        steps = n.devices.allocate_steps(pod, pod.containers[0])
        call = next(steps)
        with pytest.raises(AllocationError) as err:
            steps.throw(error)
        assert n.devices.get_container_devices("uid-p", "a") is None
        assert n.devices.allocated.get(GPU, set()) == (set(call.device_ids) if kept else set())
        if kept:
            # the kubelet's words, its %v of the empty AllocateResponse (protoc-gen-go's text from 1.34)
            assert str(err.value) == "no containers return in allocation response "


def test_admit_makes_the_calls_in_the_kubelets_order_and_records_the_answers() -> None:
    n, ep = node()
    pod = Pod("p", uid="uid-p", containers=(ctr("a", gpus=1), ctr("b", gpus=2)))
    rec = n.admit(pod)
    assert rec.result.admit
    a, b = (n.devices.pod_devices.container_devices("uid-p", c, GPU) or set() for c in ("a", "b"))
    assert [set(ids) for ids in allocated_ids(ep)] == [a, b] and len(b) == 2
    opts = n.devices.pod_devices.run_container_options("uid-p", "b")
    assert opts is not None and dict(opts.envs)["GPU"] == ",".join(allocated_ids(ep)[1])


def test_a_failing_call_ends_the_admission_where_the_kubelet_ends_it() -> None:
    """Container b's call fails: the kubelet stopped there (c was never allocated, no plugin call for it),
    the Topology Manager counted one admission error, the pod holds nothing and its rejection is counted
    once, with the call's reason."""
    n, ep = node()
    gpus = [d.id for d in MACHINE.devices_by_resource()[GPU]]
    free = free_cpus(n)
    healthy_a = Pod("first", uid="uid-0", containers=(ctr("a", gpus=1),))
    assert n.admit(healthy_a).result.admit  # takes the first GPU in the order the manager picks
    n.remove("uid-0")
    first = allocated_ids(ep)[0][0]
    n2, ep2 = node(failing=[g for g in gpus if g != first])
    pod = Pod("p", uid="uid-p", containers=(ctr("a", gpus=1), ctr("b", gpus=1), ctr("c", gpus=1)))
    rec = n2.admit(pod)
    assert not rec.result.admit and rec.result.reason == "UnexpectedAdmissionError"
    assert rec.result.message.startswith("Allocate failed due to rpc error: code = Unknown desc = device ")
    assert [d.container for d in rec.decisions] == ["a", "b"]
    assert rec.decisions[0].allocation_error is None
    assert rec.decisions[1].allocation_error == f"UnexpectedAdmissionError: {rec.result.message}"
    assert len(allocated_ids(ep2)) == 2  # a's and b's; c's call is never made
    assert [call for call, _ in ep2.calls].count("GetPreferredAllocation") == 0  # none offered here
    # b's CPUs were never pinned: the device manager is the first provider, its failure ends b there
    assert n2.metrics.value(m.CPU_PINNING_REQUESTS) == 1
    assert not rec.allocations and "uid-p" not in n2.pods and not n2.reserved
    assert free_cpus(n2) == free and not n2.devices.allocated.get(GPU)
    assert n2.metrics.value(m.TM_ADMISSION_ERRORS) == 1
    assert n2.metrics.value(m.ADMISSION_REJECTIONS, reason="UnexpectedAdmissionError") == 1
    assert sum(n2.metrics.value(m.ADMISSION_REJECTIONS, reason=r)
               for r in ("UnexpectedAdmissionError", "TopologyAffinityError", "OutOfcpu", "Other")) == 1


def test_pod_scope_records_its_one_decision_with_the_failing_container() -> None:
    gpus = [d.id for d in MACHINE.devices_by_resource()[GPU]]
    n, _ = node(scope="pod", failing=gpus)
    pod = Pod("p", uid="uid-p", containers=(ctr("a"), ctr("b", gpus=1)))
    rec = n.admit(pod)
    assert not rec.result.admit and rec.result.reason == "UnexpectedAdmissionError"
    assert len(rec.decisions) == 1
    assert rec.decisions[0].allocation_error == f"container b: UnexpectedAdmissionError: {rec.result.message}"


def test_no_preferred_allocation_is_asked_for_after_the_failing_container() -> None:
    gpus = [d.id for d in MACHINE.devices_by_resource()[GPU]]
    # policy none: no affinity, so the device manager asks the plugin to choose among all four
    n = Node(MACHINE, static_node_config(policy="none", scope="container", reserved="0,64"))

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        raise PluginError("rpc error: code = Unknown desc = device failed to reset")

    devices = [Device(d.id, d.health, d.numa_nodes) for d in MACHINE.devices_by_resource()[GPU]]
    ep = n.devices.add_static_plugin(GPU, devices, allocate_fn=allocate,
                                     preferred_fn=lambda avail, must, size: sorted(avail)[:size])
    pod = Pod("p", uid="uid-p", containers=(ctr("a", gpus=1), ctr("b", gpus=1)))
    rec = n.admit(pod)
    assert rec.result.reason == "UnexpectedAdmissionError"
    assert [call for call, _ in ep.calls] == ["GetPreferredAllocation", "Allocate"]  # a's only
    assert not n.devices.allocated.get(GPU) and len(gpus) > 2


def test_a_plan_pauses_at_each_call_and_goes_on_with_its_answer() -> None:
    n, ep = node()
    pod = Pod("p", uid="uid-p", containers=(ctr("a", gpus=1), ctr("b", gpus=1)))
    plan = n.decide(pod)
    assert not plan.settled and plan.calls[0].container_name == "a" and "uid-p" in n.reserved
    with pytest.raises(ValueError, match="paused at a device plugin call"):
        _ = plan.record
    assert n.cpu.get_cpu_set("uid-p", "a") is None  # the device manager comes first: a's CPUs wait
    nxt = n.commit(plan, *plan.make_calls())
    assert isinstance(nxt, Plan) and nxt.calls[0].container_name == "b"
    assert n.commit(plan, *plan.make_calls()) is None  # a plan is answered once
    rec = n.commit(nxt, *nxt.make_calls())
    assert isinstance(rec, DecisionRecord) and rec.result.admit and "uid-p" in n.pods and not n.reserved
    assert len(allocated_ids(ep)) == 3
