"""Faults the node agent must survive, each visible in the status file and on /metrics: a plugin
that dies, hangs, fails Allocate or streams malformed devices; a device on a NUMA node the machine
lacks; rogue and bad registrations; invalid and duplicate manifests."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures

import grpc
import pytest
from integration.agent.conftest import GPU, Layout, gpu_pod, wait_for, wait_pod

from numalign import metrics as m
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.agent import Agent
from numalign.deviceplugin import ContainerAllocateResponse, Device, DevicePlugin

TWO = [Device("gpu0", topology=(0,)), Device("gpu1", topology=(1,))]


def _resource(layout: Layout) -> dict[str, object] | None:
    res: dict[str, object] | None = layout.status().get("resources", {}).get(GPU)
    return res


def _faults(layout: Layout) -> dict[str, int]:
    faults: dict[str, int] = layout.status().get("faults", {})
    return faults


@pytest.fixture
def short_agent(layout: Layout) -> Iterator[Agent]:
    a = Agent(layout.options(endpoint_grace_period=0.4, call_timeout=1.0))
    a.start()
    try:
        yield a
    finally:
        a.stop()


def test_killed_plugin_makes_devices_unhealthy_then_drops_the_resource(
    short_agent: Agent, layout: Layout, pr_stub: Callable[[], pr_grpc.PodResourcesListerStub]
) -> None:
    plugin = DevicePlugin(GPU, TWO, socket_dir=layout.plugins)
    plugin.start()
    wait_for(lambda: (_resource(layout) or {}).get("healthy") == ["gpu0", "gpu1"], "healthy gpus")
    stub = pr_stub()
    assert len(stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5).devices) == 2
    plugin.stop()
    res = wait_for(lambda: (r := _resource(layout)) and r.get("unhealthy") == ["gpu0", "gpu1"] and r, "unhealthy")
    assert res["healthy"] == [] and res["connected"] is False
    assert not stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5).devices
    assert _faults(layout)["plugin_disconnected"] == 1
    # After the grace period the resource is gone altogether (capacity no longer reports it).
    wait_for(lambda: _resource(layout) is None, "resource dropped after the grace period")
    assert short_agent.node is not None and GPU not in short_agent.node.devices.get_capacity(short_agent.now()).capacity


def test_device_on_a_missing_numa_node_is_unhealthy(short_agent: Agent, layout: Layout) -> None:
    with DevicePlugin(GPU, [Device("gpu0", topology=(0,)), Device("ghost", topology=(7,))],
                      socket_dir=layout.plugins) as plugin:
        plugin.register()
        res = wait_for(lambda: (r := _resource(layout)) and r.get("unhealthy") == ["ghost"] and r, "ghost unhealthy")
        assert res["healthy"] == ["gpu0"]
        assert _faults(layout)["device_on_missing_numa_node"] >= 1
        assert b'numalign_agent_faults_total{kind="device_on_missing_numa_node"}' in short_agent.render_metrics()


def test_hung_and_failing_allocate_reject_the_pod_and_the_agent_goes_on(short_agent: Agent, layout: Layout) -> None:
    def hang(ids: Sequence[str]) -> ContainerAllocateResponse:
        time.sleep(3)
        return ContainerAllocateResponse()

    def crash(ids: Sequence[str]) -> ContainerAllocateResponse:
        raise RuntimeError("device firmware exploded")

    with DevicePlugin(GPU, TWO, socket_dir=layout.plugins, allocate=hang) as plugin:
        plugin.register()
        wait_for(lambda: (_resource(layout) or {}).get("healthy") == ["gpu0", "gpu1"], "gpus")
        layout.write_manifest("hang.yaml", gpu_pod("hang"))
        entry = wait_pod(layout, "hang", "rejected", timeout=6)
        # rejected by the 1 s call deadline: had the agent waited out the plugin's 3 s sleep, the
        # (valid) answer would have admitted the pod
        assert entry["reason"] == "UnexpectedAdmissionError" and "DeadlineExceeded" in entry["message"]
    with DevicePlugin(GPU, TWO, socket_dir=layout.plugins, allocate=crash) as plugin:
        plugin.register()
        wait_for(lambda: (_resource(layout) or {}).get("healthy") == ["gpu0", "gpu1"], "gpus again")
        layout.write_manifest("crash.yaml", gpu_pod("crash"))
        entry = wait_pod(layout, "crash", "rejected")
        assert "device firmware exploded" in entry["message"]
        # Nothing was leaked: a pod without devices still gets the whole node.
        layout.write_manifest("web.yaml", gpu_pod("web", gpus=0))
        wait_pod(layout, "web", "admitted")


class _MalformedPlugin(pb_grpc.DevicePluginServicer):
    """Streams one malformed snapshot (a duplicate ID: used as the kubelet does, and reported), then a
    valid one, then stays open."""

    def GetDevicePluginOptions(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions()

    def ListAndWatch(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[pb.ListAndWatchResponse]:
        yield pb.ListAndWatchResponse(devices=[pb.Device(ID="a", health="Healthy")] * 2)
        yield pb.ListAndWatchResponse(devices=[pb.Device(ID="a", health="Healthy")])
        while context.is_active():
            time.sleep(0.05)

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "not offered")

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "never called in this test")

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "never called in this test")


def test_malformed_stream_and_rogue_registrations_are_refused_and_counted(short_agent: Agent, layout: Layout) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_DevicePluginServicer_to_server(_MalformedPlugin(), server)
    server.add_insecure_port(f"unix://{layout.plugins}/raw.sock")
    server.start()
    channel = grpc.insecure_channel(f"unix://{layout.plugins}/kubelet.sock")
    try:
        reg = pb_grpc.RegistrationStub(channel)
        rogue = [
            pb.RegisterRequest(version="v1alpha", endpoint="raw.sock", resource_name=GPU),
            pb.RegisterRequest(version="v1beta1", endpoint="../../etc/x.sock", resource_name=GPU),
            pb.RegisterRequest(version="v1beta1", endpoint="raw.sock", resource_name="cpu"),
            pb.RegisterRequest(version="v1beta1", endpoint="absent.sock", resource_name=GPU),
        ]
        for req in rogue:
            with pytest.raises(grpc.RpcError):
                reg.Register(req, timeout=5)
        reg.Register(pb.RegisterRequest(version="v1beta1", endpoint="raw.sock", resource_name=GPU), timeout=5)
        wait_for(lambda: (_resource(layout) or {}).get("healthy") == ["a"], "the valid snapshot")
        faults = _faults(layout)
        assert faults["registration_refused"] == 4 and faults["malformed_device_update"] == 1
        assert short_agent.metrics.value(m.DP_REGISTRATION, resource_name=GPU) == 4
        assert short_agent.metrics.value(m.DP_REGISTRATION, resource_name="cpu") == 1
    finally:
        channel.close()
        server.stop(0)


def test_invalid_and_duplicate_manifests_are_recorded_not_fatal(agent: Agent, layout: Layout) -> None:
    bad = layout.write_manifest("bad.yaml", "apiVersion: v1\nkind: Pod\nspec: [not, a, pod\n")
    wait_for(lambda: layout.status()["manifests"].get(str(bad), {}).get("status") == "invalid", "invalid recorded")
    error = layout.status()["manifests"][str(bad)]["error"]
    assert error and str(bad) not in error  # the status keys it by file; the text does not repeat the path
    layout.write_manifest("one.yaml", gpu_pod("same", gpus=0))
    wait_pod(layout, "same", "admitted")
    dup = layout.write_manifest("two.yaml", gpu_pod("same", gpus=0))
    err = wait_for(lambda: layout.status()["manifests"].get(str(dup), {}).get("error"), "duplicate recorded")
    assert "already defined in" in err and "one.yaml" in err
    # Fixing the bad file admits its pod; the agent never stopped.
    bad.write_text(gpu_pod("fixed", gpus=0), encoding="utf-8")
    wait_pod(layout, "fixed", "admitted")
    faults = _faults(layout)
    assert faults["invalid_manifest"] == 1 and faults["duplicate_pod"] == 1


def test_pod_waits_for_its_device_plugin_when_asked_to(layout: Layout) -> None:
    with Agent(layout.options(wait_for_device_plugins=True)):
        layout.write_manifest("early.yaml", gpu_pod("early"))
        entry = wait_pod(layout, "early", "pending")
        assert entry["reason"] == "WaitingForDevicePlugin" and GPU in entry["message"]
        with DevicePlugin(GPU, TWO, socket_dir=layout.plugins) as plugin:
            plugin.register()
            entry = wait_pod(layout, "early", "admitted")
            assert list(entry["allocations"]["main"]["devices"][GPU]) in (["gpu0"], ["gpu1"])


def test_by_default_a_pod_is_admitted_without_devices_no_plugin_reported(agent: Agent, layout: Layout) -> None:
    # The kubelet's predicate drops extended resources the node does not know and its device manager
    # skips resources it has no devices for: the pod runs without them.
    layout.write_manifest("early.yaml", gpu_pod("early"))
    entry = wait_pod(layout, "early", "admitted")
    assert entry["allocations"]["main"]["devices"] == {}


def test_metrics_endpoint_serves_kubelet_names(layout: Layout) -> None:
    a = Agent(layout.options(metrics_address="127.0.0.1:0"))
    a.start()
    try:
        layout.write_manifest("web.yaml", gpu_pod("web", gpus=0))
        wait_pod(layout, "web", "admitted")
        assert a.metrics_server is not None
        with urllib.request.urlopen(a.metrics_server.url, timeout=5) as resp:
            body = resp.read().decode()
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        for name in ("kubelet_topology_manager_admission_requests_total 1.0",
                     "kubelet_cpu_manager_exclusive_cpu_allocation_count 4.0",
                     'kubelet_cpu_manager_allocation_per_numa{numa_node="0"}',
                     "kubelet_memory_manager_pinning_requests_total",
                     "kubelet_container_aligned_compute_resources_count"):
            assert name in body
        # No plugin registered: a labelled family without a series is not exposed, as client_golang omits it.
        assert "kubelet_device_plugin_registration_total" not in body and "resource_manager_" not in body
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(a.metrics_server.url.replace("/metrics", "/other"), timeout=5)
        assert e.value.code == 404
        e.value.close()
    finally:
        a.stop()


def test_without_waiting_a_pod_is_admitted_without_unregistered_devices(layout: Layout) -> None:
    a = Agent(layout.options(wait_for_device_plugins=False))
    a.start()
    try:
        layout.write_manifest("early.yaml", gpu_pod("early"))
        entry = wait_pod(layout, "early", "admitted")
        assert entry["allocations"]["main"]["devices"] == {}  # what the kubelet does
    finally:
        a.stop()


def test_a_failed_start_leaves_no_socket_behind(layout: Layout) -> None:
    from numalign.errors import NumalignError

    too_long = layout.root / ("p" * 120) / "kubelet.sock"
    a = Agent(layout.options(pod_resources_socket=layout.root / "pr.sock", device_plugin_dir=too_long.parent))
    with pytest.raises(NumalignError, match="107 bytes"):
        a.start()
    assert not (layout.root / "pr.sock").exists()


def test_duplicate_registration_replaces_the_plugin_and_the_old_one_cannot_disturb_it(
    short_agent: Agent, layout: Layout
) -> None:
    old = DevicePlugin(GPU, TWO, socket_dir=layout.plugins, socket_name="old.sock")
    new = DevicePlugin(GPU, [Device("gpu9", topology=(3,))], socket_dir=layout.plugins, socket_name="new.sock")
    with old, new:
        old.register()
        wait_for(lambda: (_resource(layout) or {}).get("healthy") == ["gpu0", "gpu1"], "old plugin's devices")
        new.register()
        wait_for(lambda: (_resource(layout) or {}).get("healthy") == ["gpu9"], "new plugin's devices")
        old.stop()  # the replaced plugin going away must not make the new plugin's devices unhealthy
        time.sleep(0.6)  # longer than the grace period
        res = _resource(layout)
        assert res is not None and res["healthy"] == ["gpu9"] and res["connected"] is True
        assert "plugin_disconnected" not in _faults(layout)
        layout.write_manifest("p.yaml", gpu_pod("p"))
        entry = wait_pod(layout, "p", "admitted")
        assert entry["allocations"]["main"]["devices"][GPU] == {"gpu9": [3]}
