"""Every admission decides, makes the device plugins' Allocate calls, then commits (issue 32, item 3): the
device manager decides a call without making it, and a failing call is settled as the kubelet's Allocate
ends the admission there (the `admit` conformance area pins the verdict and what stays held; these pin
the record and the counts the area does not see)."""

from __future__ import annotations

from collections.abc import Sequence

from support.configs import static_node_config

from numalign import metrics as m
from numalign.errors import PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.devicemanager.endpoint import StaticEndpoint
from numalign.kubelet.node import Node
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


def test_the_device_manager_decides_a_call_without_making_it() -> None:
    n, ep = node()
    pod = Pod("p", uid="uid-p", containers=(ctr("c", gpus=1),))
    n.devices.allocate(pod, pod.containers[0])
    calls = n.devices.take_calls()
    assert [(c.container_name, c.resource, len(c.device_ids)) for c in calls] == [("c", GPU, 1)]
    assert allocated_ids(ep) == [] and n.devices.take_calls() == ()
    # taken, but not in the checkpoint until answered
    assert n.devices.allocated[GPU] == set(calls[0].device_ids)
    assert n.devices.snapshot().pod_device_entries == ()
    n.devices.answered(calls, [ContainerAllocateResponse(envs={"GPU": "x"})])
    assert [e.container_name for e in n.devices.snapshot().pod_device_entries] == ["c"]


def test_a_failed_call_gives_back_its_devices_and_those_decided_after_it() -> None:
    n, _ = node()
    pod = Pod("p", uid="uid-p", containers=(ctr("a", gpus=1), ctr("b", gpus=1)))
    for c in pod.containers:
        n.devices.allocate(pod, c)
    first, second = n.devices.take_calls()
    n.devices.answered([first], [ContainerAllocateResponse()])
    n.devices.failed([second])
    assert n.devices.allocated[GPU] == set(first.device_ids)
    assert n.devices.get_container_devices("uid-p", "b") is None


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
