"""With --wait-for-device-plugins (opt-in; the kubelet does not wait), pods that need a device plugin
wait for it, also after a restart: the device checkpoint makes the resource known before its plugin
re-registers, and admitting then would reject the pod for devices that are merely not back yet. The
kubelet's own answers are in test_agent_kubelet_defaults.py."""

from __future__ import annotations

from integration.agent.conftest import GPU, Layout, gpu_pod, wait_for, wait_pod

from numalign.agent import Agent
from numalign.deviceplugin import Device, DevicePlugin

GPUS = [Device("gpu0", topology=(0,)), Device("gpu1", topology=(1,))]


def _plugin(layout: Layout) -> DevicePlugin:
    plugin = DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, watch_interval=0.1)
    plugin.start()
    return plugin


def test_after_a_restart_a_new_pod_waits_for_the_plugin_to_come_back(layout: Layout) -> None:
    first = Agent(layout.options(wait_for_device_plugins=True))
    first.start()
    plugin = _plugin(layout)
    try:
        layout.write_manifest("keep.yaml", gpu_pod("keep"))
        wait_pod(layout, "keep", "admitted")
    finally:
        plugin.stop()
        first.stop()

    second = Agent(layout.options(wait_for_device_plugins=True))
    second.start()
    try:
        wait_pod(layout, "keep", "admitted")  # restored with its device from the checkpoint
        layout.write_manifest("late.yaml", gpu_pod("late"))
        late = wait_pod(layout, "late", "pending")
        assert late["reason"] == "WaitingForDevicePlugin" and GPU in late["message"]
        plugin = _plugin(layout)
        try:
            entry = wait_pod(layout, "late", "admitted", timeout=10)
            keep = wait_pod(layout, "keep", "admitted")
            got = set(entry["allocations"]["main"]["devices"][GPU])
            held = set(keep["allocations"]["main"]["devices"][GPU])
            assert got and not got & held  # the restored pod's GPU is not handed out twice
        finally:
            plugin.stop()
    finally:
        second.stop()


def test_a_pod_waits_while_its_plugin_is_away(layout: Layout) -> None:
    agent = Agent(layout.options(wait_for_device_plugins=True))
    agent.start()
    try:
        plugin = _plugin(layout)
        layout.write_manifest("one.yaml", gpu_pod("one"))
        wait_pod(layout, "one", "admitted")
        plugin.stop()
        wait_for(lambda: layout.status()["faults"].get("plugin_disconnected"), "disconnect seen")
        layout.write_manifest("two.yaml", gpu_pod("two"))
        wait_pod(layout, "two", "pending")
        plugin = _plugin(layout)
        try:
            wait_pod(layout, "two", "admitted", timeout=10)
        finally:
            plugin.stop()
    finally:
        agent.stop()
