"""The agent's side of device-plugin registration (a RegistrationListener, called on gRPC threads):
each report goes to the device manager, and to the pod book as an event."""

from __future__ import annotations

import logging

from numalign import metrics as m
from numalign.agent.core import AgentCore
from numalign.agent.endpoints import check_topology
from numalign.agent.events import DevicesReported, PluginRegistered
from numalign.agent.executor import Executor
from numalign.k8s.deviceplugin import Device
from numalign.kubelet.devicemanager.endpoint import Endpoint
from numalign.limits import quote

log = logging.getLogger("numalign.agent")


class PluginListener:
    def __init__(self, core: AgentCore, executor: Executor) -> None:
        self.core = core
        self.executor = executor

    def on_request(self, resource: str) -> None:
        self.core.metrics.inc(m.DP_REGISTRATION, resource_name=resource)

    def on_register(self, resource: str, endpoint: Endpoint) -> None:
        core = self.core
        if core.stopping.is_set():
            return  # shutting down: the final save has been or is being made
        with core.lock:
            core.endpoints[resource] = endpoint
            core.require_node().devices.register_endpoint(resource, endpoint)
            self.executor.dispatch(PluginRegistered(resource))
            log.info("device plugin %s registered", resource)
            core.write_status()

    def on_devices(self, resource: str, devices: list[Device]) -> None:
        core = self.core
        if core.stopping.is_set():
            return  # shutting down: the final save has been or is being made
        node = core.require_node()
        numa_ids = set(node.machine.numa_ids())

        def report(dev: Device, bad: list[int]) -> None:
            core.fault("device_on_missing_numa_node",
                       f"device plugin {resource}: device {dev.id} reports NUMA node(s) {bad}, which this machine "
                       f"lacks (it has {sorted(numa_ids)}); the device is marked unhealthy")

        checked = check_topology(devices, numa_ids, report)
        with core.lock:
            if core.stopping.is_set():
                return
            with node.transaction() as tx:
                node.devices.update_devices(resource, checked)
            core.check(tx, f"device plugin {resource} update")
            self.executor.dispatch(DevicesReported(resource))
            core.after_change()

    def on_disconnect(self, resource: str) -> None:
        core = self.core
        if core.stopping.is_set():
            return  # shutting down: the final save has been or is being made
        with core.lock:
            node = core.require_node()
            with node.transaction() as tx:
                node.devices.plugin_disconnected(resource, core.now(), core.endpoints.get(resource))
            core.fault("plugin_disconnected",
                       f"device plugin {resource} disconnected; its devices are unhealthy until it re-registers "
                       f"(dropped after {core.options.endpoint_grace_period:g}s)")
            core.check(tx, f"device plugin {resource} disconnection")
            core.after_change()

    def on_refused(self, resource: str, message: str) -> None:
        self.core.fault("registration_refused", f"registration of {quote(resource)} refused: {message}")
        with self.core.lock:
            self.core.write_status()

    def on_malformed(self, resource: str, message: str) -> None:
        self.core.fault("malformed_device_update",
                        f"device plugin {resource}: malformed ListAndWatch update: {message}")
        with self.core.lock:
            self.core.write_status()
