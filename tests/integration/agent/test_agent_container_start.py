"""Starting an admitted pod's containers as the kubelet's pod workers do: PreStartContainer runs off
the agent's lock (a slow plugin holds up nobody else), and a failed start is retried with back-off
until the plugin recovers (the kubelet retries a container start the same way)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import grpc
import pytest
from integration.agent.conftest import GPU, Layout, gpu_pod, pod_status, wait_for, wait_pod

from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.agent import Agent, executor
from numalign.deviceplugin import Device, DevicePlugin

GPUS = [Device(f"gpu{i}", topology=(i,)) for i in range(4)]


def _containers(layout: Layout, name: str, state: str, timeout: float = 5.0) -> dict[str, object]:
    def check() -> dict[str, object] | None:
        e = pod_status(layout, name)
        return e if e is not None and e.get("containers") == state else None

    result: dict[str, object] = wait_for(check, f"containers of {name} {state}", timeout)
    return result


def test_a_slow_pre_start_holds_up_no_other_pod_and_the_pod_is_visible_meanwhile(layout: Layout) -> None:
    release = threading.Event()

    def pre_start(ids: Sequence[str]) -> None:
        release.wait(10)

    agent = Agent(layout.options())
    agent.start()
    try:
        with DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, pre_start=pre_start) as plugin:
            plugin.register()
            wait_for(lambda: len((layout.status().get("resources", {}).get(GPU) or {}).get("healthy", [])) == 4,
                     "gpus")
            layout.write_manifest("slow.yaml", gpu_pod("slow"))
            wait_pod(layout, "slow", "admitted")
            assert pod_status(layout, "slow")["containers"] == "starting"  # type: ignore[index]
            # While its PreStartContainer hangs: another pod is admitted, and PodResources sees both.
            layout.write_manifest("other.yaml", gpu_pod("other", gpus=0))
            wait_pod(layout, "other", "admitted", timeout=3)
            with grpc.insecure_channel(f"unix://{layout.pr_socket}") as ch:
                got = pr_grpc.PodResourcesListerStub(ch).Get(
                    pr.GetPodResourcesRequest(pod_name="slow", pod_namespace="ml"), timeout=3
                ).pod_resources
            assert [d.resource_name for d in got.containers[0].devices] == [GPU]
            release.set()
            _containers(layout, "slow", "started")
    finally:
        release.set()
        agent.stop()


def test_a_failed_pre_start_is_retried_until_the_plugin_recovers(layout: Layout) -> None:
    calls: list[list[str]] = []
    healthy = threading.Event()

    def pre_start(ids: Sequence[str]) -> None:
        calls.append(list(ids))
        if not healthy.is_set():
            raise RuntimeError("device busy")

    agent = Agent(layout.options(start_backoff=0.2, start_backoff_max=0.4))
    agent.start()
    try:
        with DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, pre_start=pre_start) as plugin:
            plugin.register()
            layout.write_manifest("p.yaml", gpu_pod("p"))
            failed = _containers(layout, "p", "failed")
            assert "device busy" in str(failed["container_errors"])
            wait_for(lambda: len(calls) >= 3, "retries with back-off")
            healthy.set()
            started = _containers(layout, "p", "started")
            assert started["container_errors"] == {}
            assert len({tuple(c) for c in calls}) == 1  # always the pod's own devices
    finally:
        agent.stop()


def test_a_start_that_failed_before_a_restart_is_retried_after_it(layout: Layout) -> None:
    healthy = threading.Event()

    def pre_start(ids: Sequence[str]) -> None:
        if not healthy.is_set():
            raise RuntimeError("device busy")

    options = layout.options(start_backoff=60.0)  # no retry within the first run
    first = Agent(options)
    first.start()
    try:
        with DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, pre_start=pre_start) as plugin:
            plugin.register()
            layout.write_manifest("p.yaml", gpu_pod("p"))
            _containers(layout, "p", "failed")
    finally:
        first.stop()
    healthy.set()
    second = Agent(options)
    second.start()
    try:
        with DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, pre_start=pre_start) as plugin:
            plugin.register()
            # The restored pod's containers are started again at start-up. (If that first try comes
            # before the plugin re-registers, PreStart is skipped as upstream skips it for a restored
            # endpoint with no options; either way the failure is not left standing.)
            _containers(layout, "p", "started", timeout=10)
    finally:
        second.stop()


def _fixed_uid_pod(cpus: int) -> str:
    return gpu_pod("same", cpus=cpus).replace("namespace: ml}", "namespace: ml, uid: fixed-uid}")


def test_a_pod_replaced_while_a_retry_is_pending_has_one_retry_chain(layout: Layout) -> None:
    # per attempt: was another retry of the pod pending while it ran? With one retry chain never (the
    # attempt's own timer has fired and the next is scheduled only after it fails); a second chain's
    # timer would be pending during nearly every attempt of the first.
    pending_at_attempt: list[bool] = []

    def pre_start(ids: Sequence[str]) -> None:
        pending_at_attempt.append(agent.scheduled_starts() > 0)
        raise RuntimeError("device busy")

    agent = Agent(layout.options(start_backoff=0.4, start_backoff_max=0.4))
    agent.start()
    try:
        with DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, pre_start=pre_start) as plugin:
            plugin.register()
            layout.write_manifest("p.yaml", _fixed_uid_pod(4))
            _containers(layout, "same", "failed")
            # Same uid, another spec: released and admitted afresh while the first retry is pending.
            layout.write_manifest("p.yaml", _fixed_uid_pod(2))
            wait_for(lambda: (pod_status(layout, "same") or {}).get("record") is not None
                     and pod_status(layout, "same")["allocations"]["main"]["cpus"].count(",") == 1,  # type: ignore[index]
                     "the replacement admitted")
            n = len(pending_at_attempt)
            wait_for(lambda: len(pending_at_attempt) >= n + 4, "four retries of the replacement")
            assert not any(pending_at_attempt[n:]), pending_at_attempt
            assert agent.scheduled_starts() <= 1
    finally:
        agent.stop()


def test_a_start_that_raises_unexpectedly_is_retried(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = Agent(layout.options(start_backoff=0.2, start_backoff_max=0.2))
    agent.start()
    try:
        node = agent.node
        assert node is not None
        real = executor.pre_start_calls
        failures = {"left": 2}

        def flaky(*args: object, **kwargs: object) -> object:
            if failures["left"]:
                failures["left"] -= 1
                raise OSError("disk full")  # not a NumalignError: the worker's last-resort path
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(executor, "pre_start_calls", flaky)
        with DevicePlugin(GPU, GPUS, socket_dir=layout.plugins) as plugin:
            plugin.register()
            layout.write_manifest("p.yaml", gpu_pod("p"))
            _containers(layout, "p", "started", timeout=10)
        assert failures["left"] == 0
        assert layout.status()["faults"]["container_start_error"] >= 2
    finally:
        agent.stop()
