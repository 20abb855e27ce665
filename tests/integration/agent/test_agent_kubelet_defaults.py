"""The agent answers as the kubelet does by default: static pods carry mirror names, a pod asking for a
resource whose plugin went away (still within its grace period) is rejected, a pod asking for more devices
than exist is rejected with nothing pinned. With --wait-for-device-plugins (opt-in) a pod waits until
every plugin it needs has reported its devices: another plugin's event in the gap between a plugin's
registration and its first ListAndWatch answer must not admit it (the race seen with two real plugins)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import grpc
import pytest
from integration.agent.conftest import GPU, Layout, wait_for, wait_pod

from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.agent import Agent
from numalign.deviceplugin import Device, DevicePlugin
from numalign.machine.examples import example
from numalign.machine.sysfstext import parse_cpulist

NIC = "example.com/nic"
GPUS = [Device("gpu0", topology=(0,)), Device("gpu1", topology=(1,))]
NICS = [Device("nic1", topology=(1,))]  # only NUMA 1 has a NIC: alignment puts the GPU there too
NO_HEALTHY = "no healthy devices present; cannot allocate unhealthy devices example.com/gpu"


class GatedPlugin(DevicePlugin):
    """A real plugin whose first ListAndWatch answer waits for `gate`: it has registered, but the
    agent's device manager does not know its devices yet."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.gate = threading.Event()

    def _list_and_watch(self, context: grpc.ServicerContext) -> Iterator[pb.ListAndWatchResponse]:
        self.gate.wait(10)
        yield from super()._list_and_watch(context)


def _pod(name: str, gpus: int = 1, nics: int = 0) -> str:
    nic = f', {NIC}: "{nics}"' if nics else ""
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml}}
spec:
  containers:
  - name: main
    image: x
    resources:
      limits: {{cpu: "4", memory: 4Gi, {GPU}: "{gpus}"{nic}}}
"""


def _reported(layout: Layout, resource: str, count: int) -> bool:
    return len((layout.status().get("resources", {}).get(resource) or {}).get("healthy", [])) == count


def _cpu_numa_nodes(entry: dict[str, object]) -> set[int | None]:
    node_of = {c.id: c.numa_node for c in example("dual-socket").cpus}
    cpus = parse_cpulist(str(entry["allocations"]["main"]["cpus"]), "cpus")  # type: ignore[index]
    return {node_of[c] for c in cpus}




@pytest.mark.parametrize("gated_first", [True, False], ids=["gated-first", "gated-last"])
@pytest.mark.parametrize("gated", [GPU, NIC])
def test_waiting_pod_is_not_admitted_before_every_plugin_reported(
    layout: Layout, gated: str, gated_first: bool
) -> None:
    # Both start orders: the gated plugin registers first and the other plugin's event falls in its
    # gap, or the other plugin has reported already and the gated plugin's own registration is the
    # event that retries the pod before its first ListAndWatch answer.
    agent = Agent(layout.options(wait_for_device_plugins=True))
    agent.start()
    gpu = (GatedPlugin if gated == GPU else DevicePlugin)(GPU, GPUS, socket_dir=layout.plugins)
    nic = (GatedPlugin if gated == NIC else DevicePlugin)(NIC, NICS, socket_dir=layout.plugins)
    gate_of = gpu if gated == GPU else nic
    other = nic if gated == GPU else gpu
    ungated = NIC if gated == GPU else GPU
    silent = {"healthy": [], "unhealthy": [], "connected": True, "reported": False}
    try:
        layout.write_manifest("p.yaml", _pod("p", gpus=1, nics=1))
        wait_pod(layout, "p", "pending")
        for plugin in (gate_of, other) if gated_first else (other, gate_of):
            plugin.start()  # the gated one registers; its first ListAndWatch is held back
            if plugin is gate_of:
                wait_for(lambda: (layout.status().get("resources", {}).get(gated) or {}) == silent,
                         "gated plugin registered, silent")
            else:
                wait_for(lambda: _reported(layout, ungated, len(NICS if ungated == NIC else GPUS)),
                         "other plugin reported")
        if not gated_first:
            # an event from the other plugin inside the gated plugin's gap: one more device on NUMA 0
            devices = GPUS if ungated == GPU else NICS
            other.update_devices([*devices, Device(ungated.split("/")[1] + "9", topology=(0,))])
            wait_for(lambda: _reported(layout, ungated, len(devices) + 1), "other plugin's update")
        # Every event so far retried pending pods under the same lock that wrote this status: the pod
        # still waits for the gated plugin.
        entry = wait_pod(layout, "p", "pending")
        assert gated in entry["message"]
        assert isinstance(gate_of, GatedPlugin)
        gate_of.gate.set()
        entry = wait_pod(layout, "p", "admitted")
        given = entry["allocations"]["main"]["devices"]
        assert [len(given[GPU]), len(given[NIC])] == [1, 1]
        numa = {n for r in (GPU, NIC) for nodes in given[r].values() for n in nodes}
        # one NUMA node for CPUs and both devices: NUMA 1, the only one with both unless the update
        # put a device of the other kind on NUMA 0 too (then the lower node wins)
        assert numa == _cpu_numa_nodes(entry) == ({1} if gated_first or ungated == GPU else {0})
    finally:
        if isinstance(gate_of, GatedPlugin):
            gate_of.gate.set()
        gpu.stop()
        nic.stop()
        agent.stop()


@pytest.mark.parametrize(("policy", "reason", "message"), [
    # single-numa-node: the device manager has no hint for 3 of 2 devices, so the merge rejects
    ("single-numa-node", "TopologyAffinityError", "Resources cannot be allocated with Topology locality"),
    # best-effort admits the merge, then Allocate finds too few devices
    ("best-effort", "UnexpectedAdmissionError", "Allocate failed due to requested number of devices unavailable "
     "for example.com/gpu. Requested: 3, Available: 2, which is unexpected"),
])
def test_a_pod_asking_more_devices_than_exist_is_rejected_with_nothing_pinned(
    layout: Layout, policy: str, reason: str, message: str
) -> None:
    config = replace(layout.options().config, topology_manager_policy=policy)
    with Agent(layout.options(config=config)), DevicePlugin(GPU, GPUS, socket_dir=layout.plugins) as plugin:
        plugin.register()
        wait_for(lambda: _reported(layout, GPU, 2), "gpus reported")
        layout.write_manifest("big.yaml", _pod("big", gpus=3))
        entry = wait_pod(layout, "big", "rejected")
        assert (entry["reason"], entry["message"]) == (reason, message)
        assert entry["containers"] is None  # never started, never retried
        with grpc.insecure_channel(f"unix://{layout.pr_socket}") as ch:
            listed = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=5)
        assert list(listed.pod_resources) == []
    assert '"entries"' not in (layout.state / "cpu_manager_state").read_text()  # no CPU pinned


def test_a_pod_whose_plugin_is_away_within_its_grace_period_is_rejected(layout: Layout) -> None:
    # single-numa-node rejects earlier, for want of a hint
    config = replace(layout.options().config, topology_manager_policy="best-effort")
    with Agent(layout.options(config=config)):
        plugin = DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, watch_interval=0.1)
        plugin.start()
        try:
            layout.write_manifest("one.yaml", _pod("one"))
            wait_for(lambda: _reported(layout, GPU, 2), "gpus reported")
        finally:
            plugin.stop()
        wait_for(lambda: layout.status()["faults"].get("plugin_disconnected"), "disconnect seen")
        layout.write_manifest("two.yaml", _pod("two"))
        entry = wait_pod(layout, "two", "rejected")
        assert entry["reason"] == "UnexpectedAdmissionError"
        assert entry["message"] == f"Allocate failed due to {NO_HEALTHY}, which is unexpected"


def test_static_pods_carry_the_kubelet_mirror_name(layout: Layout) -> None:
    with Agent(layout.options(mirror_pod_names=True, node_name="worker-7")):
        layout.write_manifest("web.yaml", _pod("web", gpus=0))
        entry = wait_pod(layout, "web-worker-7", "admitted")
        assert entry["namespace"] == "ml"
        with grpc.insecure_channel(f"unix://{layout.pr_socket}") as ch:
            stub = pr_grpc.PodResourcesListerStub(ch)
            names = [(p.namespace, p.name) for p in stub.List(pr.ListPodResourcesRequest(), timeout=5).pod_resources]
            got = stub.Get(pr.GetPodResourcesRequest(pod_name="web-worker-7", pod_namespace="ml"), timeout=5)
        assert names == [("ml", "web-worker-7")]
        assert got.pod_resources.name == "web-worker-7"
