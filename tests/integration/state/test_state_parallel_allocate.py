"""Node.reserve / complete / cancel (the agent's --parallel-allocate) against a real state directory:
the plugin's Allocate is handed back instead of made, the pod's resources are taken at once, the pod
record stays the commit point, and every outcome is the one Node.admit gives for the same answers."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from support.configs import static_node_config
from support.nodecheck import check_node, open_read_only

from numalign.adapters.statedir.directory import StateDirectory
from numalign.core.decision import DecisionRecord
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
CONFIG = static_node_config(reserved="0,64")
GPU = "nvidia.com/gpu"


def pod(name: str, cpus: int = 4, gpus: int = 0) -> Pod:
    limits = {"cpu": Q(str(cpus)), "memory": Q("2Gi")}
    if gpus:
        limits[GPU] = Q(str(gpus))
    return Pod(name=name, uid=f"uid-{name}", containers=(Container("app", requests=dict(limits), limits=limits),))


def plugin(n: Node, fail: bool = False) -> StaticEndpoint:
    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        if fail:
            raise PluginError("rpc error: code = Unknown desc = device reset failed")
        return ContainerAllocateResponse(envs={"GPU": ",".join(ids)})

    devices = [Device(d.id, d.health, d.numa_nodes) for d in MACHINE.devices_by_resource()[GPU]]
    return n.devices.add_static_plugin(GPU, devices, allocate_fn=allocate)


def free_cpus(n: Node) -> int:
    assert isinstance(n.cpu, StaticPolicy)
    return len(n.cpu.get_available_cpus())


def test_the_calls_are_handed_back_and_the_devices_taken_at_once(tmp_path: Path) -> None:
    n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    ep = plugin(n)
    a = n.decide(pod("a", gpus=1))
    assert not a.settled
    assert ep.calls == [] and "uid-a" not in n.pods and [p.name for p in n.reserved_pods] == ["a"]
    b = n.decide(pod("b", gpus=1))
    assert not b.settled
    assert set(a.calls[0].device_ids).isdisjoint(b.calls[0].device_ids)
    cpu_only = n.decide(pod("c"))  # nothing to call: final at once
    assert cpu_only.settled and cpu_only.record.result.admit
    for res in (b, a):  # answers may come in any order
        rec = n.commit(res, *res.make_calls())
        assert isinstance(rec, DecisionRecord) and rec.result.admit
    assert not n.reserved
    again = open_read_only(MACHINE, CONFIG, tmp_path)
    check_node(again, tmp_path)
    assert sorted(p.name for p in again.pods.values()) == ["a", "b", "c"]
    opts = again.devices.pod_devices.run_container_options("uid-a", "app")
    assert opts is not None and dict(opts.envs) == {"GPU": ",".join(a.calls[0].device_ids)}


def test_a_crash_during_the_call_leaves_the_pod_unadmitted_and_nothing_held(tmp_path: Path) -> None:
    n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    plugin(n)
    assert n.decide(pod("b")).record.result.admit
    assert not n.decide(pod("a", cpus=8, gpus=1)).settled
    # The process dies here: what a restart reads holds b only, and nothing of a.
    after = open_read_only(MACHINE, CONFIG, tmp_path)
    held = check_node(after, tmp_path)
    assert list(after.pods) == ["uid-b"] and set(held) == {"uid-b"}
    assert after.devices.pod_devices.pods() == set()


def test_a_failed_call_gives_the_kubelets_answer_and_releases_everything(tmp_path: Path) -> None:
    serial = Node(MACHINE, CONFIG)
    plugin(serial, fail=True)
    want = serial.admit(pod("a", gpus=1))
    assert not want.result.admit
    n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    plugin(n, fail=True)
    free = free_cpus(n)
    res = n.decide(pod("a", gpus=1))
    assert not res.settled and n.devices.allocated.get(GPU)
    assert free_cpus(n) == free  # the device manager allocates first: the call comes before the CPUs
    got = n.commit(res, *res.make_calls())
    assert isinstance(got, DecisionRecord) and got.result == want.result
    assert got.result.message == ("Allocate failed due to rpc error: code = Unknown desc = device reset failed, "
                                  "which is unexpected")
    assert free_cpus(n) == free and n.devices.allocated.get(GPU, set()) == set()
    assert not n.pods and not n.reserved
    check_node(open_read_only(MACHINE, CONFIG, tmp_path), tmp_path)


def test_reserved_pods_count_in_the_admission_of_others() -> None:
    config = dataclasses.replace(CONFIG, max_pods=1, pods_per_core=0)
    n = Node(MACHINE, config)
    plugin(n)
    assert not n.decide(pod("a", gpus=1)).settled
    rec = n.decide(pod("b"))
    assert rec.settled and rec.record.result.reason == "OutOfpods"


def test_a_cancelled_or_reloaded_reservation_is_gone(tmp_path: Path) -> None:
    n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    plugin(n)
    free = free_cpus(n)
    res = n.decide(pod("a", gpus=1))
    assert not res.settled
    n.cancel("uid-a")
    assert free_cpus(n) == free and not n.devices.allocated.get(GPU)
    assert n.commit(res, *res.make_calls()) is None and "uid-a" not in n.pods
    # Another process writes the directory while a's call is out: the reload drops the reservation.
    res = n.decide(pod("a", gpus=1))
    assert not res.settled
    other = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    assert other.admit(pod("z")).result.admit
    n.save()
    assert n.commit(res, *res.make_calls()) is None
    res = n.decide(pod("a", gpus=1))  # the agent admits it again
    assert not res.settled
    rec = n.commit(res, *res.make_calls())
    assert isinstance(rec, DecisionRecord) and rec.result.admit
    check_node(open_read_only(MACHINE, CONFIG, tmp_path), tmp_path)


def test_a_pod_rejected_after_its_device_calls_gets_the_answer_the_calls_decide() -> None:
    """The device manager allocates first: container gpu's devices are chosen and its call made, then
    container big asks for more CPUs than the node has: if the call fails, that failure is the answer
    (big is never looked at); if not, the CPU rejection is."""
    limits = {"cpu": Q("2"), "memory": Q("1Gi"), GPU: Q("1")}
    huge = {"cpu": Q("500"), "memory": Q("1Gi")}
    p = Pod(name="p", uid="uid-p", containers=(Container("gpu", requests=dict(limits), limits=limits),
                                                Container("big", requests=dict(huge), limits=huge)))
    for fail in (False, True):
        serial = Node(MACHINE, CONFIG)
        plugin(serial, fail=fail)
        want = serial.admit(p)
        n = Node(MACHINE, CONFIG)
        plugin(n, fail=fail)
        res = n.decide(p)
        assert not res.settled and "uid-p" in n.reserved
        got = n.commit(res, *res.make_calls())
        assert isinstance(got, DecisionRecord) and not got.result.admit and got.result == want.result
        assert not n.reserved
        assert ("Allocate failed due to" in got.result.message) == fail
        assert not n.pods and not n.devices.allocated.get(GPU)
