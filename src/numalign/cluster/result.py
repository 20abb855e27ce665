"""The result of `numalign simulate`: a typed, documented data model (stable; `simulate --report` plots it,
`-o json|yaml` prints it). The names are the document's (docs/schemas/simulate.schema.json, camelCase);
the Python attributes are their snake_case forms.

SimulationResult (schemaVersion 2)
  summary: pods, and per run its label, placed, unschedulable, failed, kubeletRejections (a count) and
           guaranteedOnOneNumaNode (a share)
  cluster, nodes, workload, pods, seed, maxRetries, notes: what was simulated
  pools: each pool as `capacity` shows it (name, nodes, machine, kubeletVersion, kubeletConfig)
  runs: one RunResult per combination, in sweep order

RunResult
  config          RunConfig: label, scheduler, scoring strategy, the kubelet's resource-manager settings
                  (KubeletConfiguration names), its version(s) (kubeletVersions {version: nodes};
                  kubeletVersion their one-line form) and the previews on (previews {name: value})
  pods            pods created by the workload (replicas expanded; recreated pods not counted again)
  placed          pods bound and admitted by their node's kubelet at the end
  unschedulable   pods no node passed the scheduler's filters for (still pending at the end)
  unschedulableReasons   {filter reasons, comma-joined: pods}
  kubeletRejections      {kubelet reason (TopologyAffinityError, ...): rejections}; every rejection
  rejections      their sum
  kubeletRejectionMessages   {kubelet reason: RejectionExample}: the reason's most frequent message, the
                  node and pod that gave it first, its rejections and the reason's rejections with
                  other messages (cluster/rejections.py; counts per message are bounded, not per pod)
  rejectedPods    pods rejected at least once by the kubelet of the node the scheduler chose
  retries         pods recreated by their controller after a rejection (and scheduled again)
  failed          pods given up after maxRetries rejections
  deleted         pods deleted by the timeline
  alignment       NUMAAlignment of the placed Guaranteed pods
  resources       {resource: ResourceFigures}; cpu in millicores, memory and hugepages in bytes,
                  devices in units
  preexisting     pods of a `kubectl get pods` dump bound to their nodes before the workload (admitted)
  preexistingRejected   of those, pods their node's kubelet (numalign) would not admit
  numaOccupancy   {pool: {NUMA node id: share of its allocatable CPUs held exclusively, 0..1}} at the end
                  (pools with cpuManagerPolicy static only; cluster/occupancy.py)
  dra             DRAFigures (cluster/dra.py), only when workload pods use ResourceClaims: pods, placed,
                  unschedulable {allocator or filter reasons: pods}, aligned / apart / unpinned / unknown
                  (placed pods by their devices against their CPUs and memory), alignedShare, allocations,
                  why {why the claims of pods left unschedulable do not fit (scheduler/dra/explain.py): pods}

NUMAAlignment
  guaranteed      placed Guaranteed pods
  singleNumaNode  of those, pods whose CPUs, memory and devices all sit on one NUMA node
  share           singleNumaNode / guaranteed (null when there are none: a share of nothing)
  numaNodes       {NUMA nodes spanned: pods}
  fewest          pods whose exclusive CPUs, memory, hugepages and devices span no more NUMA nodes than
                  the fewest that could hold them on an empty node of their pool (cluster/fewest.py)
  fewestShare     fewest / guaranteed (null when there are none)

ResourceFigures
  allocatable, requested, free (= allocatable - requested), stranded (free on nodes whose kubelet
  would admit no pod shape of the workload at the end of the run: the same shapes for every run, so
  schedulers compare), utilisation (requested / allocatable, 0..1; null when nothing is allocatable)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from numalign.cluster.rejections import RejectionExample

SCHEMA_VERSION: Final = 2  # of simulate's document; docs/changelog.md lists what each version changed


def _round(share: float | None) -> float | None:
    return None if share is None else round(share, 6)


@dataclass(frozen=True)
class RunConfig:
    scheduler: str
    scoring: str
    topology_manager_policy: str
    topology_manager_scope: str
    topology_manager_policy_options: dict[str, str] = field(default_factory=dict)
    cpu_manager_policy: str = "none"
    cpu_manager_policy_options: dict[str, str] = field(default_factory=dict)
    memory_manager_policy: str = "None"
    kubelet_versions: dict[str, int] = field(default_factory=dict)  # {version: nodes}; several mid-upgrade
    previews: dict[str, str] = field(default_factory=dict)  # previews on (kubelet/previews), by name
    version_axis: bool = False  # the sweep set the version (then the label names it)

    @property
    def kubelet_version(self) -> str:
        """One version, or the mix of a cluster mid-upgrade ("1.36.2 (3) + 1.35.3 (2)")."""
        if len(self.kubelet_versions) == 1:
            return next(iter(self.kubelet_versions))
        return " + ".join(f"{v} ({n})" for v, n in self.kubelet_versions.items())

    @property
    def label(self) -> str:
        """A short column heading: the scheduler, then what differs from the kubelet's usual setup."""
        parts = [self.scheduler if self.scoring in ("LeastAllocated", "") else f"{self.scheduler}:{self.scoring}",
                 self.topology_manager_policy]
        if self.topology_manager_scope != "container":
            parts.append(f"scope={self.topology_manager_scope}")
        parts += [f"{k}={v}" for k, v in sorted(self.topology_manager_policy_options.items())]
        parts += [f"{k}={v}" for k, v in sorted(self.cpu_manager_policy_options.items())]
        if self.cpu_manager_policy != "static":
            parts.append(f"cpu={self.cpu_manager_policy}")
        if self.memory_manager_policy != "Static":
            parts.append(f"memory={self.memory_manager_policy}")
        if self.version_axis or len(self.kubelet_versions) > 1:
            parts.append(f"kubelet={'+'.join(self.kubelet_versions)}")
        parts += [f"preview:{k}={v}" for k, v in sorted(self.previews.items())]
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """KubeletConfiguration's field names for the kubelet's settings; `kubeletVersions` and `previews`
        are keyed by version and by preview name."""
        return {"label": self.label, "scheduler": self.scheduler, "scoring": self.scoring,
                "topologyManagerPolicy": self.topology_manager_policy,
                "topologyManagerScope": self.topology_manager_scope,
                "topologyManagerPolicyOptions": dict(self.topology_manager_policy_options),
                "cpuManagerPolicy": self.cpu_manager_policy,
                "cpuManagerPolicyOptions": dict(self.cpu_manager_policy_options),
                "memoryManagerPolicy": self.memory_manager_policy,
                "kubeletVersion": self.kubelet_version, "kubeletVersions": dict(self.kubelet_versions),
                "previews": dict(self.previews), "versionAxis": self.version_axis}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        return cls(d["scheduler"], d["scoring"], d["topologyManagerPolicy"], d["topologyManagerScope"],
                   dict(d["topologyManagerPolicyOptions"]), d["cpuManagerPolicy"], dict(d["cpuManagerPolicyOptions"]),
                   d["memoryManagerPolicy"], dict(d["kubeletVersions"]), dict(d["previews"]), d["versionAxis"])


@dataclass(frozen=True)
class NUMAAlignment:
    guaranteed: int
    single_numa: int
    numa_nodes: dict[int, int]
    fewest: int = 0

    # None when no Guaranteed pod was placed: 0 of 0 is not "100% aligned" (tables show "–").
    @property
    def share(self) -> float | None:
        return self.single_numa / self.guaranteed if self.guaranteed else None

    @property
    def fewest_share(self) -> float | None:
        return self.fewest / self.guaranteed if self.guaranteed else None


@dataclass(frozen=True)
class ResourceFigures:
    allocatable: int
    requested: int
    stranded: int

    @property
    def free(self) -> int:
        return self.allocatable - self.requested

    @property
    def utilisation(self) -> float | None:
        """None when nothing is allocatable (a share of nothing)."""
        return self.requested / self.allocatable if self.allocatable else None


@dataclass(frozen=True)
class RunResult:
    config: RunConfig
    pods: int
    placed: int
    unschedulable: int
    unschedulable_reasons: dict[str, int]
    kubelet_rejections: dict[str, int]
    rejected_pods: int
    retries: int
    failed: int
    deleted: int
    alignment: NUMAAlignment
    resources: dict[str, ResourceFigures]
    preexisting: int = 0
    preexisting_rejected: int = 0
    numa_occupancy: dict[str, dict[int, float]] = field(default_factory=dict)
    dra: Any = None  # cluster.dra.DRAFigures when the workload has pods with claims
    rejection_examples: dict[str, RejectionExample] = field(default_factory=dict)

    @property
    def rejections(self) -> int:
        return sum(self.kubelet_rejections.values())

    def to_dict(self) -> dict[str, Any]:
        """The run in `simulate -o json`'s document (docs/schemas/simulate.schema.json): Kubernetes API
        camelCase field names; maps keyed by data (reasons, resources, pools, NUMA ids) keep those keys."""
        al = self.alignment
        out: dict[str, Any] = {
            "config": self.config.to_dict(),
            "pods": self.pods, "placed": self.placed, "unschedulable": self.unschedulable,
            "failed": self.failed, "deleted": self.deleted,
            "rejections": self.rejections, "rejectedPods": self.rejected_pods, "retries": self.retries,
            "kubeletRejections": dict(self.kubelet_rejections),
            "kubeletRejectionMessages": {k: v.to_dict() for k, v in self.rejection_examples.items()},
            "unschedulableReasons": dict(self.unschedulable_reasons),
            "alignment": {"guaranteed": al.guaranteed, "singleNumaNode": al.single_numa,
                          "share": _round(al.share), "fewest": al.fewest, "fewestShare": _round(al.fewest_share),
                          "numaNodes": {str(k): v for k, v in sorted(al.numa_nodes.items())}},
            "resources": {name: {"allocatable": f.allocatable, "requested": f.requested, "free": f.free,
                                 "stranded": f.stranded, "utilisation": _round(f.utilisation)}
                          for name, f in self.resources.items()},
            "preexisting": self.preexisting, "preexistingRejected": self.preexisting_rejected,
            "numaOccupancy": {pool: {str(k): v for k, v in sorted(per.items())}
                              for pool, per in self.numa_occupancy.items()},
        }
        if self.dra is not None:
            out["dra"] = self.dra.to_dict()
        return out

    def summary(self) -> dict[str, Any]:
        """The run in a line of the document's summary: what happened to the workload's pods."""
        return {"label": self.config.label, "placed": self.placed, "unschedulable": self.unschedulable,
                "failed": self.failed, "kubeletRejections": self.rejections,
                "guaranteedOnOneNumaNode": _round(self.alignment.share)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        al = d["alignment"]
        return cls(
            RunConfig.from_dict(d["config"]), d["pods"], d["placed"], d["unschedulable"],
            dict(d["unschedulableReasons"]), dict(d["kubeletRejections"]), d["rejectedPods"], d["retries"],
            d["failed"], d["deleted"],
            NUMAAlignment(al["guaranteed"], al["singleNumaNode"], {int(k): v for k, v in al["numaNodes"].items()},
                          al.get("fewest", 0)),
            {k: ResourceFigures(v["allocatable"], v["requested"], v["stranded"]) for k, v in d["resources"].items()},
            d.get("preexisting", 0), d.get("preexistingRejected", 0),
            {pool: {int(k): float(v) for k, v in per.items()} for pool, per in (d.get("numaOccupancy") or {}).items()},
            _dra_from_dict(d.get("dra")),
            {k: RejectionExample.from_dict(v) for k, v in (d.get("kubeletRejectionMessages") or {}).items()},
        )


def _dra_from_dict(d: Any) -> Any:
    if d is None:
        return None
    from numalign.cluster.dra import DRAFigures

    return DRAFigures.from_dict(d)


@dataclass(frozen=True)
class SimulationResult:
    cluster: str
    nodes: int
    workload: str
    pods: int
    seed: int
    max_retries: int
    runs: tuple[RunResult, ...]
    pools: tuple[dict[str, Any], ...] = ()  # cluster.model.pool_document of each pool
    notes: tuple[str, ...] = ()  # what the text prints as "# ..." lines (the kubelet versions decided at)

    def to_dict(self) -> dict[str, Any]:
        """`simulate -o json|yaml` (docs/schemas/simulate.schema.json): the summary first (a line per run),
        then what was simulated, the pools as `capacity` shows them, and every run's figures."""
        return {
            "schemaVersion": SCHEMA_VERSION,
            "summary": {"pods": self.pods, "runs": [r.summary() for r in self.runs]},
            "cluster": self.cluster,
            "nodes": self.nodes,
            "workload": self.workload,
            "pods": self.pods,
            "seed": self.seed,
            "maxRetries": self.max_retries,
            "notes": list(self.notes),
            "pools": list(self.pools),
            "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SimulationResult:
        return cls(d["cluster"], d["nodes"], d["workload"], d["pods"], d["seed"], d["maxRetries"],
                   tuple(RunResult.from_dict(r) for r in d["runs"]), tuple(d.get("pools") or ()),
                   tuple(d.get("notes") or ()))
