"""Topology Manager policy options, parsed and validated the kubelet's way (policy_options.go).

Error texts are the kubelet's, verbatim, so users can grep their kubelet logs for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from numalign.errors import ConfigError

PREFER_CLOSEST_NUMA_NODES = "prefer-closest-numa-nodes"
MAX_ALLOWABLE_NUMA_NODES = "max-allowable-numa-nodes"
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8

ALPHA_GATE = "TopologyManagerPolicyAlphaOptions"
BETA_GATE = "TopologyManagerPolicyBetaOptions"


class Maturity(StrEnum):
    ALPHA = "alpha"
    BETA = "beta"
    STABLE = "stable"


# Graduation in the newest release (1.35): both options GA.
OPTION_MATURITY: dict[str, Maturity] = {
    PREFER_CLOSEST_NUMA_NODES: Maturity.STABLE,
    MAX_ALLOWABLE_NUMA_NODES: Maturity.STABLE,
}
# Graduation per release, for users pinned to an older kubelet (and for upstream's 1.32-era tests).
OPTION_MATURITY_BY_RELEASE: dict[str, dict[str, Maturity]] = {
    "1.28": {PREFER_CLOSEST_NUMA_NODES: Maturity.BETA},
    "1.31": {PREFER_CLOSEST_NUMA_NODES: Maturity.BETA, MAX_ALLOWABLE_NUMA_NODES: Maturity.BETA},
    "1.32": {PREFER_CLOSEST_NUMA_NODES: Maturity.STABLE, MAX_ALLOWABLE_NUMA_NODES: Maturity.BETA},
    "1.35": OPTION_MATURITY,
}
# Feature-gate defaults: alpha options off, beta options on.
DEFAULT_GATES: dict[str, bool] = {ALPHA_GATE: False, BETA_GATE: True}

_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MAX = 2**63 - 1


def go_parse_bool(text: str) -> bool | None:
    """Go strconv.ParseBool: None when the text is not one of Go's accepted spellings."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    return None


def go_atoi_error(text: str) -> str | None:
    """The strconv.Atoi error text for `text`, or None when it parses."""
    if not _GO_INT.fullmatch(text):
        return f'strconv.Atoi: parsing "{text}": invalid syntax'
    if not -_INT64_MAX - 1 <= int(text) <= _INT64_MAX:
        return f'strconv.Atoi: parsing "{text}": value out of range'
    return None


def check_policy_option_available(
    name: str, gates: Mapping[str, bool] | None = None, table: Mapping[str, Maturity] | None = None
) -> None:
    g = {**DEFAULT_GATES, **(gates or {})}
    maturity = (OPTION_MATURITY if table is None else table).get(name)
    if maturity is None:
        # The kubelet's text first (tests and logs match on it), then what would have been accepted.
        raise ConfigError(
            f'unknown Topology Manager Policy option: "{name}"; known options: {", ".join(sorted(OPTION_MATURITY))}'
        )
    if maturity is Maturity.ALPHA and not g.get(ALPHA_GATE, False):
        raise ConfigError(f'topology manager policy alpha-level options not enabled, but option "{name}" provided')
    if maturity is Maturity.BETA and not g.get(BETA_GATE, True):
        raise ConfigError(f'topology manager policy beta-level options not enabled, but option "{name}" provided')


@dataclass(frozen=True)
class PolicyOptions:
    prefer_closest_numa: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES

    @classmethod
    def parse(
        cls,
        options: Mapping[str, str] | None,
        gates: Mapping[str, bool] | None = None,
        maturity: Mapping[str, Maturity] | None = None,
    ) -> PolicyOptions:
        """Upstream NewPolicyOptions. Keys are checked in sorted order so that, unlike Go's random
        map order, the first error reported is deterministic. `maturity` selects another release's
        graduation table (see OPTION_MATURITY_BY_RELEASE)."""
        prefer = False
        max_nodes = DEFAULT_MAX_ALLOWABLE_NUMA_NODES
        for name in sorted(options or {}):
            value = (options or {})[name]
            check_policy_option_available(name, gates, maturity)
            if name == PREFER_CLOSEST_NUMA_NODES:
                parsed = go_parse_bool(value)
                if parsed is None:
                    raise ConfigError(
                        f'bad value for option "{name}": strconv.ParseBool: parsing "{value}": invalid syntax'
                        "; expected true or false"
                    )
                prefer = parsed
            elif name == MAX_ALLOWABLE_NUMA_NODES:
                err = go_atoi_error(value)
                if err is not None:
                    raise ConfigError(
                        f'unable to convert policy option to integer "{name}": {err}; expected an integer '
                        f">= {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
                    )
                n = int(value)
                if n < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                    raise ConfigError(
                        f'the minimum value of "{name}" should not be less than {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}'
                    )
                max_nodes = n
            else:  # unreachable while OPTION_MATURITY and this chain agree
                raise ConfigError(f'unsupported topologymanager option: "{name}" ({value})')
        return cls(prefer, max_nodes)

    def to_dict(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.prefer_closest_numa:
            out[PREFER_CLOSEST_NUMA_NODES] = "true"
        if self.max_allowable_numa_nodes != DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
            out[MAX_ALLOWABLE_NUMA_NODES] = str(self.max_allowable_numa_nodes)
        return out
