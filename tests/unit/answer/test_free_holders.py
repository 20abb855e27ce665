"""Who holds what on each NUMA node (answer/free.py, `admit --details`'s "free now ... held by"): each
exclusive CPU and device counted once, for the container that holds it now. The CPU and device managers
hand an init container's CPUs and devices on to the app containers after it, while the init container's
assignment stays in their state (as upstream's checkpoints keep it)."""

from __future__ import annotations

from numalign.answer.free import numa_capacity
from numalign.k8s.deviceplugin import Device as PluginDevice
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.machine.examples import example

CONFIG = """
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
reservedSystemCPUs: "0,64"
topologyManagerPolicy: single-numa-node
systemReserved: {memory: 1Gi}
evictionHard: {memory.available: 100Mi}
"""
GPU = "example.com/gpu"


def res(cpus: int, gpus: int = 0) -> dict[str, Quantity]:
    out = {"cpu": Quantity.from_int(cpus), "memory": Quantity.parse("1Gi")}
    if gpus:
        out[GPU] = Quantity.from_int(gpus)
    return out


def test_cpus_and_devices_an_app_container_reuses_from_an_init_container_are_counted_once() -> None:
    node = Node(example("dual-socket"), config_from_yaml(CONFIG), static_devices=False)
    node.devices.add_static_plugin(GPU, [PluginDevice(f"gpu{i}", "Healthy", (0,)) for i in range(2)])
    pod = Pod(name="p", uid="uid-p",
              init_containers=(Container("setup", requests=res(2, 1), limits=res(2, 1), is_init=True),),
              containers=(Container("app", requests=res(4, 1), limits=res(4, 1)),))
    assert node.admit(pod).result.admit
    # the state keeps the init container's CPUs and device, which the app container holds now too
    assert node.cpu.get_exclusive_cpus("uid-p", "setup") <= node.cpu.get_exclusive_cpus("uid-p", "app")
    rows = [f for f in numa_capacity(node) if f.resource in ("cpu", GPU) and f.held_by]
    assert rows, "the pod holds CPUs and a GPU on one NUMA node"
    for f in rows:
        assert sum(h.amount for h in f.held_by) == f.allocatable - f.free, f
        assert [h.container for h in f.held_by] == ["app"], f
