"""A node: the machine, the kubelet configuration, the Topology Manager and its three providers, and
the kubelet's state files. This is what `numalign admit` and `numalign serve` drive.

Providers are registered in the order CPU, memory, devices; the order changes only the decision
record's layout, never the decision (the merge is a total order).

Rejected pods: the kubelet leaves the partial allocations of a rejected pod in place until its next
removeStaleState pass drops them (the pod is not active); we release them at once, which is the state
the kubelet reaches before it admits anything else.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numalign import metrics as m
from numalign.admission.eviction import NodeCondition
from numalign.admit_handlers import AdmitHandlers
from numalign.core.decision import AdmitResult, DecisionRecord
from numalign.core.numa import NUMAInfo
from numalign.errors import CheckpointError, InvalidInputError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY
from numalign.machine.cpuset import format_cpuset
from numalign.machine.topology import Machine
from numalign.manager import TopologyManager
from numalign.providers.cpu.manager import new_cpu_manager_policy
from numalign.providers.cpu.policy_static import StaticPolicy
from numalign.providers.cpu.topology import CPUTopology
from numalign.providers.devices.endpoint import Device
from numalign.providers.devices.manager import DeviceManager
from numalign.providers.memory.manager import new_memory_manager
from numalign.providers.memory.policy_static import MemoryManagerStatic
from numalign.providers.memory.reserved import MemoryReservation

log = logging.getLogger("numalign.node")

PODS_FILE = "numalign_pods.json"


def numa_info_for(machine: Machine) -> NUMAInfo:
    """The kubelet's NUMAInfo: node ids in cadvisor order, distance rows indexed by node id.

    Machine rows are indexed by position (as sysfs writes them); upstream indexes them by node id,
    which is the same for contiguous ids. For sparse ids the kubelet would index past the row; we map
    positions to ids instead so such machines still work."""
    order = machine.cadvisor_numa_order()
    rows = machine.distance_matrix()
    if rows is None:
        return NUMAInfo.create(order)
    ids = machine.numa_ids()
    width = max(ids) + 1
    by_id: dict[int, list[int]] = {}
    for node, row in rows.items():
        full = [0] * width
        for pos, target in enumerate(ids):
            full[target] = row[pos]
        by_id[node] = full
    return NUMAInfo.create(order, by_id)


@dataclass
class ContainerAllocation:
    cpus: list[int] = field(default_factory=list)
    exclusive: bool = False
    memory: list[dict[str, Any]] = field(default_factory=list)
    devices: dict[str, dict[str, list[int] | None]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpus": format_cpuset(self.cpus),
            "exclusive_cpus": self.exclusive,
            "memory": self.memory,
            "devices": self.devices,
        }


class Node:
    def __init__(
        self,
        machine: Machine,
        config: KubeletConfig,
        *,
        state_dir: Path | None = None,
        metrics: m.Metrics | None = None,
        static_devices: bool = True,
        read_only: bool = False,
        node_conditions: Sequence[NodeCondition] = (),
    ) -> None:
        # read_only: the state files are read at start and never written (a what-if on a live
        # node's /var/lib/kubelet must not touch the kubelet's own files).
        self.read_only = read_only
        # The kubelet validates its configuration before it builds any manager; a library caller gets
        # the same refusal (and the CLI, which validated already, no second pass).
        config.validate()
        self.machine = machine
        self.config = config
        self.metrics = metrics or m.Metrics()
        self.numa = numa_info_for(machine)
        self.tm = TopologyManager(
            self.numa,
            config.topology_manager_policy,
            config.topology_manager_scope,
            config.topology_manager_policy_options,
            config.feature_gates,
            self.metrics,
        )
        # GetNodeAllocatableReservation against the node's capacity (cadvisor: NumCores online CPUs,
        # MemoryCapacity = the NUMA nodes' memory), so percentage eviction thresholds resolve.
        capacity = {
            RESOURCE_CPU: Quantity.from_int(len(machine.online_cpus())),
            RESOURCE_MEMORY: Quantity.from_int(
                sum(machine.memory_by_node().values()), QuantityFormat.BINARY_SI
            ),
        }
        reservation = config.node_allocatable_reservation(capacity)
        self.cpu = new_cpu_manager_policy(
            config.cpu_manager_policy,
            CPUTopology.from_machine(machine),
            reserved_cpu=reservation.get("cpu"),
            reserved_system_cpus=config.reserved_cpus(),
            policy_options=config.cpu_manager_policy_options,
            feature_gates=config.feature_gates,
            topology_manager_policy=config.topology_manager_policy,
            affinity=self.tm,
        )
        self.memory = new_memory_manager(
            config.memory_manager_policy,
            machine,
            reservation,
            [MemoryReservation(r.numa_node, dict(r.limits)) for r in config.reserved_memory],
            affinity=self.tm,
        )
        self.devices = DeviceManager(machine.numa_ids(), self.tm)
        self.static_devices = static_devices
        if static_devices:
            self._register_static_plugins()
        # The kubelet's container manager registers the device manager, then the CPU manager, then the
        # memory manager (container_manager_linux.go); hints are listed and Allocate is called in
        # that order, so a device failure stops admission before any CPU or memory is pinned.
        for provider in (self.devices, self.cpu, self.memory):
            self.tm.add_hint_provider(provider)
        self.pods: dict[str, Pod] = {}
        self.records: dict[str, DecisionRecord] = {}
        self.state_dir = state_dir
        # The kubelet's other admit handlers, run before and after the Topology Manager's.
        self.handlers = AdmitHandlers(self, node_conditions)
        self._start()

    def _register_static_plugins(self) -> None:
        for resource, devs in sorted(self.machine.devices_by_resource().items()):
            self.devices.add_static_plugin(resource, [Device(d.id, d.health, d.numa_nodes) for d in devs])

    # ---- state -----------------------------------------------------------------------------------
    def _start(self) -> None:
        from numalign.providers.cpu.state import CPUManagerState

        if self.state_dir is None:
            if isinstance(self.cpu, StaticPolicy):
                self.cpu.start()
            if isinstance(self.memory, MemoryManagerStatic):
                self.memory.start()
            return
        from numalign.adapters.checkpoints import CheckpointStore
        from numalign.state.memory_checkpoint import memory_checkpoint_to_document

        store = CheckpointStore.under(self.state_dir)
        # The kubelet opens both managers' checkpoints whatever the policy (the none policies included),
        # so a file written under another policy is refused here too, never silently ignored.
        cp = store.load_cpu(policy_name=self.cpu.policy_name)
        if isinstance(self.cpu, StaticPolicy):
            if cp is None:
                self.cpu.start()
            else:
                self.cpu.start(CPUManagerState.from_strings(cp.policy_name, cp.default_cpu_set, cp.entries))
        mcp = store.load_memory(policy_name=self.memory.policy_name)
        if isinstance(self.memory, MemoryManagerStatic):
            if mcp is None:
                self.memory.start()
            else:
                self.memory.restore(memory_checkpoint_to_document(mcp))
        dcp = store.load_devices()
        if dcp is not None:
            self._restore_devices(dcp)
        self._load_pods()

    def _restore_devices(self, dcp: Any) -> None:
        from numalign.adapters.grpc.convert import allocate_response_from_pb
        from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
        from numalign.state.device_checkpoint import device_checkpoint_to_document

        doc = device_checkpoint_to_document(dcp)
        for entry in doc["PodDeviceEntries"] or []:
            raw = entry.get("AllocResp")
            entry["AllocResp"] = allocate_response_from_pb(pb.ContainerAllocateResponse.FromString(raw or b""))
        self.devices.restore(doc, now=0.0)
        if self.static_devices:
            # In-process plugins register again at once, as real plugins re-register with a restarted kubelet.
            self._register_static_plugins()

    def _load_pods(self) -> None:
        assert self.state_dir is not None
        path = self.state_dir / PODS_FILE
        if not path.exists():
            return
        from numalign.k8s.manifest import pod_from_dict

        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            for obj in data.get("pods", []):
                pod = pod_from_dict(obj["manifest"], f"{path}: pods")
                self.pods[pod.uid] = pod
        except (ValueError, KeyError, TypeError, InvalidInputError) as e:
            raise CheckpointError(
                f"{path}: cannot read numalign's pod list ({e}); expected the file numalign wrote. "
                "Fix: restore it from backup, or remove it together with the kubelet state files in "
                f"{self.state_dir} to start from an empty node"
            ) from None

    def save(self) -> None:
        """Write every state file atomically (kubelet formats; numalign's own pod list beside them)."""
        if self.state_dir is None or self.read_only:
            return
        from numalign.adapters.checkpoints import CheckpointStore, write_atomic
        from numalign.state.cpu_checkpoint import CPUManagerCheckpoint
        from numalign.state.memory_checkpoint import memory_checkpoint_from_document

        self.state_dir.mkdir(parents=True, exist_ok=True)
        store = CheckpointStore.under(self.state_dir)
        if isinstance(self.cpu, StaticPolicy):
            store.save_cpu(CPUManagerCheckpoint(*self.cpu.snapshot().to_strings()), force=True)
        else:
            # What the kubelet's none policy leaves: its name and an empty default set.
            store.save_cpu(CPUManagerCheckpoint(self.cpu.policy_name, ""), force=True)
        if isinstance(self.memory, MemoryManagerStatic):
            store.save_memory(memory_checkpoint_from_document(self.memory.snapshot()), force=True)
        else:
            store.save_memory(
                memory_checkpoint_from_document({"policyName": self.memory.policy_name, "machineState": {}}),
                force=True,
            )
        store.device_path.parent.mkdir(parents=True, exist_ok=True)
        store.save_devices(self._device_checkpoint(), force=True)
        pods = [{"uid": p.uid, "manifest": pod_to_manifest(p)} for p in self.pods.values()]
        write_atomic(self.state_dir / PODS_FILE, json.dumps({"pods": pods}, indent=1, sort_keys=True).encode())

    def _device_checkpoint(self) -> Any:
        from numalign.adapters.grpc.convert import allocate_response_to_pb
        from numalign.state.device_checkpoint import device_checkpoint_from_document

        snap = self.devices.snapshot()
        entries = []
        for e in snap.get("PodDeviceEntries") or []:
            e = dict(e)
            e["AllocResp"] = allocate_response_to_pb(e["AllocResp"]).SerializeToString()
            entries.append(e)
        return device_checkpoint_from_document(
            {"PodDeviceEntries": entries, "RegisteredDevices": snap.get("RegisteredDevices", {})}
        )

    # ---- pods --------------------------------------------------------------------------------------
    def admit(self, pod: Pod) -> DecisionRecord:
        if pod.uid in self.pods:
            raise InvalidInputError(
                f"pod {pod.key} (uid {pod.uid}) is already admitted on this node; give the new pod another "
                "name or metadata.uid (Node.remove(uid) releases the old one; with `numalign admit "
                "--state-dir`, start from a fresh directory or use --dry-run to ask without keeping pods)"
            )
        if pod.has_pod_level_resources and not self.config.feature_gate_enabled("PodLevelResources"):
            # The kubelet's isPodLevelResourcesSupported admit handler; numalign checks it first (the
            # kubelet may run the Topology Manager's handler before it, with the same final verdict).
            self.metrics.inc(m.ADMISSION_REJECTIONS, reason="Other")  # not one of the kubelet's named reasons
            return DecisionRecord(
                pod.key, pod.uid, self.tm.policy_name, self.tm.scope_name, dict(self.tm.options), (),
                AdmitResult(False, "PodLevelResourcesNotSupported", "PodLevelResources feature gate is disabled"),
            )
        early = self.handlers.before_topology(self, pod)
        if not early.admit:
            return DecisionRecord(pod.key, pod.uid, self.tm.policy_name, self.tm.scope_name, dict(self.tm.options),
                                  (), early)
        rec = self.tm.admit(pod)
        self._sync_provider_metrics()
        if rec.result.admit:
            late = self.handlers.after_topology(self, pod)
            if not late.admit:
                rec = dataclasses.replace(rec, result=late)
        if rec.result.admit:
            self.pods[pod.uid] = pod
            for c in pod.all_containers():
                self.tm.add_container(pod, c, f"{pod.uid}/{c.name}")
            if isinstance(self.memory, MemoryManagerStatic):
                # Containers start in order; starting one releases earlier regular init containers'
                # memory (upstream memory manager AddContainer).
                for c in pod.all_containers():
                    self.memory.add_container(pod, c)
        else:
            self.tm.remove_pod(pod)
        rec = DecisionRecord(
            rec.pod, rec.pod_uid, rec.policy, rec.scope, rec.options, rec.decisions, rec.result,
            {c.name: self.allocation(pod.uid, c.name).to_dict() for c in pod.all_containers()}
            if rec.result.admit else {},
        )
        if rec.result.admit:
            self.records[pod.uid] = rec
        self.save()
        return rec

    def _sync_provider_metrics(self) -> None:
        """Providers count pinning requests/errors as plain attributes (pure code); publish the deltas."""
        for provider, req_name, err_name in (
            (self.cpu, m.CPU_PINNING_REQUESTS, m.CPU_PINNING_ERRORS),
            (self.memory, m.MEM_PINNING_REQUESTS, m.MEM_PINNING_ERRORS),
        ):
            for attr, name in (("pinning_requests_total", req_name), ("pinning_errors_total", err_name)):
                now = int(getattr(provider, attr, 0))
                delta = now - int(self.metrics.value(name))
                if delta > 0:
                    self.metrics.inc(name, float(delta))

    def remove(self, pod_uid: str) -> Pod:
        pod = self.pods.pop(pod_uid, None)
        if pod is None:
            raise InvalidInputError(f"no pod with uid {pod_uid} on this node")
        self.tm.remove_pod(pod)
        self.devices.remove_pod(pod.uid)
        self.records.pop(pod_uid, None)
        self.save()
        return pod

    def allocation(self, pod_uid: str, container: str) -> ContainerAllocation:
        out = ContainerAllocation()
        if isinstance(self.cpu, StaticPolicy):
            own = self.cpu.get_cpu_set(pod_uid, container)
            out.exclusive = own is not None
            out.cpus = sorted(self.cpu.cpus_for_container(pod_uid, container))
        else:
            out.cpus = sorted(self.machine.online_cpus())
        blocks = self.memory.get_memory(pod_uid, container) or []
        out.memory = [{"type": b.type, "size": b.size, "numa_nodes": list(b.numa_affinity)} for b in blocks]
        devs = self.devices.get_container_devices(pod_uid, container) or {}
        out.devices = {
            res: {d: (None if dev.topology is None else list(dev.topology)) for d, dev in sorted(ids.items())}
            for res, ids in sorted(devs.items())
        }
        return out


def pod_to_manifest(pod: Pod) -> dict[str, Any]:
    """A minimal Pod manifest that reads back into the same Pod (for numalign's pod list)."""

    def res(c: Any) -> dict[str, Any]:
        return {
            "requests": {k: str(v) for k, v in c.requests.items()},
            "limits": {k: str(v) for k, v in c.limits.items()},
        }

    def ctr(c: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"name": c.name, "resources": res(c)}
        if c.restart_policy:
            out["restartPolicy"] = c.restart_policy
        return out

    spec: dict[str, Any] = {
        "containers": [ctr(c) for c in pod.containers],
    }
    if pod.init_containers:
        spec["initContainers"] = [ctr(c) for c in pod.init_containers]
    if pod.overhead:
        spec["overhead"] = {k: str(v) for k, v in pod.overhead.items()}
    if pod.has_pod_spec_resources:
        spec["resources"] = {
            "requests": {k: str(v) for k, v in (pod.pod_requests or {}).items()},
            "limits": {k: str(v) for k, v in (pod.pod_limits or {}).items()},
        }
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "spec": spec,
    }
    if pod.status_qos_class:
        manifest["status"] = {"qosClass": pod.status_qos_class}
    return manifest
