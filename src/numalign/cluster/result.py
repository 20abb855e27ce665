"""The result of `numalign simulate`: a typed, documented data model (stable; `simulate --report` plots it).

SimulationResult (schema_version 1)
  cluster, nodes, workload, pods, seed, max_retries: what was simulated
  runs: one RunResult per combination, in sweep order

RunResult
  config          RunConfig: scheduler, scoring strategy, the kubelet's resource-manager settings, its
                  version(s) (kubelet_versions {version: nodes}; kubeletVersion their one-line form) and
                  the previews on (previews {name: value})
  pods            pods created by the workload (replicas expanded; recreated pods not counted again)
  placed          pods bound and admitted by their node's kubelet at the end
  unschedulable   pods no node passed the scheduler's filters for (still pending at the end)
  unschedulable_reasons   {filter reasons, comma-joined: pods}
  kubelet_rejections      {kubelet reason (TopologyAffinityError, ...): rejections}; every rejection
  rejected_pods   pods rejected at least once by the kubelet of the node the scheduler chose
  retries         pods recreated by their controller after a rejection (and scheduled again)
  failed          pods given up after max_retries rejections
  deleted         pods deleted by the timeline
  alignment       NUMAAlignment of the placed Guaranteed pods
  resources       {resource: ResourceFigures}; cpu in millicores, memory and hugepages in bytes,
                  devices in units
  preexisting     pods of a `kubectl get pods` dump bound to their nodes before the workload (admitted)
  preexisting_rejected   of those, pods their node's kubelet (numalign) would not admit
  numa_occupancy  {pool: {NUMA node id: share of its allocatable CPUs held exclusively, 0..1}} at the end
                  (pools with cpuManagerPolicy static only; cluster/occupancy.py)
  dra             DRAFigures (cluster/dra.py), only when workload pods use ResourceClaims: pods, placed,
                  unschedulable {allocator or filter reasons: pods}, aligned / apart / unpinned / unknown
                  (placed pods by their devices against their CPUs and memory), aligned_share, allocations

NUMAAlignment
  guaranteed      placed Guaranteed pods
  single_numa     of those, pods whose CPUs, memory and devices all sit on one NUMA node
  share           single_numa / guaranteed (null when there are none: a share of nothing)
  numa_nodes      {NUMA nodes spanned: pods}
  fewest          pods whose exclusive CPUs, memory, hugepages and devices span no more NUMA nodes than
                  the fewest that could hold them on an empty node of their pool (cluster/fewest.py)
  fewest_share    fewest / guaranteed (null when there are none)

ResourceFigures
  allocatable, requested, free (= allocatable - requested), stranded (free on nodes whose kubelet
  would admit no pod shape of the workload at the end of the run: the same shapes for every run, so
  schedulers compare), utilisation (requested / allocatable, 0..1)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final

SCHEMA_VERSION: Final = 1


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

    @property
    def rejections(self) -> int:
        return sum(self.kubelet_rejections.values())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["config"]["label"] = self.config.label
        out["config"]["kubeletVersion"] = self.config.kubelet_version
        out["rejections"] = self.rejections
        out["alignment"]["share"] = _round(self.alignment.share)
        out["alignment"]["fewest_share"] = _round(self.alignment.fewest_share)
        out["alignment"]["numa_nodes"] = {str(k): v for k, v in sorted(self.alignment.numa_nodes.items())}
        out["numa_occupancy"] = {pool: {str(k): v for k, v in sorted(per.items())}
                                 for pool, per in self.numa_occupancy.items()}
        for name, fig in self.resources.items():
            out["resources"][name]["free"] = fig.free
            out["resources"][name]["utilisation"] = _round(fig.utilisation)
        if self.dra is None:
            del out["dra"]
        else:
            out["dra"] = self.dra.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        cfg = {k: v for k, v in d["config"].items() if k not in ("label", "kubeletVersion")}
        al = d["alignment"]
        return cls(
            RunConfig(**cfg), d["pods"], d["placed"], d["unschedulable"], dict(d["unschedulable_reasons"]),
            dict(d["kubelet_rejections"]), d["rejected_pods"], d["retries"], d["failed"], d["deleted"],
            NUMAAlignment(al["guaranteed"], al["single_numa"], {int(k): v for k, v in al["numa_nodes"].items()},
                          al.get("fewest", 0)),
            {k: ResourceFigures(v["allocatable"], v["requested"], v["stranded"]) for k, v in d["resources"].items()},
            d.get("preexisting", 0), d.get("preexisting_rejected", 0),
            {pool: {int(k): float(v) for k, v in per.items()} for pool, per in (d.get("numa_occupancy") or {}).items()},
            _dra_from_dict(d.get("dra")),
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
    pools: tuple[dict[str, Any], ...] = ()  # cluster.model.pool_settings of each pool

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "cluster": self.cluster,
            "nodes": self.nodes,
            "workload": self.workload,
            "pods": self.pods,
            "seed": self.seed,
            "max_retries": self.max_retries,
            "pools": list(self.pools),
            "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SimulationResult:
        return cls(d["cluster"], d["nodes"], d["workload"], d["pods"], d["seed"], d["max_retries"],
                   tuple(RunResult.from_dict(r) for r in d["runs"]), tuple(d.get("pools") or ()))
