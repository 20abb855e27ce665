"""What `numalign capacity` answers, as one typed document: `to_dict()` is the `-o json|yaml` document
(docs/schemas/capacity.schema.json) and `text_lines()` the text, both from the same CapacityDocument.

One run per kubelet version x preview set asked for (one run when none is: the cluster as it is). The
summary comes first: per run, the copies that fit NUMA-exact and by a sum of requests, and whether the
whole workload fits. The pools are listed as `simulate` lists them (cluster.model.pool_document); each
run's `byPool` gives the counts per pool, with what stopped the count and on how many nodes (nodes in the
same state share one entry: the count is already folded)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from numalign.cluster.capacity import PoolCapacity, SharedClaimPin

SCHEMA_VERSION: Final = 1  # of capacity's document; docs/changelog.md lists what each version changed


@dataclass(frozen=True)
class CapacityRun:
    """The counts at one kubelet version (None: each pool's own) and preview set (None: each pool's own;
    "": none)."""

    kubelet_version: str | None
    previews: str | None
    pools: tuple[PoolCapacity, ...]
    # the claims the copies share (resourceClaimName) and the nodes their one allocation pins them to
    shared: tuple[SharedClaimPin, ...] = ()

    @property
    def exact(self) -> int:
        return sum(p.exact for p in self.pools)

    @property
    def by_requests(self) -> int:
        return sum(p.by_requests for p in self.pools)

    def versions(self) -> str:
        """The kubelet version(s) the pools decided as, one line."""
        return " + ".join(dict.fromkeys(p.kubelet_version for p in self.pools))

    def previews_asked(self) -> dict[str, str]:
        """The preview set of the run ({} for none), as the pools' `previews` name them."""
        from numalign.k8s.previews import Previews

        return Previews.parse([p for p in (self.previews or "").split(";") if p.strip()]).to_dict()

    def heading(self) -> str:
        """What distinguishes the run, as the text's `== ...` line names it."""
        what = [f"kubelet {self.kubelet_version}" if self.kubelet_version else "each pool's kubelet version",
                *([f"preview: {p}" for p in (self.previews or "").split(";") if p] or
                  (["no previews"] if self.previews is not None else []))]
        return "; ".join(what)


def _pool_fit(p: PoolCapacity) -> dict[str, Any]:
    return {"pool": p.pool, "nodes": p.nodes, "kubeletVersion": p.kubelet_version, "previews": dict(p.previews),
            "exact": p.exact, "byRequests": p.by_requests, "limitedBy": dict(p.limited_by),
            **({"why": dict(p.why)} if p.why else {})}


@dataclass(frozen=True)
class CapacityDocument:
    """`cluster`, `nodes`: the cluster's name and size; `pod`: which pod was copied; `workload_pods`: a
    workload's pod count (does all of it fit?), None for one pod; `pools`: pool_document of each pool."""

    cluster: str
    nodes: int
    pod: str
    notes: Sequence[str]
    pools: tuple[dict[str, Any], ...]
    runs: tuple[CapacityRun, ...]
    workload_pods: int | None = None

    def fits(self, run: CapacityRun) -> bool | None:
        return None if self.workload_pods is None else run.exact >= self.workload_pods

    def to_dict(self) -> dict[str, Any]:
        """Summary first; keys in Kubernetes API camelCase (maps of reasons and previews keep their keys)."""
        def line(run: CapacityRun) -> dict[str, Any]:
            fits = self.fits(run)
            asked = {} if run.previews is None else {"previews": run.previews_asked()}
            return {"kubeletVersion": run.versions(), **asked, "exact": run.exact, "byRequests": run.by_requests,
                    **({"workloadFits": fits} if fits is not None else {})}

        return {
            "schemaVersion": SCHEMA_VERSION,
            "summary": {**({"workloadPods": self.workload_pods} if self.workload_pods is not None else {}),
                        "runs": [line(r) for r in self.runs]},
            "cluster": self.cluster, "nodes": self.nodes, "pod": self.pod, "notes": list(self.notes),
            "pools": list(self.pools),
            "runs": [{**line(r), "byPool": [_pool_fit(p) for p in r.pools],
                      **({"sharedClaims": [c.to_dict() for c in r.shared]} if r.shared else {})} for r in self.runs],
        }

    def text_lines(self, pool_lines: Sequence[str]) -> list[str]:
        """The text: the header, the notes, the pools' settings (`pool_lines`, as simulate prints them), then
        a table per run."""
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}"
        out = [f"cluster {self.cluster} ({nodes}); pod {self.pod}", *(f"# {n}" for n in self.notes), "", *pool_lines]
        for run in self.runs:
            if len(self.runs) > 1:
                out += ["", f"== {run.heading()}"]
            out += ["", *self._table(run)]
            out += [f"  {c.text()}" for c in run.shared]
            out += [f"  why {p.pool}: {reason} ({n} node{'s' if n != 1 else ''})" for p in run.pools
                    for reason, n in p.why.items()]
            if self.workload_pods is not None:
                fit = run.exact
                out += ["", f"the workload's {self.workload_pods} pod(s): {'fit' if self.fits(run) else 'do not fit'} "
                        f"({fit} cop{'y' if fit == 1 else 'ies'} fit NUMA-exact)"]
        return out

    def _table(self, run: CapacityRun) -> list[str]:
        rows = [(p.pool, p.kubelet_version, str(p.nodes), str(p.exact), str(p.by_requests),
                 ", ".join(f"{k} ({v})" for k, v in p.limited_by.items())) for p in run.pools]
        rows.append(("total", "", str(self.nodes), str(run.exact), str(run.by_requests), ""))
        head = ("POOL", "KUBELET", "NODES", "FIT (NUMA-EXACT)", "FIT (SUM OF REQUESTS)", "LIMITED BY (NODES)")
        widths = [max(len(r[i]) for r in [*rows, head]) for i in range(6)]
        return ["  ".join(c.ljust(w) if i in (0, 1, 5) else c.rjust(w)
                          for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip() for r in (head, *rows)]
