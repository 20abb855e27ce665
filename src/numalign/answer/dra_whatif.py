"""What would put a pod's DRA devices on the NUMA node of its CPUs and memory: each option checked by
running it, never guessed (as answer/whatif.py does for rejections).

1. A matchAttribute with a CPU (and memory) claim: the container's CPUs from dra-driver-cpu
   (individual mode) and its memory from dra-driver-memory, requested in the same claim as the devices
   with `matchAttribute: resource.kubernetes.io/numaNode` over every request; the allocator is run
   again on this node with those drivers' slices (machine/dradrivers.py). The kubelet's CPU and memory
   managers then run none/None, as those drivers require.
2. The device-plugin path: the same devices served by a device plugin under an extended resource, the
   pod asking for them instead of the claim; admitted again on a copy of the node without the pod
   (with single-numa-node when the node's policy aligns nothing).
3. A policy with the preview dra-topology-hints (the closed k/k PR #139982): the same claim, the
   Topology Manager taking the devices' NUMA nodes as hints; admitted again on a copy.

Only options after which every container is aligned are reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from numalign.answer.dra_alignment import AlignmentOption, PodDRAAlignment, container_alignment, device_place
from numalign.answer.dra_drivers import restarted_without
from numalign.core.decision import ContainerAllocation
from numalign.errors import NumalignError
from numalign.k8s.deviceplugin import Device
from numalign.k8s.dra.types import (
    ATTRIBUTE_NUMA_NODE,
    CapacityRequirements,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
)
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.machine.dradrivers import CPU_DRIVER, MEMORY_DRIVER, driver_slices
from numalign.machine.render import binary_quantity
from numalign.scheduler.dra.scheduling import NodeDRA, PodClaims

ALIGNING = ("single-numa-node", "restricted", "best-effort")


def aligned_if(node: Node, pod: Pod, outcome: PodClaims, dra: NodeDRA,
               allocations: Mapping[str, ContainerAllocation]) -> tuple[list[AlignmentOption], int]:
    """The options that align the pod, and how many were tried. `node` holds the pod already."""
    options: list[AlignmentOption] = []
    tried = 0
    for probe in (_match_attribute, _device_plugin, _preview):
        try:
            found, n = probe(node, pod, outcome, dra, allocations)
        except NumalignError:
            continue
        tried += n
        if found is not None:
            options.append(found)
    return options, tried


def _aligned(node: Node, outcome: PodClaims, pod: Pod, allocations: Mapping[str, ContainerAllocation]) -> bool:
    for c in pod.all_containers():
        devs = outcome.container_devices(c.name)
        if devs and container_alignment(node.machine, c.name, devs, allocations[c.name]).verdict != "aligned":
            return False
    return True


def _cpu_numa(node: Node, cpus: set[int]) -> str:
    nodes = sorted(node.machine.numa_nodes_of(cpus))
    return ",".join(map(str, nodes))


def _match_attribute(node: Node, pod: Pod, outcome: PodClaims, dra: NodeDRA,
                     allocations: Mapping[str, ContainerAllocation]) -> tuple[AlignmentOption | None, int]:
    """One claim with the devices, the CPUs and the memory, and matchAttribute over all of them."""
    claims = list(outcome.claims)
    names = outcome.pod_claim_names()
    changed: list[str] = []
    for c in pod.all_containers():
        alloc = allocations.get(c.name) or ContainerAllocation()
        cpus = len(alloc.cpus) if alloc.exclusive else 0
        memory = sum(b.size for b in alloc.memory if b.type == "memory")
        refs = [names[r.name] for r in c.claims if r.name in names]
        if not refs or not (cpus or memory):
            continue
        i = next(k for k, cl in enumerate(claims) if cl.key == refs[0])
        spec = claims[i].spec
        requests = list(spec.requests)
        extra = []
        if cpus:
            extra.append(DeviceRequest(f"{c.name}-cpus", DeviceSubRequest(f"{c.name}-cpus", "numalign-dra-cpu",
                                                                          count=cpus)))
        if memory:
            extra.append(DeviceRequest(f"{c.name}-memory", DeviceSubRequest(
                f"{c.name}-memory", "numalign-dra-memory", selectors=(DeviceSelector(
                    'device.attributes["dra.memory"].hugeTLB == false'),),
                capacity=CapacityRequirements({"memory": Quantity.from_int(memory)}))))
        every = tuple(r.name for r in requests) + tuple(r.name for r in extra)
        constraints = (*spec.constraints, DeviceConstraint(every, match_attribute=ATTRIBUTE_NUMA_NODE))
        claims[i] = dataclasses.replace(claims[i], spec=dataclasses.replace(
            spec, requests=tuple(requests + extra), constraints=constraints))
        what = [f"{cpus} CPUs (dra-driver-cpu)"] if cpus else []
        what += [f"{binary_quantity(memory)} (dra-driver-memory)"] if memory else []
        changed.append(f"claim {claims[i].key} also requests {' and '.join(what)}")
    if not changed:
        return None, 0
    held = set(node.cpu.reserved_cpus)
    for other in node.pods.values():
        if other.uid != pod.uid:
            for oc in other.all_containers():
                held |= set(node.cpu.get_exclusive_cpus(other.uid, oc.name))
    slices = driver_slices(node.machine, dra.node, "individual", True, held)
    classes = {**dra.classes,
               "numalign-dra-cpu": DeviceClass("numalign-dra-cpu",
                                               (DeviceSelector(f'device.driver == "{CPU_DRIVER}"'),)),
               "numalign-dra-memory": DeviceClass("numalign-dra-memory",
                                                  (DeviceSelector(f'device.driver == "{MEMORY_DRIVER}"'),))}
    objects = dataclasses.replace(dra.objects, classes=classes)
    others = [c for c in dra.objects.claims.values() if c.allocation is not None
              and c.key not in {x.key for x in outcome.claims}]
    objects.claims = {c.key: c for c in others}
    trial = NodeDRA(objects, dra.node, dra.node_labels, dra.version, dra.gates, [*dra.extra_slices, *slices])
    result = trial.allocate(pod, claims)
    if result is None or result.failure is not None:
        return None, 1
    got = {int(d.attributes["dra.cpu/cpuID"].values[0]) for d in result.devices if d.driver == CPU_DRIVER}
    gpus = sorted({p.numa_node for d in result.devices if d.driver not in (CPU_DRIVER, MEMORY_DRIVER)
                   for p in (device_place(node.machine, d),) if p.numa_node is not None})
    mem = sorted({d.numa_node for d in result.devices if d.driver == MEMORY_DRIVER and d.numa_node is not None})
    change = f"{'; '.join(changed)}, matchAttribute {ATTRIBUTE_NUMA_NODE} over all"
    outcome_text = (f"devices NUMA {','.join(map(str, gpus))}, CPUs {_cpus(got)} (NUMA {_cpu_numa(node, got)}), "
                    f"memory NUMA {','.join(map(str, mem)) or '-'} (kubelet CPU/memory managers none/None)")
    return AlignmentOption("match-attribute", change, outcome_text), 1


def _cpus(ids: set[int]) -> str:
    from numalign.k8s.cpuset import format_cpuset

    return format_cpuset(ids)


def _device_plugin(node: Node, pod: Pod, outcome: PodClaims, dra: NodeDRA,
                   allocations: Mapping[str, ContainerAllocation]) -> tuple[AlignmentOption | None, int]:
    """The claims' devices served by a device plugin instead, the pod asking for them by count."""
    resources: dict[str, str] = {}  # driver -> extended resource name
    counts: dict[str, dict[str, int]] = {}  # container -> resource -> count
    for c in pod.all_containers():
        for d in outcome.container_devices(c.name):
            res = resources.setdefault(d.driver, _extended_resource(outcome, d, dra) or f"{d.driver}/device")
            counts.setdefault(c.name, {})[res] = counts.get(c.name, {}).get(res, 0) + 1
    if not counts:
        return None, 0
    in_use = {(r.driver, r.pool, r.device) for cl in dra.objects.claims.values() if cl.allocation is not None
              and cl.key not in {x.key for x in outcome.claims} for r in cl.allocation.results}
    variant = _with_extended(pod, counts)
    tried = 0
    policies = [None] if node.config.topology_manager_policy in ALIGNING else ["single-numa-node"]
    for policy in policies:
        twin = restarted_without(node, pod.uid, policy)
        for driver, res in resources.items():
            devs = []
            for s in dra.slices:
                if s.driver != driver or (s.node_name and s.node_name != dra.node):
                    continue
                for dev in s.devices:
                    if (driver, s.pool.name, dev.name) in in_use:
                        continue
                    numa = dev.attributes.get(ATTRIBUTE_NUMA_NODE)
                    topo = (int(numa.values[0]),) if numa is not None and numa.kind == "int" else None
                    devs.append(Device(dev.name, "Healthy", topo))
            twin.devices.add_static_plugin(res, devs)
        tried += 1
        rec = twin.admit(variant)
        if not rec.result.admit:
            continue
        ok = True
        for alloc in rec.allocations.values():
            dev_nodes = {n for ids in alloc.devices.values() for topo in ids.values() if topo for n in topo}
            if not dev_nodes:
                continue
            cpus = set() if not alloc.exclusive else node.machine.numa_nodes_of(alloc.cpus)
            mem = {n for b in alloc.memory for n in b.numa_nodes}
            pinned = [s for s in (cpus, mem) if s]
            if not pinned or not dev_nodes <= set.intersection(*pinned):
                ok = False
        if ok:
            names = ", ".join(f"{r}: {sum(n.get(r, 0) for n in counts.values())}" for r in resources.values())
            how = f" with --topology-manager-policy {policy}" if policy else ""
            return AlignmentOption("device-plugin", f"the devices from a device plugin ({names}) instead of the "
                                   f"claim{how}", "admitted, aligned by the Topology Manager"), tried
    return None, tried


def _extended_resource(outcome: PodClaims, device: Any, dra: NodeDRA) -> str | None:
    """The extended resource the device's class names (spec.extendedResourceName), as a pod asks for the
    same devices by count; None when the class names none."""
    claim = next((c for c in outcome.claims if c.key == device.claim), None)
    if claim is None:
        return None
    base, _, sub = device.request.partition("/")
    for request in claim.spec.requests:
        if request.name != base:
            continue
        chosen = request.exactly if not sub else next((s for s in request.first_available if s.name == sub), None)
        cls = dra.classes.get(chosen.device_class_name) if chosen is not None else None
        return cls.extended_resource_name if cls is not None else None
    return None


def _with_extended(pod: Pod, counts: dict[str, dict[str, int]]) -> Pod:
    def change(c: Any) -> Any:
        extra = {r: Quantity.from_int(n) for r, n in counts.get(c.name, {}).items()}
        if not extra:
            return c
        return dataclasses.replace(c, requests={**c.requests, **extra}, limits={**c.limits, **extra}, claims=())

    return dataclasses.replace(pod, uid=f"{pod.uid}-device-plugin", resource_claims=(),
                               init_containers=tuple(change(c) for c in pod.init_containers),
                               containers=tuple(change(c) for c in pod.containers))


def _preview(node: Node, pod: Pod, outcome: PodClaims, dra: NodeDRA,
             allocations: Mapping[str, ContainerAllocation]) -> tuple[AlignmentOption | None, int]:
    """The same claim, the Topology Manager taking the devices' NUMA nodes as hints (preview)."""
    from numalign.answer.dra_alignment import hint_nodes
    from numalign.kubelet.previews.dra_hints import DRAHintProvider

    if any(isinstance(p, DRAHintProvider) for p in node.tm.providers):
        return None, 0  # the preview is on already: the answer above is its answer
    hints = hint_nodes(node.machine, outcome)
    if not hints:
        return None, 0
    policy = None if node.config.topology_manager_policy in ("single-numa-node", "restricted") else "single-numa-node"
    twin = restarted_without(node, pod.uid, policy)
    provider = DRAHintProvider()
    twin.tm.add_hint_provider(provider)
    provider.set_pod(pod.uid, hints)
    rec = twin.admit(pod)
    if not rec.result.admit:
        return None, 1
    allocations2 = {c: twin.allocation(pod.uid, c) for c in rec.allocations}
    if not _aligned(twin, outcome, pod, allocations2):
        return None, 1
    how = f" --topology-manager-policy {policy}" if policy else ""
    return AlignmentOption("preview", f"--preview dra-topology-hints{how} (closed k/k PR #139982, in no release)",
                           "admitted, CPUs and memory follow the devices", preview=True), 1


def with_options(alignment: PodDRAAlignment, options: list[AlignmentOption], tried: int) -> PodDRAAlignment:
    return dataclasses.replace(alignment, options=tuple(options), tried=tried)
