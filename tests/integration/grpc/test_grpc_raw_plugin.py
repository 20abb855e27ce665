"""A device plugin written directly on the generated stubs (not our SDK), registering through a raw
Registration client, as a third-party plugin would."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from numalign.deviceplugin.testing import FakeKubelet
from numalign.errors import PluginError
from numalign.providers.devices.endpoint import Device, DeviceSpec

NIC = "example.net/sriov"
END = pb.ListAndWatchResponse(devices=[pb.Device(ID="__end__")])


class RawPlugin(pb_grpc.DevicePluginServicer):
    """Streams whatever the test puts in `updates`; END closes the stream."""

    def __init__(self) -> None:
        self.updates: queue.Queue[pb.ListAndWatchResponse] = queue.Queue()
        self.prestarted: list[list[str]] = []

    def GetDevicePluginOptions(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(pre_start_required=True)

    def ListAndWatch(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> Iterator[pb.ListAndWatchResponse]:
        while context.is_active():
            try:
                msg = self.updates.get(timeout=0.1)
            except queue.Empty:
                continue
            if msg is END:
                return
            yield msg

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "not offered")

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        resp = pb.AllocateResponse()
        for creq in request.container_requests:
            c = resp.container_responses.add()
            for i in creq.devices_ids:
                c.devices.add(container_path=f"/dev/{i}", host_path=f"/dev/{i}", permissions="rw")
            c.annotations["example.net/vfs"] = ",".join(creq.devices_ids)
        return resp

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        if "bad" in request.devices_ids:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "device bad cannot be reset")
        self.prestarted.append(list(request.devices_ids))
        return pb.PreStartContainerResponse()


@pytest.fixture
def raw_plugin(sock_dir: Path) -> Iterator[RawPlugin]:
    plugin = RawPlugin()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_DevicePluginServicer_to_server(plugin, server)
    server.add_insecure_port(f"unix://{sock_dir}/raw.sock")
    server.start()
    try:
        yield plugin
    finally:
        plugin.updates.put(END)
        server.stop(0.2).wait(5)


def _register(sock_dir: Path, endpoint: str = "raw.sock") -> None:
    with grpc.insecure_channel(f"unix://{sock_dir}/kubelet.sock") as ch:
        pb_grpc.RegistrationStub(ch).Register(
            pb.RegisterRequest(version="v1beta1", endpoint=endpoint, resource_name=NIC), timeout=5
        )


def test_grpc_raw_plugin_registers_and_streams(
    kubelet: FakeKubelet, raw_plugin: RawPlugin, sock_dir: Path
) -> None:
    _register(sock_dir)
    assert [r for r, _ in kubelet.registered] == [NIC]
    endpoint = kubelet.endpoint(NIC)
    assert endpoint.options.pre_start_required
    assert not endpoint.options.get_preferred_allocation_available

    raw_plugin.updates.put(
        pb.ListAndWatchResponse(
            devices=[
                pb.Device(ID="vf0", health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=1)])),
                pb.Device(ID="vf1", health="Unhealthy", topology=pb.TopologyInfo()),  # present, no nodes
                pb.Device(ID="vf2", health="Healthy"),  # no topology field at all
            ]
        )
    )
    kubelet.wait_for(lambda: kubelet.last_devices(NIC) is not None, "first snapshot")
    assert kubelet.last_devices(NIC) == [
        Device("vf0", "Healthy", (1,)),
        Device("vf1", "Unhealthy", ()),
        Device("vf2", "Healthy", None),
    ]

    resp = endpoint.allocate(["vf0", "vf2"])
    assert resp.devices == (
        DeviceSpec("/dev/vf0", "/dev/vf0", "rw"),
        DeviceSpec("/dev/vf2", "/dev/vf2", "rw"),
    )
    assert dict(resp.annotations) == {"example.net/vfs": "vf0,vf2"}
    endpoint.pre_start_container(["vf0"])
    assert raw_plugin.prestarted == [["vf0"]]
    with pytest.raises(
        PluginError, match="rpc error: code = FailedPrecondition desc = device bad cannot be reset"
    ):
        endpoint.pre_start_container(["bad"])

    # The plugin's stream ends (it exits): the resource is reported disconnected.
    raw_plugin.updates.put(END)
    kubelet.wait_for(lambda: kubelet.disconnected == [NIC], "disconnect")
    with pytest.raises(PluginError, match="has been stopped"):
        endpoint.allocate(["vf0"])


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ([pb.Device(ID="a"), pb.Device(ID="a")], "listed twice"),
        ([pb.Device(ID="")], "empty ID"),
        ([pb.Device(ID="a", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=-1)]))], "must be >= 0"),
    ],
)
def test_grpc_malformed_list_and_watch_is_dropped_and_stream_kept(
    kubelet: FakeKubelet, raw_plugin: RawPlugin, sock_dir: Path, bad: list[pb.Device], why: str
) -> None:
    _register(sock_dir)
    raw_plugin.updates.put(pb.ListAndWatchResponse(devices=bad))
    kubelet.wait_for(lambda: len(kubelet.malformed) == 1, "malformed report")
    assert kubelet.malformed[0][0] == NIC and why in kubelet.malformed[0][1]
    assert kubelet.devices == []
    raw_plugin.updates.put(pb.ListAndWatchResponse(devices=[pb.Device(ID="ok", health="Healthy")]))
    kubelet.wait_for(
        lambda: kubelet.last_devices(NIC) == [Device("ok", "Healthy", None)], "the next valid update"
    )
    assert kubelet.disconnected == []


def test_grpc_long_device_ids_are_accepted_like_the_kubelet(
    kubelet: FakeKubelet, raw_plugin: RawPlugin, sock_dir: Path
) -> None:
    _register(sock_dir)
    raw_plugin.updates.put(pb.ListAndWatchResponse(devices=[pb.Device(ID="x" * 100, health="Healthy")]))
    kubelet.wait_for(lambda: kubelet.last_devices(NIC) == [Device("x" * 100, "Healthy", None)], "long id")
    assert kubelet.malformed == []


def test_grpc_plugin_that_does_not_answer_options_is_refused(kubelet: FakeKubelet, sock_dir: Path) -> None:
    class Mute(pb_grpc.DevicePluginServicer):
        pass  # every method UNIMPLEMENTED

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_DevicePluginServicer_to_server(Mute(), server)  # type: ignore[abstract]
    server.add_insecure_port(f"unix://{sock_dir}/mute.sock")
    server.start()
    try:
        with pytest.raises(
            grpc.RpcError, match="failed to get device plugin options: rpc error: code = Unimplemented"
        ):
            _register(sock_dir, "mute.sock")
        assert kubelet.server.resources() == []
        assert [r for r, _ in kubelet.refused] == [NIC]
    finally:
        server.stop(0.1).wait(5)


def test_grpc_plugin_that_hangs_in_options_is_refused_at_the_deadline(sock_dir: Path) -> None:
    import threading

    release = threading.Event()

    class Hung(RawPlugin):
        def GetDevicePluginOptions(
            self, request: pb.Empty, context: grpc.ServicerContext
        ) -> pb.DevicePluginOptions:
            release.wait(5)
            return pb.DevicePluginOptions()

    kubelet = FakeKubelet(sock_dir, call_timeout=0.3)
    kubelet.start()  # first: its start-up cleanup removes every socket in the directory
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_DevicePluginServicer_to_server(Hung(), server)
    server.add_insecure_port(f"unix://{sock_dir}/hung.sock")
    server.start()
    try:
        with pytest.raises(grpc.RpcError) as info:
            _register(sock_dir, "hung.sock")
        assert isinstance(info.value, grpc.Call)
        assert info.value.details() == (
            "failed to get device plugin options: rpc error: code = DeadlineExceeded desc = context deadline exceeded"
        )
        assert kubelet.server.resources() == []
    finally:
        release.set()
        kubelet.stop()
        server.stop(0.1).wait(5)
