"""A run's admission with a device plugin registered with a serve: the plugin's Allocate (real gRPC on
a unix socket) is made while the state directory's transaction lock is free, so an agent sharing the
directory never waits on a plugin; what the plugin answers is what the run records and gets."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from numalign.adapters.statedir.directory import StateDirectory
from numalign.adapters.statedir.layout import TRANSACTION_LOCK_FILE
from numalign.deviceplugin.plugin import DevicePlugin
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.run.plugins import close_plugins, connect_plugins
from numalign.run.records import RunProcesses
from numalign.run.session import RESERVE_ATTEMPTS, RunNode, admit

RESOURCE = "example.com/gpu"
CONFIG = KubeletConfig(cpu_manager_policy="static", reserved_system_cpus="0")
MACHINE = example("dual-socket")


def lock_is_free(state: Path) -> bool:
    """Take the directory's transaction lock without waiting, as another process would (a new open
    file description, so this process's own lock counts as another's)."""
    fd = os.open(state / TRANSACTION_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def burstable(name: str) -> Pod:
    # Shared-pool CPUs and no memory binding: what the run checks is applicable on any host.
    return pod_from_dict({"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"containers": [
        {"name": "main", "resources": {"requests": {"cpu": "100m"},
                                        "limits": {"cpu": "500m", RESOURCE: "1"}}}]}})


def cpu_only(name: str) -> Pod:
    return pod_from_dict({"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"containers": [
        {"name": "main", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}})


@pytest.fixture
def plugin_calls(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[RunNode, list[bool]]]:
    """A run with one plugin whose Allocate notes whether the lock was free; with the `writes` marker
    value N, the first N calls also admit another pod in the directory meanwhile (another process's
    write), and with `fails`, Allocate answers an error."""
    state = tmp_path / "state"
    state.mkdir()
    free_during_allocate: list[bool] = []
    writes = getattr(request, "param", {}).get("writes", 0)
    fails = getattr(request, "param", {}).get("fails", False)

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        free = lock_is_free(state)
        free_during_allocate.append(free)
        if free and len(free_during_allocate) <= writes:
            other = Node(MACHINE, CONFIG, store=StateDirectory(state))
            assert other.admit(cpu_only(f"other{len(free_during_allocate)}")).result.admit
        if fails:
            raise RuntimeError("device reset failed")
        return ContainerAllocateResponse(envs={"GPU_IDS": ",".join(ids)})

    plugin = DevicePlugin(RESOURCE, [Device("gpu0", "Healthy", (0,)), Device("gpu1", "Healthy", (1,))],
                          socket_dir=tmp_path / "dp", allocate=allocate)
    (tmp_path / "dp").mkdir()
    plugin.serve()
    plugins = connect_plugins({RESOURCE: plugin.socket_path})
    try:
        yield RunNode(MACHINE, CONFIG, state, plugins=plugins), free_during_allocate
    finally:
        close_plugins(plugins)
        plugin.stop()


def test_allocate_is_called_with_the_state_lock_free(plugin_calls: tuple[RunNode, list[bool]]) -> None:
    run, free_during_allocate = plugin_calls
    adm = admit(run, burstable("a"), "main", {"pid": 1, "start_time": 0, "command": ["x"]})
    assert adm.record.result.admit, adm.record.result
    assert free_during_allocate == [True]
    (gpu,) = adm.allocation.devices[RESOURCE] if adm.allocation else {}
    assert adm.env == {"GPU_IDS": gpu}
    store = StateDirectory(run.state_dir)
    after = Node(MACHINE, CONFIG, store=store)
    assert list(after.pods) == ["uid-a"] and RunProcesses(store).records["uid-a"]["pid"] == 1
    opts = after.devices.pod_devices.run_container_options("uid-a", "main")
    assert opts is not None and dict(opts.envs) == {"GPU_IDS": gpu}


@pytest.mark.parametrize("plugin_calls", [{"writes": 1}], indirect=True)
def test_a_write_during_allocate_makes_the_run_decide_again(plugin_calls: tuple[RunNode, list[bool]]) -> None:
    # The other write released the reservation (orphans in the kubelet files): the run decides again
    # on what the directory holds now and calls the plugin again.
    run, free_during_allocate = plugin_calls
    adm = admit(run, burstable("a"), "main", {"pid": 1, "start_time": 0, "command": ["x"]})
    assert adm.record.result.admit and free_during_allocate == [True, True]
    after = Node(MACHINE, CONFIG, store=StateDirectory(run.state_dir))
    assert sorted(after.pods) == ["uid-a", "uid-other1"]
    a, other = (set(after.allocation(uid, "main").cpus) for uid in ("uid-a", "uid-other1"))
    assert a.isdisjoint(other) and after.devices.pod_devices.pods() == {"uid-a"}


@pytest.mark.parametrize("plugin_calls", [{"writes": 99}], indirect=True)
def test_a_directory_written_on_every_attempt_is_admitted_holding_the_lock(
    plugin_calls: tuple[RunNode, list[bool]],
) -> None:
    run, free_during_allocate = plugin_calls
    adm = admit(run, burstable("a"), "main", {"pid": 1, "start_time": 0, "command": ["x"]})
    assert adm.record.result.admit
    assert free_during_allocate == [True] * RESERVE_ATTEMPTS + [False]
    after = Node(MACHINE, CONFIG, store=StateDirectory(run.state_dir))
    assert "uid-a" in after.pods and len(after.pods) == RESERVE_ATTEMPTS + 1


@pytest.mark.parametrize("plugin_calls", [{"fails": True}], indirect=True)
def test_a_failing_allocate_is_the_kubelets_rejection_and_nothing_is_held(
    plugin_calls: tuple[RunNode, list[bool]],
) -> None:
    run, free_during_allocate = plugin_calls
    adm = admit(run, burstable("a"), "main", {"pid": 1, "start_time": 0, "command": ["x"]})
    assert not adm.record.result.admit and adm.record.result.reason == "UnexpectedAdmissionError"
    assert "device reset failed" in adm.record.result.message and free_during_allocate == [True]
    store = StateDirectory(run.state_dir)
    after = Node(MACHINE, CONFIG, store=store)
    assert not after.pods and not RunProcesses(store).records and after.devices.pod_devices.pods() == set()
