"""CPU manager policy options (upstream policy_options.go, spec §1.7), with kubelet wording.

Options arrive as the kubelet's map name -> string (cpuManagerPolicyOptions). Each name must be
known, its maturity level's feature gate must be on, and its value must parse as a Go boolean.
Upstream walks the map in random order, so with several bad options the error it reports varies;
we check them in sorted name order so the same input always gives the same message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from numalign.core.policies.options import Maturity, go_parse_bool
from numalign.errors import ConfigError
from numalign.kubelet.cpumanager.take import TakeOptions
from numalign.kubelet.versions import DEFAULT_BEHAVIOURS, Behaviours

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_CPUS_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
DISTRIBUTE_CPUS_ACROSS_CORES = "distribute-cpus-across-cores"
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
PREFER_ALIGN_CPUS_BY_UNCORECACHE = "prefer-align-cpus-by-uncorecache"

ALPHA_GATE = "CPUManagerPolicyAlphaOptions"
BETA_GATE = "CPUManagerPolicyBetaOptions"

# Maturity of each option in the newest released kubelet.
ALPHA_OPTIONS = frozenset({ALIGN_BY_SOCKET, DISTRIBUTE_CPUS_ACROSS_CORES})
BETA_OPTIONS = frozenset({DISTRIBUTE_CPUS_ACROSS_NUMA, STRICT_CPU_RESERVATION, PREFER_ALIGN_CPUS_BY_UNCORECACHE})
STABLE_OPTIONS = frozenset({FULL_PCPUS_ONLY})
ALL_OPTIONS = ALPHA_OPTIONS | BETA_OPTIONS | STABLE_OPTIONS

# Kubelet defaults of the two gates.
DEFAULT_FEATURE_GATES: Mapping[str, bool] = {ALPHA_GATE: False, BETA_GATE: True}

_FIELDS = {
    FULL_PCPUS_ONLY: "full_pcpus_only",
    DISTRIBUTE_CPUS_ACROSS_NUMA: "distribute_cpus_across_numa",
    ALIGN_BY_SOCKET: "align_by_socket",
    DISTRIBUTE_CPUS_ACROSS_CORES: "distribute_cpus_across_cores",
    STRICT_CPU_RESERVATION: "strict_cpu_reservation",
    PREFER_ALIGN_CPUS_BY_UNCORECACHE: "prefer_align_cpus_by_uncorecache",
}

# Pairs upstream refuses together, in the order it checks them.
_EXCLUSIVE = (
    (FULL_PCPUS_ONLY, DISTRIBUTE_CPUS_ACROSS_CORES),
    (DISTRIBUTE_CPUS_ACROSS_NUMA, DISTRIBUTE_CPUS_ACROSS_CORES),
    (PREFER_ALIGN_CPUS_BY_UNCORECACHE, DISTRIBUTE_CPUS_ACROSS_CORES),
    (PREFER_ALIGN_CPUS_BY_UNCORECACHE, DISTRIBUTE_CPUS_ACROSS_NUMA),
)

# strconv.ParseBool, shared with the Topology Manager options (None: not a Go boolean spelling).
parse_go_bool = go_parse_bool


@dataclass(frozen=True, slots=True)
class StaticPolicyOptions:
    """Upstream StaticPolicyOptions."""

    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    align_by_socket: bool = False
    distribute_cpus_across_cores: bool = False
    strict_cpu_reservation: bool = False
    prefer_align_cpus_by_uncorecache: bool = False

    def take_options(self, behaviours: Behaviours = DEFAULT_BEHAVIOURS) -> TakeOptions:
        """The options as takeByTopology reads them, at the kubelet release `behaviours` is of."""
        return TakeOptions(
            full_pcpus_only=self.full_pcpus_only,
            distribute_cpus_across_numa=self.distribute_cpus_across_numa,
            distribute_cpus_across_cores=self.distribute_cpus_across_cores,
            prefer_align_cpus_by_uncorecache=self.prefer_align_cpus_by_uncorecache,
            align_by_socket=self.align_by_socket,
            uncore_rounds_up=behaviours.uncore_odd_cpus,
            distributed_by_socket=behaviours.distribute_across_numa_by_socket,
            distributed_whole_groups=behaviours.distributed_whole_groups,
            distributed_min_numas_from_hint=behaviours.distributed_keeps_hint_numas,
            go_slice_aliasing=not behaviours.distributed_keeps_hint_numas,
        )

    def to_map(self) -> dict[str, str]:
        """The enabled options as a kubelet cpuManagerPolicyOptions map."""
        return {name: "true" for name, f in _FIELDS.items() if getattr(self, f)}


def check_policy_option_available(
    option: str, feature_gates: Mapping[str, bool] | None = None, maturity: Mapping[str, Maturity] | None = None
) -> None:
    """Upstream CheckPolicyOptionAvailable: known name, and its maturity gate enabled. `maturity` is the
    kubelet version's graduation table (numalign.kubelet.versions.option_maturity); without it, the
    sets above."""
    gates = {**DEFAULT_FEATURE_GATES, **(feature_gates or {})}
    known = ALL_OPTIONS if maturity is None else frozenset(maturity)
    if option not in known:
        raise ConfigError(
            f'unknown CPU Manager Policy option: "{option}"'
            f" (known options: {', '.join(sorted(known))})"
        )
    alpha = ALPHA_OPTIONS if maturity is None else {n for n, m in maturity.items() if m is Maturity.ALPHA}
    beta = BETA_OPTIONS if maturity is None else {n for n, m in maturity.items() if m is Maturity.BETA}
    if option in alpha and not gates.get(ALPHA_GATE, False):
        raise ConfigError(
            f'CPU Manager Policy Alpha-level Options not enabled, but option "{option}" provided'
            f" (enable the feature gate {ALPHA_GATE}=true)"
        )
    if option in beta and not gates.get(BETA_GATE, False):
        raise ConfigError(
            f'CPU Manager Policy Beta-level Options not enabled, but option "{option}" provided'
            f" (enable the feature gate {BETA_GATE}=true)"
        )


def new_static_policy_options(
    policy_options: Mapping[str, str],
    feature_gates: Mapping[str, bool] | None = None,
    maturity: Mapping[str, Maturity] | None = None,
) -> StaticPolicyOptions:
    """Upstream NewStaticPolicyOptions: parse and cross-check the option map."""
    values: dict[str, bool] = {}
    for name in sorted(policy_options):
        check_policy_option_available(name, feature_gates, maturity)
        raw = policy_options[name]
        parsed = parse_go_bool(str(raw))
        if parsed is None:
            raise ConfigError(
                f'bad value for option "{name}": strconv.ParseBool: parsing "{raw}": invalid syntax'
                " (expected true or false)"
            )
        values[_FIELDS[name]] = parsed
    opts = StaticPolicyOptions(**values)
    for a, b in _EXCLUSIVE:
        if getattr(opts, _FIELDS[a]) and getattr(opts, _FIELDS[b]):
            raise ConfigError(f"static policy options {a} and {b} can not be used at the same time")
    return opts


def validate_static_policy_options(
    opts: StaticPolicyOptions, num_sockets: int, num_numa_nodes: int, topology_manager_policy: str
) -> None:
    """Upstream ValidateStaticPolicyOptions: align-by-socket needs a compatible TM policy and HW."""
    if not opts.align_by_socket:
        return
    if topology_manager_policy == "single-numa-node":
        # Upstream's message, typo included.
        raise ConfigError(
            "Topolgy manager single-numa-node policy is incompatible with CPUManager "
            "align-by-socket policy option"
        )
    if num_sockets > num_numa_nodes:
        raise ConfigError(
            "Align by socket is not compatible with hardware where number of sockets are more "
            "than number of NUMA"
        )


def check_none_policy_options(policy_options: Mapping[str, str]) -> None:
    """The none policy accepts no options at all."""
    if policy_options:
        raise ConfigError(
            "None policy: cannot create with options "
            f"(got {', '.join(sorted(policy_options))}; options need cpuManagerPolicy: static)"
        )
