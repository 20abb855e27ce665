"""A plugin replaced while its old process still runs (a rolling upgrade: the new one unlinks the
socket, binds it again and registers): the kubelet dials the new process on a fresh connection. gRPC
Python would otherwise hand the new channel the old process's pooled connection."""

from __future__ import annotations

from pathlib import Path

from integration.grpc.test_grpc_raw_plugin import END, NIC, _register, _serve_raw

from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.deviceplugin.testing import FakeKubelet
from numalign.k8s.deviceplugin import Device


def _devices(*ids: str) -> pb.ListAndWatchResponse:
    return pb.ListAndWatchResponse(devices=[pb.Device(ID=i, health="Healthy") for i in ids])


def test_a_replacement_plugin_on_the_same_socket_is_dialed_not_the_old_process(
    kubelet: FakeKubelet, sock_dir: Path
) -> None:
    path = sock_dir / "dp.sock"
    old, old_server = _serve_raw(path)
    new_server = None
    try:
        _register(sock_dir, "dp.sock")
        old.updates.put(_devices("old0"))
        kubelet.wait_for(lambda: kubelet.last_devices(NIC) == [Device("old0", "Healthy", None)], "old devices")

        path.unlink()  # what a new plugin process does before it binds its socket
        new, new_server = _serve_raw(path)
        _register(sock_dir, "dp.sock")
        new.updates.put(_devices("new0", "new1"))
        kubelet.wait_for(
            lambda: kubelet.last_devices(NIC) == [Device("new0", "Healthy", None), Device("new1", "Healthy", None)],
            "the new process's devices",
        )
        assert new.updates.empty()  # the new process was asked for ListAndWatch
        # The old process exiting now must not take the new registration down with it.
        old.updates.put(END)
        old_server.stop(0.1).wait(5)
        new.updates.put(_devices("new0"))
        kubelet.wait_for(lambda: kubelet.last_devices(NIC) == [Device("new0", "Healthy", None)], "still connected")
        assert NIC not in kubelet.disconnected
    finally:
        old.updates.put(END)
        old_server.stop(0.1).wait(5)
        if new_server is not None:
            new.updates.put(END)
            new_server.stop(0.1).wait(5)
