"""Plain-data state of the static CPU policy (what `cpu_manager_state` persists) and its checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from numalign.errors import CheckpointError, InvalidInputError
from numalign.k8s.cpuset import format_cpuset, parse_cpuset

# podUID -> container name -> exclusive CPUs
Assignments = dict[str, dict[str, frozenset[int]]]

_DRAIN_ADVICE = (
    "static policy invalid state, please drain node and remove policy state file "
    "(<root-dir>/cpu_manager_state, default /var/lib/kubelet/cpu_manager_state)"
)


@dataclass
class CPUManagerState:
    """policyName, defaultCpuSet and the exclusive assignments, with CPU sets as frozensets."""

    policy_name: str = "static"
    default_cpu_set: frozenset[int] = frozenset()
    entries: Assignments = field(default_factory=dict)
    # KEP-5554 preview (inplace-resize-exclusive-cpus): the admission cpuset of each resized container
    # ("baseline CPUs"); empty unless a resize happened, and then absent from the checkpoint.
    baselines: Assignments = field(default_factory=dict)

    def copy(self) -> CPUManagerState:
        return CPUManagerState(
            self.policy_name,
            self.default_cpu_set,
            {uid: dict(ctrs) for uid, ctrs in self.entries.items()},
            {uid: dict(ctrs) for uid, ctrs in self.baselines.items()},
        )

    def baseline_strings(self) -> dict[str, dict[str, str]]:
        """The baselines in the checkpoint's cpuset text form."""
        return {uid: {name: format_cpuset(cpus) for name, cpus in ctrs.items()}
                for uid, ctrs in self.baselines.items()}

    def to_strings(self) -> tuple[str, str, dict[str, dict[str, str]]]:
        """(policyName, defaultCpuSet, entries) in the checkpoint's cpuset text form."""
        entries = {
            uid: {name: format_cpuset(cpus) for name, cpus in ctrs.items()}
            for uid, ctrs in self.entries.items()
        }
        return self.policy_name, format_cpuset(self.default_cpu_set), entries

    @classmethod
    def from_strings(
        cls,
        policy_name: str,
        default_cpu_set: str,
        entries: Mapping[str, Mapping[str, str]] | None = None,
        where: str = "cpu_manager_state",
        baselines: Mapping[str, Mapping[str, str]] | None = None,
    ) -> CPUManagerState:
        """Parse the checkpoint's text fields; unparsable CPU sets are a CheckpointError."""
        try:
            default = parse_cpuset(default_cpu_set, f"{where}: defaultCpuSet")
            parsed: Assignments = {
                uid: {
                    name: parse_cpuset(text, f"{where}: entries[{uid}][{name}]")
                    for name, text in ctrs.items()
                }
                for uid, ctrs in (entries or {}).items()
            }
            base: Assignments = {
                uid: {
                    name: parse_cpuset(text, f"{where}: baselines[{uid}][{name}]")
                    for name, text in ctrs.items()
                }
                for uid, ctrs in (baselines or {}).items()
            }
        except InvalidInputError as e:
            raise CheckpointError(f"{e}; {_DRAIN_ADVICE}") from None
        return cls(policy_name, default, parsed, base)


def validate_state(
    state: CPUManagerState,
    all_cpus: frozenset[int],
    reserved: frozenset[int],
    strict_cpu_reservation: bool,
) -> CPUManagerState:
    """Upstream staticPolicy.validateState. Returns the state to use (initialized when empty).

    `all_cpus` is every CPU of the topology; with strict reservation the reserved CPUs are not
    part of the shared pool at all.
    """
    if strict_cpu_reservation:
        all_cpus = all_cpus - reserved
    default = state.default_cpu_set
    if not default:
        if state.entries:
            raise CheckpointError(f"default cpuset cannot be empty; {_DRAIN_ADVICE}")
        return CPUManagerState(state.policy_name, all_cpus, {})
    if strict_cpu_reservation:
        if reserved & default:
            raise CheckpointError(
                f'some of strictly reserved cpus: "{format_cpuset(reserved & default)}" are present in '
                f'defaultCpuSet: "{format_cpuset(default)}"; {_DRAIN_ADVICE}'
            )
    elif not reserved <= default:
        raise CheckpointError(
            f'not all reserved cpus: "{format_cpuset(reserved)}" are present in defaultCpuSet: '
            f'"{format_cpuset(default)}"; {_DRAIN_ADVICE}'
        )
    for uid in sorted(state.entries):
        for name in sorted(state.entries[uid]):
            cset = state.entries[uid][name]
            if cset & default:
                raise CheckpointError(
                    f'pod: {uid}, container: {name} cpuset: "{format_cpuset(cset)}" overlaps with '
                    f'default cpuset "{format_cpuset(default)}"; {_DRAIN_ADVICE}'
                )
    known = set(default)
    for ctrs in state.entries.values():
        for cset in ctrs.values():
            known |= cset
    if known != all_cpus:
        raise CheckpointError(
            f'current set of available CPUs "{format_cpuset(all_cpus)}" doesn\'t match with CPUs in '
            f'state "{format_cpuset(known)}"; {_DRAIN_ADVICE}'
        )
    return state.copy()

