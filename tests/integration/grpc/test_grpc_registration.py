"""SDK plugin <-> RegistrationServer over real unix sockets."""

from __future__ import annotations

import logging
import os
import socket
import stat
from pathlib import Path

import grpc
import pytest

from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from numalign.adapters.grpc.plugin_client import PluginEndpointClient
from numalign.adapters.grpc.registration import RegistrationServer, cleanup_plugin_directory
from numalign.deviceplugin import HEALTHY, UNHEALTHY, ContainerAllocateResponse, Device, DevicePlugin, Mount
from numalign.deviceplugin.testing import FakeKubelet, KubeletRecorder
from numalign.errors import InvalidInputError, PluginError
from numalign.k8s.deviceplugin import DevicePluginOptions
from numalign.kubelet.devicemanager.endpoint import Endpoint

GPU = "example.com/gpu"


def _devices() -> list[Device]:
    return [Device("gpu0", HEALTHY, (0,)), Device("gpu1", HEALTHY, (1,)), Device("gpu2", HEALTHY, None)]


def test_grpc_register_then_list_and_watch_feeds_callbacks(kubelet: FakeKubelet, sock_dir: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    plugin = DevicePlugin(
        GPU,
        _devices(),
        socket_dir=sock_dir,
        allocate=lambda ids: ContainerAllocateResponse(
            envs={"GPUS": ",".join(ids)},
            mounts=(Mount("/dev/x", "/host/x", True),),
            cdi_devices=("example.com/gpu=a",),
        ),
        get_preferred_allocation=lambda avail, must, size: (
            list(must) + [a for a in avail if a not in must][: size - len(must)]
        ),
    )
    try:
        plugin.start()
        kubelet.wait_for(lambda: kubelet.last_devices(GPU) is not None, "first ListAndWatch snapshot")
        assert [r for r, _ in kubelet.registered] == [GPU]
        assert kubelet.last_devices(GPU) == _devices()  # None topology stays None, (0,) stays (0,)

        endpoint = kubelet.server.endpoint(GPU)
        assert endpoint is not None
        assert endpoint.options.get_preferred_allocation_available
        assert not endpoint.options.pre_start_required
        resp = endpoint.allocate(["gpu0", "gpu1"])
        assert dict(resp.envs) == {"GPUS": "gpu0,gpu1"}
        assert resp.mounts == (Mount("/dev/x", "/host/x", True),)
        assert resp.cdi_devices == ("example.com/gpu=a",)
        assert endpoint.get_preferred_allocation(["gpu0", "gpu1", "gpu2"], ["gpu2"], 2) == ["gpu2", "gpu0"]
        with pytest.raises(PluginError, match=r"^rpc error: code = Unknown desc = Allocate: unknown devices"):
            endpoint.allocate(["nope"])

        # A health change and a topology change are pushed as full snapshots.
        plugin.set_health("gpu1", UNHEALTHY)
        kubelet.wait_for(
            lambda: (kubelet.last_devices(GPU) or [Device("x")])[1].health == UNHEALTHY, "health update"
        )
        plugin.update_devices([Device("gpu0", HEALTHY, ())])
        kubelet.wait_for(lambda: kubelet.last_devices(GPU) == [Device("gpu0", HEALTHY, ())], "empty topology")
    finally:
        plugin.stop()
    kubelet.wait_for(lambda: kubelet.disconnected == [GPU], "disconnect after the plugin stops")
    assert kubelet.server.endpoint(GPU) is None
    said = [r for r in caplog.records if r.levelno >= logging.WARNING and "disconnected" in r.getMessage()]
    assert len(said) == 1, said  # once, by the plugin's client (the registration server said it again before)


def test_grpc_sockets_are_0600_and_stale_sockets_are_cleaned(
    sock_dir: Path, recorder: KubeletRecorder
) -> None:
    stale = sock_dir / "old-plugin.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    (sock_dir / "kubelet_internal_checkpoint").write_text("{}")
    (sock_dir / "notes.txt").write_text("keep")
    (sock_dir / "subdir").mkdir()
    server = RegistrationServer(sock_dir, listener=recorder)
    server.start()
    try:
        assert not stale.exists()
        assert {p.name for p in sock_dir.iterdir()} == {
            "kubelet.sock",
            "kubelet_internal_checkpoint",
            "notes.txt",
            "subdir",
        }
        mode = (sock_dir / "kubelet.sock").stat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        with DevicePlugin(GPU, _devices(), socket_dir=sock_dir, socket_name="p.sock") as plugin:
            assert stat.S_IMODE((sock_dir / "p.sock").stat().st_mode) == 0o600
            assert plugin.registrations == 1
    finally:
        server.stop(grace=0.2)
    assert not (sock_dir / "kubelet.sock").exists()


def test_grpc_cleanup_keeps_only_non_sockets(sock_dir: Path) -> None:
    for name in ("a.sock", "kubelet_internal_checkpoint"):
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(sock_dir / name))
        s.close()
    (sock_dir / "file").write_text("x")
    removed = cleanup_plugin_directory(sock_dir)
    assert [p.name for p in removed] == ["a.sock"]
    assert sorted(p.name for p in sock_dir.iterdir()) == ["file", "kubelet_internal_checkpoint"]


def _raw_register(sock_dir: Path, version: str, resource: str, endpoint: str) -> grpc.RpcError | None:
    with grpc.insecure_channel(f"unix://{sock_dir}/kubelet.sock") as ch:
        stub = pb_grpc.RegistrationStub(ch)
        try:
            stub.Register(
                pb.RegisterRequest(version=version, endpoint=endpoint, resource_name=resource), timeout=5
            )
        except grpc.RpcError as e:
            return e
    return None


@pytest.mark.parametrize(
    ("version", "resource", "endpoint", "message"),
    [
        (
            "v1alpha1",
            GPU,
            "p.sock",
            'requested API version "v1alpha1" is not supported by kubelet. Supported version is ["v1beta1"]',
        ),
        (
            "",
            GPU,
            "p.sock",
            'requested API version "" is not supported by kubelet. Supported version is ["v1beta1"]',
        ),
        ("v1beta1", "gpu", "p.sock", 'the ResourceName "gpu" is invalid'),
        ("v1beta1", "kubernetes.io/gpu", "p.sock", 'the ResourceName "kubernetes.io/gpu" is invalid'),
        (
            "v1beta1",
            "requests.example.com/gpu",
            "p.sock",
            'the ResourceName "requests.example.com/gpu" is invalid',
        ),
        ("v1beta1", "Example.com/gpu", "p.sock", 'the ResourceName "Example.com/gpu" is invalid'),
        ("v1beta1", "example.com/gpu\n", "p.sock", 'the ResourceName "example.com/gpu\\n" is invalid'),
        (
            "v1beta1",
            GPU,
            "../p.sock",
            'the endpoint "../p.sock" of device plugin "example.com/gpu" is invalid',
        ),
        ("v1beta1", GPU, "..", 'the endpoint ".." of device plugin "example.com/gpu" is invalid'),
        ("v1beta1", GPU, "", 'the endpoint "" of device plugin "example.com/gpu" is invalid'),
        ("v1beta1", GPU, ".", 'the endpoint "." of device plugin "example.com/gpu" is invalid'),
        (
            "v1beta1",
            GPU,
            "kubelet.sock",
            'the endpoint "kubelet.sock" of device plugin "example.com/gpu" is invalid',
        ),
        (
            "v1beta1",
            GPU,
            "kubelet_internal_checkpoint",
            'the endpoint "kubelet_internal_checkpoint" of device plugin "example.com/gpu" is invalid',
        ),
        # upstream's text after its blocking dial gives up (the fixture's dial timeout is 2 s)
        ("v1beta1", GPU, "missing.sock", "failed to dial device plugin: context deadline exceeded"),
        # Go's filepath.Join treats a leading '/' as part of a relative path: this is <dir>/tmp/p.sock
        ("v1beta1", GPU, "/tmp/p.sock", "failed to dial device plugin: context deadline exceeded"),
    ],
)
def test_grpc_invalid_registrations_are_refused(
    kubelet: FakeKubelet,
    recorder: KubeletRecorder,
    sock_dir: Path,
    version: str,
    resource: str,
    endpoint: str,
    message: str,
) -> None:
    err = _raw_register(sock_dir, version, resource, endpoint)
    assert err is not None
    assert isinstance(err, grpc.Call)
    assert err.code() == grpc.StatusCode.UNKNOWN  # a plain Go error from the kubelet's handler
    assert (err.details() or "").startswith(message)
    assert kubelet.registered == []
    assert kubelet.requests == [resource]  # counted before validation, like the kubelet's metric
    assert [r for r, _ in kubelet.refused] == [resource]
    assert kubelet.server.resources() == []


@pytest.mark.parametrize("field", ["version", "resource", "endpoint"])
def test_grpc_huge_registration_fields_are_quoted_bounded(kubelet: FakeKubelet, sock_dir: Path, field: str) -> None:
    """A 10 kB field echoed whole would exceed gRPC's metadata limit (the plugin would see
    RESOURCE_EXHAUSTED); the refusal quotes a bounded prefix and says how long the value was."""
    huge = "v" * 10_000
    args = {"version": "v1beta1", "resource": GPU, "endpoint": "p.sock"} | {field: huge}
    err = _raw_register(sock_dir, args["version"], args["resource"], args["endpoint"])
    assert isinstance(err, grpc.Call)
    assert err.code() == grpc.StatusCode.UNKNOWN
    details = err.details() or ""
    assert "... (10000 characters)" in details and len(details) < 600
    assert kubelet.registered == []


def test_grpc_reregistration_replaces_endpoint(kubelet: FakeKubelet, sock_dir: Path) -> None:
    first = DevicePlugin(GPU, [Device("a", HEALTHY, (0,))], socket_dir=sock_dir, socket_name="first.sock")
    second = DevicePlugin(GPU, [Device("b", HEALTHY, (1,))], socket_dir=sock_dir, socket_name="second.sock")
    try:
        first.start()
        kubelet.wait_for(
            lambda: kubelet.last_devices(GPU) == [Device("a", HEALTHY, (0,))], "first plugin's devices"
        )
        second.start()
        kubelet.wait_for(
            lambda: kubelet.last_devices(GPU) == [Device("b", HEALTHY, (1,))], "second plugin's devices"
        )
        endpoint = kubelet.server.endpoint(GPU)
        assert isinstance(endpoint, PluginEndpointClient)
        assert endpoint.socket_path.name == "second.sock"
        # The replaced plugin's updates and its exit no longer affect the resource.
        first.update_devices([Device("zzz")])
        first.stop()
        kubelet.wait_for(lambda: len(kubelet.registered) == 2, "two registrations")
        assert kubelet.disconnected == []
        assert kubelet.last_devices(GPU) == [Device("b", HEALTHY, (1,))]
        assert second.devices == (Device("b", HEALTHY, (1,)),)
        assert kubelet.server.endpoint(GPU) is endpoint
    finally:
        first.stop()
        second.stop()
    kubelet.wait_for(lambda: kubelet.disconnected == [GPU], "disconnect of the current plugin")


def test_grpc_plugin_reregisters_when_kubelet_restarts(sock_dir: Path, recorder: KubeletRecorder) -> None:
    def make() -> RegistrationServer:
        return RegistrationServer(
            sock_dir,
            listener=recorder,
            dial_timeout=2.0,
        )

    server = make()
    server.start()
    plugin = DevicePlugin(GPU, _devices(), socket_dir=sock_dir, watch_interval=0.05)
    try:
        plugin.start()
        recorder.wait_for(lambda: len(recorder.devices) == 1, "first snapshot")
        server.stop(grace=0.1)
        # A new kubelet: removes the plugin's socket at start, then serves a new kubelet.sock.
        server = make()
        server.start()
        assert not plugin.socket_path.exists() or plugin.registrations >= 2
        recorder.wait_for(lambda: len(recorder.registered) == 2, "re-registration", timeout=8)
        recorder.wait_for(lambda: len(recorder.devices) == 2, "snapshot after re-registration")
        assert recorder.last_devices(GPU) == _devices()
        recorder.wait_for(lambda: plugin.registrations == 2, "the plugin sees its Register succeed")
        assert plugin.socket_path.exists()
    finally:
        plugin.stop()
        server.stop(grace=0.1)


def test_grpc_hung_plugin_hits_deadlines(kubelet: FakeKubelet, sock_dir: Path) -> None:
    import threading

    release = threading.Event()

    def slow_allocate(ids: object) -> ContainerAllocateResponse:
        release.wait(5)
        return ContainerAllocateResponse()

    plugin = DevicePlugin(GPU, _devices(), socket_dir=sock_dir, allocate=slow_allocate)
    try:
        plugin.start()
        endpoint = kubelet.server.endpoint(GPU)
        assert isinstance(endpoint, PluginEndpointClient)
        endpoint.call_timeout = 0.3
        with pytest.raises(
            PluginError, match=r"^rpc error: code = DeadlineExceeded desc = context deadline exceeded$"
        ):
            endpoint.allocate(["gpu0"])
    finally:
        release.set()
        plugin.stop()


def test_grpc_socket_group_gives_0660(sock_dir: Path) -> None:
    gid = os.getgid()
    server = RegistrationServer(sock_dir, socket_group=gid)
    server.start()
    try:
        st = (sock_dir / "kubelet.sock").stat()
        assert stat.S_IMODE(st.st_mode) == 0o660
        assert st.st_gid == gid
    finally:
        server.stop(grace=0.1)


def test_grpc_endpoint_client_implements_the_device_manager_protocol(
    kubelet: FakeKubelet, sock_dir: Path
) -> None:
    with DevicePlugin(GPU, _devices(), socket_dir=sock_dir, pre_start=lambda ids: None) as plugin:
        endpoint = kubelet.endpoint(GPU)
        assert isinstance(endpoint, Endpoint)
        assert endpoint.options == DevicePluginOptions(pre_start_required=True)
        assert plugin.options == endpoint.options
        endpoint.pre_start_container(["gpu0"])
        assert endpoint.get_preferred_allocation(["gpu0"], [], 1) == []  # not offered: empty answer


def test_grpc_sdk_refuses_bad_device_lists_and_names(sock_dir: Path) -> None:
    with pytest.raises(InvalidInputError, match="not an extended resource name"):
        DevicePlugin("gpu", [], socket_dir=sock_dir)
    for bad in ("../x.sock", "a/b.sock", "kubelet.sock", ""):
        with pytest.raises(InvalidInputError, match="socket name"):
            DevicePlugin(GPU, [], socket_dir=sock_dir, socket_name=bad)
    plugin = DevicePlugin(GPU, [], socket_dir=sock_dir)
    with pytest.raises(InvalidInputError, match="listed twice"):
        plugin.update_devices([Device("a"), Device("a")])
    with pytest.raises(InvalidInputError, match="unknown device"):
        plugin.set_health("zz", UNHEALTHY)
    with pytest.raises(PluginError, match=r"kubelet\.sock' does not exist"):
        plugin.register()  # no kubelet: fails at once, no 10 s wait


def test_grpc_plugin_restart_registers_again(kubelet: FakeKubelet, sock_dir: Path) -> None:
    first = DevicePlugin(GPU, _devices(), socket_dir=sock_dir)
    first.start()
    kubelet.wait_for(lambda: len(kubelet.devices) == 1, "first snapshot")
    first.stop()
    kubelet.wait_for(lambda: kubelet.disconnected == [GPU], "disconnect")
    # The same plugin comes back (same socket name) with one device gone.
    with DevicePlugin(GPU, _devices()[:2], socket_dir=sock_dir):
        kubelet.wait_for(
            lambda: kubelet.last_devices(GPU) == _devices()[:2], "snapshot of the restarted plugin"
        )
        assert [r for r, _ in kubelet.registered] == [GPU, GPU]
        assert kubelet.server.resources() == [GPU]
        assert kubelet.endpoint(GPU).allocate(["gpu0"]).envs == {}


@pytest.mark.parametrize(
    ("endpoint", "resolved"),
    [
        ("p.sock", "dp/p.sock"),
        ("sub/p.sock", "dp/sub/p.sock"),
        ("/p.sock", "dp/p.sock"),
        ("a\\b.sock", "dp/a\\b.sock"),  # a plain character in a Linux file name
        ("sub/kubelet.sock", "dp/sub/kubelet.sock"),
        ("../dp/p.sock", "dp/p.sock"),
        ("../p.sock", None),
        ("./kubelet.sock", None),
        ("", None),
        ("p\x00.sock", None),
    ],
)
def test_grpc_endpoint_joins_like_go_filepath_join_even_under_a_dotdot_directory(
    sock_dir: Path, endpoint: str, resolved: str | None
) -> None:
    server = RegistrationServer(sock_dir / "x" / ".." / "dp")
    if resolved is None:
        with pytest.raises(PluginError, match=r"^the endpoint .* is invalid: "):
            server.resolve_endpoint(GPU, endpoint)
    else:
        assert server.resolve_endpoint(GPU, endpoint) == sock_dir / resolved
