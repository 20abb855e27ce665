"""Device plugins written directly on the generated stubs (not our SDK), registering through a raw
Registration client, as a third-party plugin would; one of them mirrors upstream's Stub
(plugin/v1beta1/stub.go), which upstream's e2e tests and sample device plugin are built on."""

from __future__ import annotations

import queue
import re
import shutil
import socket
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from integration.agent.conftest import Layout, wait_for, wait_pod

from numalign import metrics as m
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from numalign.agent import Agent
from numalign.deviceplugin.testing import FakeKubelet
from numalign.errors import PluginError
from numalign.k8s.deviceplugin import Device, DeviceSpec

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
    ("odd", "taken", "why"),
    [
        (
            [pb.Device(ID="a", health="Healthy"), pb.Device(ID="b"), pb.Device(ID="a", health="Unhealthy")],
            [Device("a", "Unhealthy", None), Device("b", "", None)],
            "listed twice",
        ),
        ([pb.Device(ID="", health="Healthy")], [Device("", "Healthy", None)], "empty ID"),
        (
            [
                pb.Device(ID="a", health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=-1)])),
                pb.Device(ID="b", health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=0)])),
            ],
            [Device("a", "Healthy", (-1,)), Device("b", "Healthy", (0,))],
            "matches no NUMA node",
        ),
    ],
)
def test_grpc_odd_list_and_watch_is_taken_as_the_kubelet_takes_it_and_reported(
    kubelet: FakeKubelet, raw_plugin: RawPlugin, sock_dir: Path, odd: list[pb.Device], taken: list[Device], why: str
) -> None:
    # The kubelet validates nothing in a snapshot (a map keyed by ID): refusing it whole would hide
    # every other device of a plugin the kubelet serves (sysfs' numa_node -1 passed through, say).
    _register(sock_dir)
    raw_plugin.updates.put(pb.ListAndWatchResponse(devices=odd))
    kubelet.wait_for(lambda: kubelet.last_devices(NIC) is not None, "the snapshot")
    assert kubelet.last_devices(NIC) == taken
    assert len(kubelet.malformed) == 1
    assert kubelet.malformed[0][0] == NIC and why in kubelet.malformed[0][1]
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


# -- upstream's Stub (pkg/kubelet/cm/devicemanager/plugin/v1beta1/stub.go) against the agent ----------

RESOURCE = "example.com/resource"  # the resource of upstream's test/images/sample-device-plugin

AllocFunc = Callable[[pb.AllocateRequest, dict[str, pb.Device]], pb.AllocateResponse]
PreferredFunc = Callable[[pb.PreferredAllocationRequest, dict[str, pb.Device]], pb.PreferredAllocationResponse]


def sample_alloc(request: pb.AllocateRequest, devs: dict[str, pb.Device]) -> pb.AllocateResponse:
    """The sample device plugin's stubAllocFunc: one response per container request, a mount per
    device, an error for an unknown or unhealthy device (it also creates /tmp/<id>; not needed here)."""
    resp = pb.AllocateResponse()
    for creq in request.container_requests:
        c = resp.container_responses.add()
        for dev_id in creq.devices_ids:
            dev = devs.get(dev_id)
            if dev is None:
                raise ValueError(f"invalid allocation request with non-existing device {dev_id}")
            if dev.health != "Healthy":
                raise ValueError(f"invalid allocation request with unhealthy device: {dev_id}")
            c.mounts.add(container_path=f"/tmp/{dev_id}", host_path=f"/tmp/{dev_id}")
    return resp


class Stub(pb_grpc.DevicePluginServicer):
    """upstream's Stub, on the generated stubs: Start() serves the socket and dials it until it
    answers; Register() dials kubelet.sock (blocking, 10 s) and sends RegisterRequest with the socket's
    base name and the options; ListAndWatch sends the devices, then each Update(); the answers come
    from settable functions. Every request the kubelet side makes is recorded."""

    def __init__(
        self, devs: list[pb.Device], socket: Path, resource: str, pre_start: bool, get_preferred: bool
    ) -> None:
        self.devs = devs
        self.socket = socket
        self.resource = resource
        self.options = pb.DevicePluginOptions(
            pre_start_required=pre_start, get_preferred_allocation_available=get_preferred
        )
        # Stub's defaults: empty answers
        self.alloc_func: AllocFunc = lambda r, d: pb.AllocateResponse()
        self.preferred_func: PreferredFunc = lambda r, d: pb.PreferredAllocationResponse()
        self.server: grpc.Server | None = None
        self._stop = threading.Event()
        self._updates: queue.Queue[list[pb.Device]] = queue.Queue()
        self.allocate_requests: list[pb.AllocateRequest] = []
        self.preferred_requests: list[pb.PreferredAllocationRequest] = []
        self.prestart_requests: list[list[str]] = []

    def start(self) -> None:
        self.socket.unlink(missing_ok=True)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_DevicePluginServicer_to_server(self, self.server)
        self.server.add_insecure_port(f"unix://{self.socket}")
        self.server.start()
        with grpc.insecure_channel(f"unix://{self.socket}") as ch:
            grpc.channel_ready_future(ch).result(timeout=10)

    def register(
        self, kubelet_socket: Path, plugin_sock_dir: str, options: pb.DevicePluginOptions | None = None
    ) -> None:
        # A kubelet that hands device plugins to its plugin watcher leaves <dir>DEPRECATION behind.
        if plugin_sock_dir and Path(plugin_sock_dir + "DEPRECATION").exists():
            return
        with grpc.insecure_channel(f"unix://{kubelet_socket}") as ch:
            grpc.channel_ready_future(ch).result(timeout=10)
            request = pb.RegisterRequest(
                version="v1beta1",
                endpoint=self.socket.name,
                resource_name=self.resource,
                options=options if options is not None else self.options,
            )
            try:
                pb_grpc.RegistrationStub(ch).Register(request)
            except grpc.RpcError:
                self.stop()
                raise

    def update(self, devs: list[pb.Device]) -> None:
        self.devs = devs
        self._updates.put(devs)

    def stop(self) -> None:
        self._stop.set()
        if self.server is not None:
            self.server.stop(0.2).wait(5)
            self.server = None
        self.socket.unlink(missing_ok=True)

    def GetDevicePluginOptions(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.DevicePluginOptions:
        return self.options

    def ListAndWatch(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[pb.ListAndWatchResponse]:
        yield pb.ListAndWatchResponse(devices=self.devs)
        while context.is_active() and not self._stop.is_set():
            try:
                devs = self._updates.get(timeout=0.05)
            except queue.Empty:
                continue
            yield pb.ListAndWatchResponse(devices=devs)

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        self.preferred_requests.append(request)
        try:
            return self.preferred_func(request, {d.ID: d for d in self.devs})
        except ValueError as e:
            context.abort(grpc.StatusCode.UNKNOWN, str(e))

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        self.allocate_requests.append(request)
        try:
            return self.alloc_func(request, {d.ID: d for d in self.devs})
        except ValueError as e:
            context.abort(grpc.StatusCode.UNKNOWN, str(e))

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        self.prestart_requests.append(list(request.devices_ids))
        return pb.PreStartContainerResponse()


def _stub_devices(per_node: int = 4) -> list[pb.Device]:
    """`per_node` healthy devices on each NUMA node of the dual-socket example (nodes 0-3)."""
    return [
        pb.Device(ID=f"dev-{n}{chr(97 + i)}", health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=n)]))
        for n in range(4)
        for i in range(per_node)
    ]


def _pod(name: str, app: int, init: int = 0) -> str:
    def limits(n: int) -> str:
        return f'{{cpu: "2", memory: 1Gi, {RESOURCE}: "{n}"}}'

    init_part = f"  initContainers:\n  - name: init\n    image: x\n    resources:\n      limits: {limits(init)}\n"
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n"
        f"{init_part if init else ''}"
        f"  containers:\n  - name: main\n    image: x\n    resources:\n      limits: {limits(app)}\n"
    )


@pytest.fixture
def stub_layout() -> Iterator[Layout]:
    d = Path(tempfile.mkdtemp(prefix="nas-", dir="/tmp"))
    try:
        yield Layout(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _preferring_last(
    request: pb.PreferredAllocationRequest, devs: dict[str, pb.Device]
) -> pb.PreferredAllocationResponse:
    """must_include first, then the highest other ids; plus an id the kubelet never offered, which
    the kubelet ignores, as upstream intersects the answer with its candidates."""
    resp = pb.PreferredAllocationResponse()
    for creq in request.container_requests:
        must = list(creq.must_include_deviceIDs)
        rest = sorted((i for i in creq.available_deviceIDs if i not in must), reverse=True)
        resp.container_responses.add(deviceIDs=["not-offered", *must, *rest][: creq.allocation_size + 1])
    return resp


def test_upstream_stub_plugin_registers_and_serves_a_manifest_pod(stub_layout: Layout) -> None:
    layout = stub_layout
    with Agent(layout.options(wait_for_device_plugins=True)):
        # With --wait-for-device-plugins the agent holds a pod whose plugin has not registered yet.
        layout.write_manifest("early.yaml", _pod("early", app=1))
        assert wait_pod(layout, "early", "pending")["reason"] == "WaitingForDevicePlugin"

        # Like the sample device plugin: socket "dp.<unix time>", Start(), then Register().
        stub = Stub(_stub_devices(), layout.plugins / f"dp.{int(time.time())}", RESOURCE, True, True)
        stub.alloc_func = sample_alloc
        stub.preferred_func = _preferring_last
        stub.start()
        try:
            stub.register(layout.plugins / "kubelet.sock", str(layout.plugins) + "/")
            entry = wait_pod(layout, "early", "admitted")
            ((picked, numa),) = entry["allocations"]["main"]["devices"][RESOURCE].items()
            on_node = sorted(d.ID for d in _stub_devices() if [n.ID for n in d.topology.nodes] == numa)

            # GetPreferredAllocation: one container request, the aligned devices, nothing to
            # include, the container's whole request as the size.
            (preq,) = stub.preferred_requests
            (creq,) = preq.container_requests
            assert sorted(creq.available_deviceIDs) == on_node
            assert list(creq.must_include_deviceIDs) == [] and creq.allocation_size == 1
            assert picked == on_node[-1]  # the plugin's preference among them; "not-offered" ignored

            # Allocate: one ContainerAllocateRequest carrying devices_ids; its answer is the runtime's.
            (areq,) = stub.allocate_requests
            assert [list(c.devices_ids) for c in areq.container_requests] == [[picked]]
            assert entry["runtime"]["main"]["mounts"] == [
                {"container_path": f"/tmp/{picked}", "host_path": f"/tmp/{picked}", "read_only": False}
            ]
            # pre_start_required: before the container starts, which is after admission and off the agent's
            # lock (docs/node-agent.md): waited for, as "admitted" can be written first (a failure at load 10).
            wait_for(lambda: stub.prestart_requests, "PreStartContainer of the admitted pod")
            assert stub.prestart_requests == [[picked]]

            # Init-container devices are reused by the app container: must_include carries them and
            # the size is the app container's whole request (upstream devicesToAllocate).
            layout.write_manifest("reuse.yaml", _pod("reuse", app=2, init=1))
            entry = wait_pod(layout, "reuse", "admitted")
            init_dev = list(entry["allocations"]["init"]["devices"][RESOURCE])
            app_devs = sorted(entry["allocations"]["main"]["devices"][RESOURCE])
            assert len(init_dev) == 1 and init_dev[0] in app_devs and len(app_devs) == 2
            first, second = stub.preferred_requests[1:]
            (init_req,) = first.container_requests
            assert list(init_req.must_include_deviceIDs) == [] and init_req.allocation_size == 1
            (app_req,) = second.container_requests
            assert list(app_req.must_include_deviceIDs) == init_dev and app_req.allocation_size == 2
            assert set(init_dev) < set(app_req.available_deviceIDs)
            # The app container's Allocate names the reused device too, as upstream's does.
            assert [sorted(c.devices_ids) for r in stub.allocate_requests[1:] for c in r.container_requests] == [
                init_dev,
                app_devs,
            ]

            # ListAndWatch replaces the device list wholesale; any health but "Healthy" is unhealthy.
            stub.update([pb.Device(ID="dev-0a", health="Healthy"), pb.Device(ID="dev-1a", health="unhealthy")])
            wait_for(lambda: layout.status()["resources"][RESOURCE]["healthy"] == ["dev-0a"], "wholesale update")
            assert layout.status()["resources"][RESOURCE]["unhealthy"] == ["dev-1a"]
        finally:
            stub.stop()
        # The stream ends with the plugin: its devices turn unhealthy, the resource stays until the grace period.
        wait_for(lambda: layout.status()["resources"][RESOURCE]["connected"] is False, "disconnect")
        assert layout.status()["resources"][RESOURCE]["healthy"] == []


def test_options_come_from_get_device_plugin_options_not_the_register_request(stub_layout: Layout) -> None:
    layout = stub_layout
    with Agent(layout.options()):
        stub = Stub(_stub_devices(), layout.plugins / "dp.sock", RESOURCE, pre_start=False, get_preferred=False)
        stub.start()
        try:
            # The RegisterRequest claims both options; the plugin's GetDevicePluginOptions denies them,
            # and the kubelet goes by GetDevicePluginOptions.
            stub.register(
                layout.plugins / "kubelet.sock",
                str(layout.plugins) + "/",
                pb.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True),
            )
            # The Stub's default Allocate answers no container response: the kubelet refuses that.
            layout.write_manifest("empty.yaml", _pod("empty", app=1))
            entry = wait_pod(layout, "empty", "rejected")
            assert "no containers return in allocation response" in entry["message"]
            stub.alloc_func = sample_alloc
            layout.write_manifest("p.yaml", _pod("p", app=1))
            entry = wait_pod(layout, "p", "admitted")
            assert len(entry["allocations"]["main"]["devices"][RESOURCE]) == 1
            assert len(stub.allocate_requests) == 2
            assert stub.preferred_requests == [] and stub.prestart_requests == []
        finally:
            stub.stop()


def test_a_failing_get_preferred_allocation_fails_the_admission_like_upstream(stub_layout: Layout) -> None:
    layout = stub_layout

    def refuse(
        request: pb.PreferredAllocationRequest, devs: dict[str, pb.Device]
    ) -> pb.PreferredAllocationResponse:
        raise ValueError("no preference today")

    with Agent(layout.options()) as agent:
        stub = Stub(_stub_devices(), layout.plugins / "dp.sock", RESOURCE, pre_start=False, get_preferred=True)
        stub.preferred_func = refuse
        stub.start()
        try:
            stub.register(layout.plugins / "kubelet.sock", str(layout.plugins) + "/")
            layout.write_manifest("p.yaml", _pod("p", app=1))
            entry = wait_pod(layout, "p", "rejected")
            assert (
                "device plugin GetPreferredAllocation rpc failed with err: "
                "rpc error: code = Unknown desc = no preference today"
            ) in entry["message"]
            assert stub.allocate_requests == []
            # The kubelet registers the device manager before the CPU and memory managers, so Allocate
            # fails on the device before any CPU or memory is pinned (or counted as pinned).
            assert agent.metrics.value(m.CPU_PINNING_REQUESTS) == 0
            assert agent.metrics.value(m.MEM_PINNING_REQUESTS) == 0
        finally:
            stub.stop()


# -- how the kubelet side reaches a plugin's socket --------------------------------------------------


def _serve_raw(path: Path) -> tuple[RawPlugin, grpc.Server]:
    """A RawPlugin on exactly `path` (a Go plugin's net.Listen takes the path verbatim; gRPC needs it
    percent-encoded to create that very file)."""
    plugin = RawPlugin()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_DevicePluginServicer_to_server(plugin, server)
    path.parent.mkdir(parents=True, exist_ok=True)
    server.add_insecure_port("unix://" + urllib.parse.quote(str(path)))
    server.start()
    assert path.exists()
    return plugin, server


@pytest.mark.parametrize(
    ("endpoint", "socket"),
    [
        ("a#b.sock", "a#b.sock"),
        ("a?b.sock", "a?b.sock"),
        ("50%.sock", "50%.sock"),
        ("dp%41.sock", "dp%41.sock"),
        ("x..y.sock", "x..y.sock"),
        ("sub/p.sock", "sub/p.sock"),
        ("./p.sock", "p.sock"),
        ("/p.sock", "p.sock"),  # Go's filepath.Join: still inside the directory
    ],
)
def test_grpc_endpoints_resolve_as_the_kubelet_joins_them(
    kubelet: FakeKubelet, sock_dir: Path, endpoint: str, socket: str
) -> None:
    plugin, server = _serve_raw(sock_dir / socket)
    try:
        _register(sock_dir, endpoint)
        client = kubelet.server.endpoint(NIC)
        assert client is not None and client.socket_path == sock_dir / socket
        plugin.updates.put(pb.ListAndWatchResponse(devices=[pb.Device(ID="vf0", health="Healthy")]))
        kubelet.wait_for(lambda: kubelet.last_devices(NIC) == [Device("vf0", "Healthy", None)], "devices")
    finally:
        plugin.updates.put(END)
        server.stop(0.1).wait(5)


def test_grpc_socket_path_with_a_comma_is_refused_at_once(kubelet: FakeKubelet, sock_dir: Path) -> None:
    # gRPC's unix resolver splits targets at ',' even when percent-encoded: say so instead of timing out.
    plugin, server = _serve_raw(sock_dir / "a,b.sock")
    try:
        with pytest.raises(grpc.RpcError) as info:
            _register(sock_dir, "a,b.sock")
        # refused by its path, not by a dial that timed out ("context deadline exceeded")
        assert isinstance(info.value, grpc.Call)
        assert (info.value.details() or "").startswith("failed to dial device plugin: socket path")
        assert "contains ','" in (info.value.details() or "")
    finally:
        plugin.updates.put(END)
        server.stop(0.1).wait(5)


def test_grpc_plugin_whose_socket_appears_after_it_registered_is_dialed(kubelet: FakeKubelet, sock_dir: Path) -> None:
    # The kubelet's dial blocks up to 10 s and retries a socket that is not there yet; a plugin that
    # starts serving a moment after it sent Register (another goroutine) is connected.
    started: list[tuple[RawPlugin, grpc.Server]] = []
    # well inside the fixture's dial timeout
    timer = threading.Timer(0.1, lambda: started.append(_serve_raw(sock_dir / "late.sock")))
    timer.start()
    try:
        _register(sock_dir, "late.sock")
        assert [r for r, _ in kubelet.registered] == [NIC]
        started[0][0].updates.put(pb.ListAndWatchResponse(devices=[pb.Device(ID="vf0", health="Healthy")]))
        kubelet.wait_for(lambda: kubelet.last_devices(NIC) is not None, "devices of the late plugin")
    finally:
        timer.join()
        for plugin, server in started:
            plugin.updates.put(END)
            server.stop(0.1).wait(5)


def test_grpc_plugin_that_serves_only_after_register_returns_is_refused_like_upstream(
    kubelet: FakeKubelet, sock_dir: Path
) -> None:
    # Since v1.25 the kubelet dials the plugin inside Register (server.go Register -> connectClient ->
    # dial with grpc.WithBlock): a plugin that listens but serves only once Register returned gets
    # "failed to dial device plugin: context deadline exceeded" when the dial gives up (kubevirt#8451).
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_dir / "lazy.sock"))
    listener.listen(8)
    try:
        with pytest.raises(grpc.RpcError) as info:
            _register(sock_dir, "lazy.sock")
        assert isinstance(info.value, grpc.Call) and info.value.code() == grpc.StatusCode.UNKNOWN
        details = info.value.details() or ""
        assert details.startswith("failed to dial device plugin: context deadline exceeded")
        # the dial ran out its whole timeout (the fixture's), it was not refused early
        assert re.search(r"is not served by a gRPC server after [0-9.]+s", details), details
        assert kubelet.registered == [] and kubelet.server.resources() == []
    finally:
        listener.close()


def test_grpc_register_deadline_bounds_the_dial(sock_dir: Path) -> None:
    # Upstream connects under the Register call's context: once the plugin's own deadline passed, the
    # kubelet stops dialing and registers nothing, even if the socket shows up later.
    kubelet = FakeKubelet(sock_dir, dial_timeout=5.0)
    kubelet.start()
    started: list[tuple[RawPlugin, grpc.Server]] = []
    timer = threading.Timer(1.0, lambda: started.append(_serve_raw(sock_dir / "slow.sock")))
    try:
        timer.start()
        with grpc.insecure_channel(f"unix://{sock_dir}/kubelet.sock") as ch, pytest.raises(grpc.RpcError) as info:
            pb_grpc.RegistrationStub(ch).Register(
                pb.RegisterRequest(version="v1beta1", endpoint="slow.sock", resource_name=NIC), timeout=0.4
            )
        assert isinstance(info.value, grpc.Call) and info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        kubelet.wait_for(lambda: len(kubelet.refused) == 1, "the kubelet side gives up")
        assert kubelet.refused[0][1].startswith("failed to dial device plugin: context deadline exceeded")
        timer.join()
        time.sleep(0.3)
        assert kubelet.registered == [] and kubelet.server.resources() == []
    finally:
        timer.cancel()
        kubelet.stop()
        for plugin, server in started:
            plugin.updates.put(END)
            server.stop(0.1).wait(5)


def test_grpc_plugins_stuck_in_their_dial_do_not_delay_another_registration(sock_dir: Path) -> None:
    # A node agent registering a dozen plugins at once (KubeVirt's virt-handler does) where some are
    # not serving yet: each Register waits for its own dial only, as each has its own goroutine upstream.
    # Ordering shows it: ours is registered while every stuck dial is still waiting (their timeout is
    # long here so that "still waiting" cannot end by chance first).
    kubelet = FakeKubelet(sock_dir, dial_timeout=1.5, call_timeout=5.0)
    kubelet.start()  # a starting kubelet clears the plugin directory: serve raw.sock after it
    raw_plugin, raw_server = _serve_raw(sock_dir / "raw.sock")
    listeners = []
    for i in range(12):
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(sock_dir / f"lazy{i}.sock"))
        s.listen(1)
        listeners.append(s)
    pool = futures.ThreadPoolExecutor(max_workers=12)
    try:
        stuck = [pool.submit(_register, sock_dir, f"lazy{i}.sock") for i in range(12)]
        kubelet.wait_for(lambda: len(kubelet.requests) >= 8, "registrations being dialed")
        _register(sock_dir)  # raw.sock serves
        assert [r for r, _ in kubelet.registered] == [NIC]
        assert not any(f.done() for f in stuck)
        for f in stuck:
            with pytest.raises(grpc.RpcError, match="context deadline exceeded"):
                f.result(timeout=10)
    finally:
        pool.shutdown(wait=True)
        for s in listeners:
            s.close()
        raw_plugin.updates.put(END)
        raw_server.stop(0.1).wait(5)
        kubelet.stop()


def test_grpc_list_and_watch_over_4_mib_ends_the_stream_as_in_the_kubelet(
    kubelet: FakeKubelet, raw_plugin: RawPlugin, sock_dir: Path
) -> None:
    # The kubelet's client keeps gRPC's default 4 MiB receive limit: a bigger snapshot fails Recv
    # (ResourceExhausted), which ends the stream, and the plugin counts as disconnected.
    _register(sock_dir)
    raw_plugin.updates.put(pb.ListAndWatchResponse(devices=[pb.Device(ID="ok", health="Healthy")]))
    kubelet.wait_for(lambda: kubelet.last_devices(NIC) is not None, "a small snapshot")
    huge = pb.ListAndWatchResponse(devices=[pb.Device(ID=f"{i:060d}", health="Healthy") for i in range(70_000)])
    assert huge.ByteSize() > 4 << 20
    raw_plugin.updates.put(huge)
    kubelet.wait_for(lambda: kubelet.disconnected == [NIC], "disconnect after the oversized snapshot")
    assert kubelet.last_devices(NIC) == [Device("ok", "Healthy", None)]
