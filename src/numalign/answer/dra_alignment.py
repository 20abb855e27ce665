"""Where a pod's DRA devices sit against the CPUs and memory the kubelet pinned for it.

The kubelet's Topology Manager takes no hint from DRA devices (kubernetes/website#56232; the fix
k/k PR #139982 was closed): the scheduler picks the devices, then the kubelet pins CPUs and memory
without knowing where they are. This module says, per container, whether they met anyway.

A device's NUMA node is its `resource.kubernetes.io/numaNode` attribute (the first entry of KEP-6072's
list form); without it, the NUMA node of its `pciBusID` (or a device on its `pcieRoot`) among the
machine's PCI devices, which a discovered machine (sysfs, snapshot) lists. A container is aligned when
every device it uses is on a NUMA node that holds both its exclusive CPUs and its pinned memory (a part
that is not pinned, CPUs from the shared pool or memory without the Static memory manager, is left out;
with neither pinned there is nothing to align with).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numalign.core.decision import ContainerAllocation
from numalign.machine.dra import numa_of_pci
from numalign.machine.dradrivers import CPU_DRIVER, MEMORY_DRIVER
from numalign.machine.topology import Machine
from numalign.report.verdict import ALIGNED, NOT_ALIGNED, NOTHING_PINNED, UNKNOWN, Verdict, headline, worst
from numalign.scheduler.dra.api import AllocatedDevice, AllocationFailure
from numalign.scheduler.dra.scheduling import PodClaims


@dataclass(frozen=True)
class DRADevicePlace:
    claim: str          # namespace/name
    request: str
    device: str         # driver/pool/device
    numa_node: int | None
    numa_from: str      # numaNode | pciBusID | pcieRoot | "" (unknown)

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "request": self.request, "device": self.device,
                "numa_node": self.numa_node, "numa_from": self.numa_from or None}


@dataclass(frozen=True)
class ContainerDRAAlignment:
    container: str
    devices: tuple[DRADevicePlace, ...]
    cpus: tuple[int, ...]       # NUMA nodes of its exclusive CPUs (empty: shared pool)
    memory: tuple[int, ...]     # NUMA nodes of its pinned memory (empty: not pinned)
    verdict: Verdict
    through_dra: bool = False  # its CPUs or memory came through DRA (dra-driver-cpu, dra-driver-memory)

    @property
    def device_nodes(self) -> tuple[int, ...]:
        return tuple(sorted({d.numa_node for d in self.devices if d.numa_node is not None}))

    def text(self, pod_verdict: Verdict | None = None) -> str:
        """`main: DRA devices on NUMA 1; pinned CPUs on NUMA 0; memory on NUMA 0`, the container's own
        verdict after its name when it is not the pod's."""
        dev = f"DRA devices on NUMA {_ids(self.device_nodes) or '?'}"
        cpus = f"pinned CPUs on NUMA {_ids(self.cpus)}" if self.cpus else "CPUs from the shared pool"
        mem = f"memory on NUMA {_ids(self.memory)}" if self.memory else "memory not pinned"
        name = self.container if self.verdict == pod_verdict else f"{self.container} ({self.verdict})"
        # Name the attributes looked for (resource.kubernetes.io/...): a slice with only the driver's own
        # bus-id attribute (an older `pcieBusID`) is unknown although the device is on the machine.
        why = (" (no numaNode attribute, and no pciBusID or pcieRoot attribute this machine lists)"
               if self.verdict == UNKNOWN else "")
        return f"{name}: {dev}{why}; {cpus}; {mem}"

    def to_dict(self) -> dict[str, Any]:
        return {"container": self.container, "devices": [d.to_dict() for d in self.devices],
                "cpus_numa_nodes": list(self.cpus), "memory_numa_nodes": list(self.memory),
                "devices_numa_nodes": list(self.device_nodes), "verdict": self.verdict,
                "cpus_and_memory_through_dra": self.through_dra}


@dataclass(frozen=True)
class AlignmentOption:
    """A change that puts the devices with the CPUs and memory, checked by running it."""

    kind: str           # match-attribute | device-plugin | preview
    change: str
    outcome: str
    preview: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "change": self.change, "outcome": self.outcome, "verified": True,
                "preview": self.preview}


@dataclass(frozen=True)
class PodDRAAlignment:
    devices: tuple[DRADevicePlace, ...]
    containers: tuple[ContainerDRAAlignment, ...]
    options: tuple[AlignmentOption, ...] = ()
    tried: int = 0
    preview: tuple[str, ...] = field(default_factory=tuple)  # previews that shaped the admission

    @property
    def verdict(self) -> Verdict:
        """The containers' joined as report/verdict.py joins them; nothing pinned when no container uses them."""
        return worst(c.verdict for c in self.containers)

    @property
    def aligned(self) -> bool:
        return self.verdict == ALIGNED

    @property
    def misaligned(self) -> bool:
        return self.verdict == NOT_ALIGNED

    def summary(self) -> str:
        if not self.containers:
            return headline(NOTHING_PINNED, "no container uses the claims' devices (resources.claims)")
        if self.aligned:
            how = ("preview dra-topology-hints: the Topology Manager took the DRA devices' NUMA nodes as hints"
                   if self.preview else
                   "by the claims: CPUs and memory came through DRA" if all(c.through_dra for c in self.containers)
                   else "not by design: the Topology Manager does not consider DRA devices")
            return headline(ALIGNED, f"each container's DRA devices are on the NUMA node of its pinned CPUs and "
                                     f"memory ({how})")
        verdict = self.verdict
        shown = [c for c in self.containers if c.verdict not in (ALIGNED, NOTHING_PINNED) or verdict == NOTHING_PINNED]
        return headline(verdict, "; ".join(c.text(verdict) for c in shown))

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "aligned": self.aligned, "summary": self.summary(),
                "devices": [d.to_dict() for d in self.devices],
                "containers": [c.to_dict() for c in self.containers],
                "would_be_aligned_if": [o.to_dict() for o in self.options], "tried": self.tried,
                "previews": list(self.preview)}


def _ids(ids: Any) -> str:
    return ",".join(map(str, sorted(ids)))


def device_place(machine: Machine, d: AllocatedDevice) -> DRADevicePlace:
    if d.numa_node is not None:
        return DRADevicePlace(d.claim, d.request, d.device_id, d.numa_node, "numaNode")
    node, told = numa_of_pci(machine, d.attributes)
    return DRADevicePlace(d.claim, d.request, d.device_id, node, told)


def _cpu_nodes(machine: Machine, allocation: ContainerAllocation) -> set[int]:
    if not allocation.exclusive:
        return set()
    return machine.numa_nodes_of(allocation.cpus)


def container_alignment(
    machine: Machine, name: str, devices: tuple[AllocatedDevice, ...], allocation: ContainerAllocation
) -> ContainerDRAAlignment:
    # CPUs and memory that came through DRA (dra-driver-cpu, dra-driver-memory) count as the container's
    # CPUs and memory, not as devices to align with them.
    places = tuple(device_place(machine, d) for d in devices if d.driver not in (CPU_DRIVER, MEMORY_DRIVER))
    cpus = _cpu_nodes(machine, allocation) | {n for d in devices if d.driver == CPU_DRIVER for n in d.numa_nodes[:1]}
    memory = {n for b in allocation.memory for n in b.numa_nodes}
    memory |= {n for d in devices if d.driver == MEMORY_DRIVER for n in d.numa_nodes[:1]}
    verdict: Verdict
    if any(p.numa_node is None for p in places):
        verdict = UNKNOWN
    elif not cpus and not memory:
        verdict = NOTHING_PINNED
    else:
        pinned = [s for s in (cpus, memory) if s]
        common = set.intersection(*pinned)
        verdict = ALIGNED if all(p.numa_node in common for p in places) else NOT_ALIGNED
    through = any(d.driver in (CPU_DRIVER, MEMORY_DRIVER) for d in devices)
    return ContainerDRAAlignment(name, places, tuple(sorted(cpus)), tuple(sorted(memory)), verdict, through)


def pod_alignment(
    machine: Machine, outcome: PodClaims, allocations: Mapping[str, ContainerAllocation],
    previews: tuple[str, ...] = (),
) -> PodDRAAlignment:
    """The alignment of an admitted pod (`allocations`: its decision record's, per container)."""
    containers = []
    for name, alloc in allocations.items():
        devs = outcome.container_devices(name)
        if devs:
            containers.append(container_alignment(machine, name, devs, alloc))
    places = tuple(device_place(machine, d) for d in outcome.devices)
    return PodDRAAlignment(places, tuple(containers), preview=previews)


def claim_lines(outcome: PodClaims, machine: Machine) -> list[str]:
    """`claim default/gpus: gpu.example.com/gpu-1 (NUMA 1), ... [kept]` per claim (the pool is named when
    it is not the node's own)."""
    lines = []
    result = outcome.result
    for c in () if isinstance(result, AllocationFailure) else result.claims:
        devs = ", ".join(
            f"{d.driver}/{_short(d, result.node)} (NUMA {p.numa_node if p.numa_node is not None else '?'}"
            + (f" by {p.numa_from}" if p.numa_from and p.numa_from != "numaNode" else "") + ")"
            for d in c.devices for p in (device_place(machine, d),))
        kept = " (already allocated: kept)" if c.preallocated else ""
        lines.append(f"  dra: claim {c.claim.key}{kept}: {devs or 'no devices'}")
    return lines


def _short(d: AllocatedDevice, node: str) -> str:
    return d.device if d.pool == node else f"{d.pool}/{d.device}"


def hint_nodes(machine: Machine, outcome: PodClaims) -> dict[str, dict[str, tuple[int, ...]]]:
    """Per container, per claim request it uses, the NUMA nodes of its devices (the preview
    dra-topology-hints gives them to the Topology Manager)."""
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for c in outcome.pod.all_containers():
        per: dict[str, set[int]] = {}
        for d in outcome.container_devices(c.name):
            place = device_place(machine, d)
            if place.numa_node is not None:
                per.setdefault(f"dra:{d.claim}/{d.request}", set()).add(place.numa_node)
        if per:
            out[c.name] = {k: tuple(sorted(v)) for k, v in per.items()}
    return out
