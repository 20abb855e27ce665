"""The kubelet versions numalign decides as, and the one table of what differs between them.

Everything that depends on the kubelet version is asked here, by name: the feature gates' defaults and
locks (upstream's versioned feature gates, pkg/features/kube_features.go), which Topology Manager and
CPU Manager policy options a version accepts and behind which gate, and every decision-affecting change
in pkg/kubelet/cm and the kubelet's admit handlers (CHANGES, each with its PR and the first version of
each minor that has it). The managers read a `Behaviours` value; no other module compares versions.

The version itself (parsing, the supported range, the default) is numalign.k8s.version's, shared with
the scheduler. docs/kubelet-versions.md presents this table (a test keeps the two equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from numalign.core.policies.options import Maturity
from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.pod import Pod

# The version names re-exported for callers written before the version moved to numalign.k8s.version
# (new code imports it from there).
from numalign.k8s.version import DEFAULT as DEFAULT
from numalign.k8s.version import NEWEST as NEWEST
from numalign.k8s.version import NEWEST_PATCH as NEWEST_PATCH
from numalign.k8s.version import OLDEST as OLDEST
from numalign.k8s.version import PREVIEWS as PREVIEWS
from numalign.k8s.version import SUPPORTED as SUPPORTED
from numalign.k8s.version import SUPPORTED_TEXT as SUPPORTED_TEXT
from numalign.k8s.version import KubeletVersion as KubeletVersion
from numalign.k8s.version import resolve as resolve
from numalign.k8s.version import v as v

# What `numalign replay` assumes for the shared oracle vectors, which were recorded from 1.35-era code.
REPLAY_DEFAULT: Final = KubeletVersion(1, 35, NEWEST_PATCH[(1, 35)])


# ---- feature gates ------------------------------------------------------------------------------------


class Stage(StrEnum):
    ALPHA = "alpha"
    BETA = "beta"
    GA = "GA"
    DEPRECATED = "deprecated"


@dataclass(frozen=True)
class GateStage:
    """One VersionedSpecs entry: from minor `since` on, the gate has this default, stage and lock."""

    since: tuple[int, int]
    default: bool
    stage: Stage
    locked: bool = False
    pr: int | None = None  # the k/k PR that made this step, where the table's sources name it
    removed: bool = False  # from `since` on the kubelet no longer knows the gate


@dataclass(frozen=True)
class GateSpec:
    name: str
    stages: tuple[GateStage, ...]
    # What numalign does with the gate on (the managers' reading of it).
    effect: str = ""

    def at(self, version: KubeletVersion) -> GateStage | None:
        """The spec in force at `version`, None when that kubelet does not know the gate."""
        current = None
        for stage in self.stages:
            if stage.since <= version.minor_key:
                current = stage
        return None if current is None or current.removed else current

    def removed_in(self, version: KubeletVersion) -> tuple[int, int] | None:
        """The minor that removed the gate, when `version` is at or after it."""
        last = [s for s in self.stages if s.since <= version.minor_key]
        return last[-1].since if last and last[-1].removed else None


_A, _B, _GA = Stage.ALPHA, Stage.BETA, Stage.GA
# The gates that change what the resource managers or the admit handlers decide, as upstream's
# pkg/features VersionedSpecs give them (steps before 1.33 kept only where they set the 1.33 state).
FEATURE_GATES: Final[tuple[GateSpec, ...]] = (
    GateSpec("CPUManagerPolicyAlphaOptions", (GateStage((1, 23), False, _A),),
             "CPU Manager alpha policy options are accepted"),
    GateSpec("CPUManagerPolicyBetaOptions", (GateStage((1, 23), True, _B),),
             "CPU Manager beta policy options are accepted"),
    GateSpec("CPUManagerPolicyOptions", (GateStage((1, 23), True, _B), GateStage((1, 33), True, _GA, True)),
             "cpuManagerPolicyOptions are read at all (locked on from 1.33)"),
    # The 1.36 binary's spec puts LockToDefault on the 1.32 GA step; the 1.35 binary's has no lock, so in
    # this table (what each release's binary enforces) the lock starts at 1.36.
    GateSpec("TopologyManagerPolicyOptions", (GateStage((1, 28), True, _B), GateStage((1, 32), True, _GA),
                                              GateStage((1, 36), True, _GA, True)),
             "topologyManagerPolicyOptions are read at all (1.33-1.35: off with options set, the kubelet does "
             "not start; locked on from 1.36)"),
    GateSpec("TopologyManagerPolicyAlphaOptions", (GateStage((1, 26), False, _A),),
             "Topology Manager alpha policy options are accepted"),
    GateSpec("TopologyManagerPolicyBetaOptions", (GateStage((1, 28), True, _B),),
             "Topology Manager beta policy options are accepted"),
    GateSpec("KubeletPodResourcesGet", (GateStage((1, 27), False, _A), GateStage((1, 34), True, _B),
                                        GateStage((1, 36), True, _GA, True, 136728)),
             "the PodResources Get endpoint answers"),
    GateSpec("PodLevelResources", (GateStage((1, 32), False, _A), GateStage((1, 34), True, _B, pr=132999)),
             "pods with spec.resources are admitted (off: rejected as PodLevelResourcesNotSupported)"),
    GateSpec("PodLevelResourceManagers", (GateStage((1, 36), False, _A), GateStage((1, 37), False, _B, pr=141209)),
             "the managers align pods by spec.resources (KEP-5526; beta in 1.37 by #140573, off by default "
             "by #141209); numalign does not model this yet and refuses to decide such a pod when it is on"),
    GateSpec("InPlacePodVerticalScaling", (GateStage((1, 27), False, _A), GateStage((1, 33), True, _B),
                                           GateStage((1, 35), True, _GA, True),
                                           GateStage((1, 38), True, _GA, True, removed=True)),
             "in-place resize (numalign does not model resizes; accepted for the gate's lock only)"),
    GateSpec("InPlacePodVerticalScalingExclusiveCPUs", (GateStage((1, 32), False, _A),),
             "resize of exclusive CPUs (not modelled; accepted for the gate only)"),
    GateSpec("InPlacePodVerticalScalingExclusiveMemory", (GateStage((1, 34), False, _A),),
             "resize of Memory Manager pinned memory (not modelled; accepted for the gate only)"),
    GateSpec("InPlacePodLevelResourcesVerticalScaling", (GateStage((1, 35), False, _A), GateStage((1, 36), True, _B)),
             "resize of spec.resources (not modelled; accepted for the gate only)"),
)
_GATES_BY_NAME: Final = {g.name: g for g in FEATURE_GATES}
KNOWN_GATES: Final = tuple(g.name for g in FEATURE_GATES)


def feature_gate_defaults(version: KubeletVersion) -> Mapping[str, bool]:
    """Each modelled gate the kubelet at `version` knows, with its default there."""
    return {g.name: s.default for g in FEATURE_GATES if (s := g.at(version)) is not None}


def locked_gates(version: KubeletVersion) -> frozenset[str]:
    """The gates locked to their default at `version` (GA with LockToDefault)."""
    return frozenset(g.name for g in FEATURE_GATES if (s := g.at(version)) is not None and s.locked)


def gate_stage(name: str, version: KubeletVersion) -> GateStage | None:
    gate = _GATES_BY_NAME.get(name)
    return None if gate is None else gate.at(version)


def check_feature_gates(gates: Mapping[str, bool], version: KubeletVersion, where: str) -> None:
    """Refuse what the kubelet at `version` refuses when its feature gates are set: a modelled gate it
    does not know yet, and a locked gate set against its lock (component-base featuregate's texts first,
    then the fix). Gates numalign does not model are left to the caller (it warns about them)."""
    for name in sorted(gates):
        gate = _GATES_BY_NAME.get(name)
        if gate is None:
            continue
        stage = gate.at(version)
        removed = gate.removed_in(version)
        if stage is None and removed is not None:
            raise ConfigError(
                f"{where}: unrecognized feature gate: {name}; kubelet {version} no longer has it (removed in "
                f"{removed[0]}.{removed[1]}, after it went GA and locked on): drop it"
            )
        if stage is None:
            first = gate.stages[0]
            raise ConfigError(
                f"{where}: unrecognized feature gate: {name}; kubelet {version} does not have it (it appears in "
                f"{first.since[0]}.{first.since[1]}): drop it, or give a kubelet version that has it"
            )
        if stage.locked and gates[name] != stage.default:
            raise ConfigError(
                f"{where}: cannot set feature gate {name} to {str(gates[name]).lower()}, feature is locked to "
                f"{str(stage.default).lower()}; kubelet {version} has it {stage.stage} and locked, drop the setting"
            )


def check_option_gates(topology_options: Mapping[str, str], gates: Mapping[str, bool]) -> None:
    """The kubelet's start-up refusal (cmd/kubelet/app/server.go) of topologyManagerPolicyOptions when the
    TopologyManagerPolicyOptions gate is off (GA but not locked in 1.32-1.35; from 1.36 check_feature_gates
    refuses the gate set off first). cpuManagerPolicyOptions' gate is locked on in every supported version."""
    if topology_options and not gates.get("TopologyManagerPolicyOptions", True):
        shown = " ".join(f"{k}:{topology_options[k]}" for k in sorted(topology_options))
        raise ConfigError(
            f'topology manager policy options map[{shown}] require feature gates "TopologyManagerPolicyOptions" '
            "enabled; turn the gate on (its default) or drop topologyManagerPolicyOptions"
        )


def refuse_unmodelled(pod: Pod, gates: Mapping[str, bool], version: KubeletVersion) -> None:
    """Raise for a pod whose decision depends on a feature numalign does not model at `version`:
    with PodLevelResourceManagers on (KEP-5526), the managers align a pod by its spec.resources."""
    if pod.has_pod_level_resources and gates.get("PodLevelResourceManagers", False):
        raise InvalidInputError(
            f"pod {pod.key}: sets spec.resources and the PodLevelResourceManagers feature gate is on (kubelet "
            f"{version}); numalign does not model pod-level resource managers (KEP-5526) yet; turn the gate off "
            "(its default) or drop spec.resources to ask about this node"
        )


# The 1.38.0-beta.0 changes numalign's preview does not model yet, by the CPU Manager option they act under.
PREVIEW_UNMODELLED_CPU_OPTIONS: Final[Mapping[str, str]] = {
    "distribute-cpus-across-cores": "k/k #140766 (spread over physical cores by topology) and #141238 (with "
                                    "align-by-socket)",
    "prefer-align-cpus-by-uncorecache": "1.38's uncore cache walk (full caches first, caches spanning NUMA nodes "
                                        "listed once)",
}


def refuse_unmodelled_preview(cpu_options: Mapping[str, str], version: KubeletVersion) -> None:
    """At a preview version, refuse a configuration whose CPU allocation depends on a change of that
    pre-release numalign does not model, instead of answering as the release before it would."""
    if not version.is_preview:
        return
    for name in sorted(cpu_options):
        what = PREVIEW_UNMODELLED_CPU_OPTIONS.get(name)
        if what is not None and str(cpu_options[name]).lower() in ("true", "1", "t"):
            raise ConfigError(
                f"cpuManagerPolicyOptions: {name} at kubelet {version} (a preview): numalign does not model "
                f"{what} yet; drop the option or decide as a released kubelet (--kubelet-version 1.37)"
            )


def effective_gates(config_gates: Mapping[str, bool], version: KubeletVersion) -> dict[str, bool]:
    """The gates a kubelet at `version` runs with: its defaults, overridden by what was set."""
    return {**feature_gate_defaults(version), **config_gates}


# ---- policy options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OptionStep:
    since: tuple[int, int]
    maturity: Maturity
    pr: int | None = None


@dataclass(frozen=True)
class OptionSpec:
    """A manager policy option: its maturity from each minor on (the first step is when it appeared)."""

    manager: str  # "topology" | "cpu"
    name: str
    steps: tuple[OptionStep, ...]

    def at(self, version: KubeletVersion) -> Maturity | None:
        current = None
        for step in self.steps:
            if step.since <= version.minor_key:
                current = step.maturity
        return current


_MA, _MB, _MS = Maturity.ALPHA, Maturity.BETA, Maturity.STABLE
POLICY_OPTIONS: Final[tuple[OptionSpec, ...]] = (
    OptionSpec("topology", "prefer-closest-numa-nodes",
               (OptionStep((1, 26), _MA), OptionStep((1, 28), _MB), OptionStep((1, 32), _MS))),
    OptionSpec("topology", "max-allowable-numa-nodes",
               (OptionStep((1, 31), _MB, 124148), OptionStep((1, 35), _MS, 134614))),
    OptionSpec("cpu", "full-pcpus-only", (OptionStep((1, 22), _MB), OptionStep((1, 33), _MS, 129950))),
    OptionSpec("cpu", "distribute-cpus-across-numa", (OptionStep((1, 23), _MA), OptionStep((1, 33), _MB))),
    OptionSpec("cpu", "align-by-socket", (OptionStep((1, 25), _MA),)),
    OptionSpec("cpu", "distribute-cpus-across-cores", (OptionStep((1, 31), _MA),)),
    OptionSpec("cpu", "strict-cpu-reservation",
               (OptionStep((1, 32), _MA), OptionStep((1, 33), _MB, 130290), OptionStep((1, 35), _MS, 134388))),
    OptionSpec("cpu", "prefer-align-cpus-by-uncorecache",
               (OptionStep((1, 32), _MA), OptionStep((1, 34), _MB, 132970), OptionStep((1, 36), _MS, 137055))),
)
# The gate an option of each maturity needs, per manager (stable options need none). The Memory
# Manager takes no policy options in 1.33-1.37 (memoryManagerPolicyOptions is a 1.38 proposal).
OPTION_GATES: Final[Mapping[str, Mapping[Maturity, str]]] = {
    "topology": {_MA: "TopologyManagerPolicyAlphaOptions", _MB: "TopologyManagerPolicyBetaOptions"},
    "cpu": {_MA: "CPUManagerPolicyAlphaOptions", _MB: "CPUManagerPolicyBetaOptions"},
}


def option_maturity(manager: str, version: KubeletVersion) -> dict[str, Maturity]:
    """The options `manager`'s policy accepts at `version`, with their maturity there."""
    return {o.name: m for o in POLICY_OPTIONS if o.manager == manager and (m := o.at(version)) is not None}


# ---- decision-affecting changes ---------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One decision-affecting upstream change in pkg/kubelet/cm or the admit handlers.

    `since` holds the first version of each minor that has it: the release it merged into (every later
    minor has it from .0) and each patch release it was cherry-picked into."""

    name: str
    pr: int
    since: tuple[KubeletVersion, ...]
    summary: str

    def present_in(self, version: KubeletVersion) -> bool:
        landed = max(s.minor_key for s in self.since)
        if version.minor_key > landed:
            return True
        return any(s.minor_key == version.minor_key and version >= s for s in self.since)

    def last_without(self, minor: tuple[int, int]) -> KubeletVersion | None:
        """The newest supported version of `minor` without the change (None: all of them have it)."""
        candidates = [x for x in SUPPORTED if x.minor_key == minor and not self.present_in(x)]
        return max(candidates) if candidates else None


DEVICE_HINTS_OVER_DEVICE_NUMA_NODES: Final = "device-hints-over-device-numa-nodes"
DISTRIBUTE_ACROSS_NUMA_BY_SOCKET: Final = "distribute-across-numa-by-socket"
UNCORE_ODD_CPUS: Final = "uncore-cache-odd-cpus"
DISTRIBUTED_WHOLE_GROUPS: Final = "distributed-remainder-whole-groups"
DISTRIBUTED_KEEPS_HINT_NUMAS: Final = "distributed-keeps-hint-numa-count"

CHANGES: Final[tuple[Change, ...]] = (
    Change(
        DEVICE_HINTS_OVER_DEVICE_NUMA_NODES,
        138244,
        (v("1.36.0"),),
        "The device manager enumerates hint masks only over the NUMA nodes that host a registered device "
        "of the resource (any state) and adds no other hint (the real 1.36.3 and 1.37.2 code). Not "
        "cherry-picked into 1.33-1.35 patches.",
    ),
    Change(
        DISTRIBUTE_ACROSS_NUMA_BY_SOCKET,
        139778,
        (v("1.37.0"),),
        "With `distribute-cpus-across-numa` and `align-by-socket`, the distributed allocation prefers a "
        "combination of NUMA nodes within one socket over any cross-socket one (balance decides within "
        "each kind) and asks no NUMA node for more whole groups than it has free, the rest going to the "
        "remainder (the real 1.37.2 takeByTopologyNUMADistributed; 1.36.3 spreads by balance only). Not "
        "cherry-picked into 1.33-1.36 patches.",
    ),
    Change(
        UNCORE_ODD_CPUS,
        131850,
        (v("1.34.0"),),
        "prefer-align-cpus-by-uncorecache: takePartialUncore counts the cores needed rounding up and, for an "
        "odd count on SMT machines, leaves out the last thread, so an odd request fits a partial uncore cache. "
        "1.33 (the option alpha there) rounds down: 3 CPUs of free 0-5 on 2 sockets x 2 cores x 2 threads "
        "are 0,4,5 in 1.33 and 0,1,2 from 1.34. Not in any 1.33 patch (1.33.13's code has the old rule).",
    ),
    Change(
        DISTRIBUTED_WHOLE_GROUPS,
        140730,
        (v("1.38.0-alpha.1"),),
        "distribute-cpus-across-numa with full-pcpus-only: a remainder subset must hold the remainder in "
        "whole cores. Before it (every released kubelet to 1.37) the kubelet loops forever in Allocate "
        "when a subset's free CPUs add up but not in whole cores; numalign says so instead of answering.",
    ),
    Change(
        DISTRIBUTED_KEEPS_HINT_NUMAS,
        139456,
        (v("1.38.0-alpha.1"),),
        "distribute-cpus-across-numa: the allocation from the Topology Manager's affinity spreads over at least "
        "as many NUMA nodes as the affinity has (when that many can hold it), instead of shrinking a multi-NUMA "
        "affinity (e.g. for GPUs on several nodes) to the fewest nodes; each combination is handed over as a "
        "copy (no Go slice aliasing of kept combinations).",
    ),
)
_CHANGES_BY_NAME: Final = {c.name: c for c in CHANGES}


def has_change(name: str, version: KubeletVersion) -> bool:
    return _CHANGES_BY_NAME[name].present_in(version)


@dataclass(frozen=True)
class Behaviours:
    """What the kubelet at one version does differently, by name. The managers read these fields."""

    version: KubeletVersion
    # k/k #138244: device hints over the device-hosting NUMA nodes only.
    device_hints_over_device_numa_nodes: bool
    # k/k #139778: distribute-cpus-across-numa honours align-by-socket when it picks NUMA nodes.
    distribute_across_numa_by_socket: bool
    # k/k #131850: an odd request fits a partial uncore cache on SMT machines (1.34+).
    uncore_odd_cpus: bool
    # k/k #140730: remainder subsets in whole groups (1.38); without it Allocate can hang.
    distributed_whole_groups: bool
    # k/k #139456: the aligned distributed take keeps the affinity's NUMA node count (1.38), no aliasing.
    distributed_keeps_hint_numas: bool
    # k8s.io/kubelet's device-plugin API is gogo-generated up to 1.33 (protoc-gen-go from 1.34): a
    # message's %v in the kubelet's errors is gogo's struct text there, the protobuf text format after.
    gogo_api_text: bool
    # Option name -> maturity, per manager ("topology", "cpu"), at this version.
    topology_option_maturity: Mapping[str, Maturity]
    cpu_option_maturity: Mapping[str, Maturity]


def behaviours(version: KubeletVersion) -> Behaviours:
    return Behaviours(
        version=version,
        device_hints_over_device_numa_nodes=has_change(DEVICE_HINTS_OVER_DEVICE_NUMA_NODES, version),
        distribute_across_numa_by_socket=has_change(DISTRIBUTE_ACROSS_NUMA_BY_SOCKET, version),
        uncore_odd_cpus=has_change(UNCORE_ODD_CPUS, version),
        distributed_whole_groups=has_change(DISTRIBUTED_WHOLE_GROUPS, version),
        distributed_keeps_hint_numas=has_change(DISTRIBUTED_KEEPS_HINT_NUMAS, version),
        gogo_api_text=version.minor_key < (1, 34),
        topology_option_maturity=option_maturity("topology", version),
        cpu_option_maturity=option_maturity("cpu", version),
    )


# What a manager built without a version decides as: the default version's behaviours.
DEFAULT_BEHAVIOURS: Final = behaviours(DEFAULT)


# ---- the table as docs/kubelet-versions.md shows it ----------------------------------------------------


def _minor(m: tuple[int, int]) -> str:
    return f"{m[0]}.{m[1]}"


def _pr(pr: int | None) -> str:
    return f"[#{pr}](https://github.com/kubernetes/kubernetes/pull/{pr})" if pr else "-"


def _columns() -> list[tuple[str, KubeletVersion]]:
    """The table's columns: each supported minor (as its .0; graduations are per minor), then each preview."""
    return ([(_minor(m), KubeletVersion(m[0], m[1], 0)) for m in NEWEST_PATCH]
            + [(f"{p} (preview)", p) for p in PREVIEWS])


def _gate_cell(g: GateSpec, version: KubeletVersion) -> str:
    st = g.at(version)
    if st is None:
        return "removed" if g.removed_in(version) else "-"
    new_here = st.pr and st.since == version.minor_key
    return (f"{st.stage} {'on' if st.default else 'off'}" + (" locked" if st.locked else "")
            + (f" {_pr(st.pr)}" if new_here else ""))


def render_markdown() -> str:
    """The generated part of docs/kubelet-versions.md (tests keep the page equal to this)."""
    cols = _columns()
    lines = ["### Supported versions", "", "| minor | modelled patches | `X.Y` means |", "|---|---|---|"]
    for (a, b), newest in NEWEST_PATCH.items():
        lines.append(f"| {a}.{b} | {a}.{b}.0 to {a}.{b}.{newest} (later patches: as {a}.{b}.{newest}) | "
                     f"{a}.{b}.{newest} |")
    for p in PREVIEWS:
        lines.append(f"| {_minor(p.minor_key)} | {p} only, a preview (named exactly) | - |")
    lines += ["", f"Default: **{DEFAULT}**. `numalign replay` default: **{REPLAY_DEFAULT}**.", ""]
    lines += ["### Decision-affecting changes", "", "| change | PR | first version of each minor that has it | what "
              "changes |", "|---|---|---|---|"]
    for c in CHANGES:
        firsts = ", ".join(str(s) for s in c.since) + " (and every later minor from .0)"
        lines.append(f"| `{c.name}` | {_pr(c.pr)} | {firsts} | {c.summary} |")
    lines += ["", "### Policy options by version", "", "| manager | option | "
              + " | ".join(label for label, _ in cols) + " | steps (PR) |", "|---|---|" + "---|" * (len(cols) + 1)]
    for o in POLICY_OPTIONS:
        cells = [str(o.at(at) or "-") for _, at in cols]
        steps = "; ".join(f"{s.maturity} {_minor(s.since)} {_pr(s.pr)}" for s in o.steps)
        lines.append(f"| {o.manager} | `{o.name}` | " + " | ".join(cells) + f" | {steps} |")
    lines += ["", "An alpha option needs the manager's `...PolicyAlphaOptions` gate, a beta one its "
              "`...PolicyBetaOptions` gate; a stable one needs none.", "",
              "### Feature gates by version", "", "| gate | " + " | ".join(label for label, _ in cols)
              + " | what it changes in numalign |", "|---|" + "---|" * (len(cols) + 1)]
    for g in FEATURE_GATES:
        lines.append(f"| `{g.name}` | " + " | ".join(_gate_cell(g, at) for _, at in cols) + f" | {g.effect} |")
    return "\n".join(lines) + "\n"
