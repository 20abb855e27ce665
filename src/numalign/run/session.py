"""A run's allocation in the shared state directory: admitted, and later released, each inside one
transaction (load, decide, write), so `numalign run` processes and `numalign serve` never see or
write half a change. A run takes no owner lock: it shares the directory with an agent and other runs.

Every time a run opens the directory, the pods of runs whose process ended without releasing them
(kill -9) are released first, together with the cgroup they left behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numalign.adapters.statedir.directory import StateDirectory
from numalign.core.decision import ContainerAllocation, DecisionRecord
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.deviceplugin import Device
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Pod
from numalign.k8s.previews import NO_PREVIEWS, Previews
from numalign.k8s.version import DEFAULT as DEFAULT_KUBELET_VERSION
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.node import Node
from numalign.kubelet.plan import Plan
from numalign.machine.topology import Machine
from numalign.run.affinity import PlacementError, allowed_cpus, allowed_mems
from numalign.run.cgroup import remove_cgroup
from numalign.run.devices import allocate_fn
from numalign.run.leftovers import process_alive_reclaiming
from numalign.run.plugins import ConnectedPlugin
from numalign.run.process import ProcessRef
from numalign.run.reconcile import reconcile_shared_pool
from numalign.run.records import RunProcesses

log = logging.getLogger("numalign.run")


def _alive_or(own: ProcessRef) -> Callable[[Mapping[str, Any]], bool]:
    """process_alive, except that `own`'s record (same pid and start time: the pair that tells a reused
    pid apart) counts as alive."""

    def alive(record: Mapping[str, Any]) -> bool:
        return ((record.get("pid") == own.pid and record.get("start_time") == own.start_time)
                or process_alive_reclaiming(record))

    return alive


def _remove_leftovers(runs: RunProcesses) -> list[str]:
    """Ended runs' cgroups go with their pods; what still runs in them ends, as a container's processes do.
    Each load's reclaimed pods are taken once: a transaction that did not read the directory again has
    none left."""
    reclaimed, runs.reclaimed = runs.reclaimed, []
    for pod, record in reclaimed:
        cgroup = record.get("cgroup")
        # Only a cgroup this run created (named after its pod's uid): what it holds is killed.
        if isinstance(cgroup, str) and Path(cgroup).name == pod.uid:
            remove_cgroup(Path(cgroup))
    return [pod.key for pod, _ in reclaimed]


@dataclass
class RunNode:
    """How every transaction of one run opens the node: same machine, configuration and devices."""

    machine: Machine
    config: KubeletConfig
    state_dir: Path
    devices: Mapping[str, Sequence[Device]] = field(default_factory=dict)
    device_env: Mapping[str, str] = field(default_factory=dict)
    # Plugins registered with a serve sharing the directory, dialed by this run (see run.plugins).
    plugins: Mapping[str, ConnectedPlugin] = field(default_factory=dict)
    kubelet_version: KubeletVersion = DEFAULT_KUBELET_VERSION
    previews: Previews = NO_PREVIEWS

    def open(self, releasing: ProcessRef | None = None) -> tuple[Node, RunProcesses]:
        """The node as the directory holds it, ended runs released (and written so), and the runs' process
        records beside it. `releasing`: the process whose pod this run is about to release; it has ended,
        but its pod is not a crash leftover, so it stays for the explicit removal (and nothing reports it
        as one)."""
        alive = process_alive_reclaiming if releasing is None else _alive_or(releasing)
        store = StateDirectory(self.state_dir, kubelet_version=self.kubelet_version)
        runs = RunProcesses(store, alive)
        node = Node(self.machine, self.config, store=store, ended_pods=runs.ended,
                    adapt_memory_to_host=True, kubelet_version=self.kubelet_version, previews=self.previews)
        if node.memory.host_changes:
            # One line: the changes per NUMA node and what became of the held blocks belong together. The
            # cause may be the run's own configuration as well as the host (a run with --system-reserved
            # after one without reads as a host whose memory shrank).
            log.warning("state %s: its memory manager state was written for other memory than this host and "
                        "kubelet configuration give now (%s): the host's memory or the reserved memory "
                        "(--reserved-memory, --system-reserved, --kube-reserved) changed; the state was rebuilt "
                        "around what runs hold", self.state_dir, "; ".join(node.memory.host_changes))
        resources = {r: [Device(d.id, d.health, d.numa_nodes) for d in ds]
                     for r, ds in self.machine.devices_by_resource().items()}
        resources.update({r: list(ds) for r, ds in self.devices.items()})
        for resource, devs in sorted(resources.items()):
            node.devices.add_static_plugin(
                resource, devs, allocate_fn=allocate_fn(resource, [d.id for d in devs], self.device_env.get(resource))
            )
        for resource, plugin in sorted(self.plugins.items()):
            node.devices.register_endpoint(resource, plugin.client)
            node.devices.update_devices(resource, plugin.devices)
        return node, runs


@dataclass
class Admission:
    record: DecisionRecord
    allocation: ContainerAllocation | None = None
    env: dict[str, str] = field(default_factory=dict)
    reclaimed: list[str] = field(default_factory=list)
    # What the plugins' Allocate answers asked for that a process on the host cannot be given (device
    # nodes and mounts at container paths, annotations, CDI devices): said, never dropped silently.
    unapplied: list[str] = field(default_factory=list)


# Admissions redone because another process wrote the directory during the plugins' Allocate calls,
# before the run gives up on calling them outside the lock and holds it across the calls instead.
RESERVE_ATTEMPTS = 3


def admit(run: RunNode, pod: Pod, container: str, process: Mapping[str, Any]) -> Admission:
    """Admit `pod` for `process`; an allocation this host cannot apply is refused and never written (the
    transaction is discarded). Device plugins registered with a serve are asked for Allocate outside the
    directory's lock (see _admit_reserving), so the agent's admissions never wait on a plugin."""
    node, runs = run.open()
    reclaimed = _remove_leftovers(runs)
    if run.plugins:
        for _ in range(RESERVE_ATTEMPTS):
            done = _admit_reserving(run, node, runs, pod, container, process, reclaimed)
            if done is not None:
                return done
    with node.transaction() as tx:
        reclaimed += _remove_leftovers(runs)  # if the transaction read the directory again
        runs.records[pod.uid] = dict(process)
        record = _admitted(node, runs, node.admit(pod), pod, container, process)
    record = tx.outcome([record], node.pods)[0]
    return _admission(run, node, record, pod, container, reclaimed)


def _admit_reserving(
    run: RunNode, node: Node, runs: RunProcesses, pod: Pod, container: str, process: Mapping[str, Any],
    reclaimed: list[str],
) -> Admission | None:
    """Decide in one transaction up to the first plugin Allocate call, make it with the lock released,
    hand its answer back in a second one (which may pause at the next call: make it the same way), and
    record the pod in the last (Node.decide / commit). A paused plan's resources are in the kubelet files
    only, not the pod record: a crash leaves orphans the next open releases, and a process writing the
    directory meanwhile releases them too, so the next transaction then finds the plan gone (None: decide
    again)."""
    with node.transaction() as tx:
        reclaimed += _remove_leftovers(runs)
        runs.records[pod.uid] = dict(process)
        plan = node.decide(pod)
        if plan.settled:
            settled = _admitted(node, runs, plan.record, pod, container, process)
        else:
            reconcile_shared_pool(node, runs)  # the shared pool lost the CPUs the plan took
    if plan.settled:
        return _admission(run, node, tx.outcome([settled], node.pods)[0], pod, container, reclaimed)
    if tx.failure is not None:
        raise tx.failure
    while True:
        responses, error = plan.make_calls()
        with node.transaction() as tx:
            reclaimed += _remove_leftovers(runs)
            done = node.commit(plan, responses, error)
            if done is None:
                return None
            if isinstance(done, Plan):
                reconcile_shared_pool(node, runs)
            else:
                record = _admitted(node, runs, done, pod, container, process)
        if isinstance(done, Plan):
            if tx.failure is not None:
                raise tx.failure
            plan = done
            continue
        return _admission(run, node, tx.outcome([record], node.pods)[0], pod, container, reclaimed)


def _admitted(node: Node, runs: RunProcesses, record: DecisionRecord, pod: Pod, container: str,
              process: Mapping[str, Any]) -> DecisionRecord:
    """Inside the admission's transaction: refuse what this host cannot apply, record the process."""
    if record.result.admit:
        alloc = node.allocation(pod.uid, container)
        problem = _not_applicable(alloc, node)
        if problem:
            raise PlacementError(problem)
        # What `numalign pods` shows beside the process, without decoding three checkpoints.
        runs.records[pod.uid] = {**process, "container": container, "allocation": alloc.to_dict()}
    else:
        runs.records.pop(pod.uid, None)
    reconcile_shared_pool(node, runs)
    return record


def _admission(
    run: RunNode, node: Node, record: DecisionRecord, pod: Pod, container: str, reclaimed: list[str]
) -> Admission:
    """The admission as written (a failed write is a rejection: see Transaction.outcome)."""
    if not record.result.admit:
        return Admission(record, None, {}, reclaimed)
    alloc = node.allocation(pod.uid, container)
    options = node.devices.pod_devices.run_container_options(pod.uid, container)
    env = dict(options.envs) if options is not None else {}
    # --device-env names a variable for a resource's device ids; a plugin registered with serve answers
    # Allocate itself, so the variable is added beside what it answered.
    for resource, name in sorted(run.device_env.items()):
        if resource in run.plugins and resource in alloc.devices:
            env[name] = ",".join(alloc.devices[resource])
    unapplied: list[str] = []
    if options is not None:
        unapplied += [f"device {d.host_path} (at {d.container_path}, {d.permissions or 'rw'}): not created, the "
                      f"command runs on the host and uses {d.host_path} as it is" for d in options.devices]
        unapplied += [f"mount {m.host_path} at {m.container_path}{' (read-only)' if m.read_only else ''}: not "
                      "mounted, the command runs in the host's mount namespace" for m in options.mounts]
        unapplied += [f"annotation {k}={v}: not applied, there is no container runtime" for k, v in options.annotations]
        unapplied += [f"CDI device {c}: not applied, there is no container runtime" for c in options.cdi_devices]
    return Admission(record, alloc, env, reclaimed, unapplied)


def release(run: RunNode, pod_uid: str, process: ProcessRef) -> bool:
    """Release the run's pod, which `process` (its ended command) held; False when another command
    released it already (it saw the command end first)."""
    node, runs = run.open(releasing=process)
    released = False
    _remove_leftovers(runs)
    with node.transaction() as tx:
        _remove_leftovers(runs)
        if pod_uid in node.pods:
            node.remove(pod_uid)
            released = True
        reconcile_shared_pool(node, runs)
    if tx.failure is not None:
        raise tx.failure
    return released


def _not_applicable(alloc: ContainerAllocation, node: Node) -> str | None:
    cpus, usable = set(alloc.cpus), allowed_cpus()
    # The shared pool holds the reserved CPUs too, which this process need not be allowed to use.
    if alloc.exclusive and cpus and not cpus <= usable:
        # The kubelet's reserved CPUs plus those this process may not use: the decision then stays inside.
        reserved = set(node.config.reserved_cpus()) | (set(node.machine.online_cpus()) - usable)
        return (f"the decision gives CPUs {format_cpuset(sorted(cpus))}, but this process may only run on "
                f"{format_cpuset(sorted(usable))}; expected a machine that is this host and CPUs this process may "
                f"use; omit --machine, or keep the others out with --reserved-cpus {format_cpuset(sorted(reserved))}")
    mems = {n for b in alloc.memory for n in b.numa_nodes}
    usable_mems = allowed_mems()
    if mems and not mems <= usable_mems:
        return (f"the decision binds memory to NUMA nodes {format_cpuset(sorted(mems))}, but this process may "
                f"only allocate on {format_cpuset(sorted(usable_mems))}; omit --machine so the decision is made "
                "for this host")
    return None
