"""Replay handler for merge scenarios (oracle merge_vectors.jsonl format)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.core.bitmask import bits_of
from numalign.core.hint import ProviderHints, provider_hints_from_json
from numalign.core.numa import NUMAInfo
from numalign.core.policies.startup import StartupError, start_policy
from numalign.errors import InvalidInputError
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.versions import REPLAY_DEFAULT, option_maturity


def _require(scenario: Mapping[str, Any], key: str, kind: type) -> Any:
    if key not in scenario:
        raise InvalidInputError(f"scenario {scenario.get('id', '?')!r}: missing field {key!r}")
    value = scenario[key]
    if not isinstance(value, kind):
        raise InvalidInputError(
            f"scenario {scenario.get('id', '?')!r}: field {key!r} must be {kind.__name__}, got {value!r}"
        )
    return value


def numa_info_from_scenario(scenario: Mapping[str, Any]) -> NUMAInfo:
    nodes = _require(scenario, "numa_nodes", list)
    raw = scenario.get("distances")
    distances = None
    if raw is not None:
        if not isinstance(raw, dict):
            raise InvalidInputError(f"scenario {scenario.get('id', '?')!r}: 'distances' must be an object or null")
        distances = {int(k): v for k, v in raw.items()}
    return NUMAInfo.create([int(n) for n in nodes], distances)


def replay_merge(scenario: dict[str, Any], version: KubeletVersion = REPLAY_DEFAULT) -> dict[str, Any]:
    """The merged hint, or, for a scenario the kubelet could not start with (its Topology Manager's
    start-up checks fail), `{"startup_error": <the kubelet's text>}` as that scenario's result."""
    numa = numa_info_from_scenario(scenario)
    options = {str(k): str(v) for k, v in (scenario.get("options") or {}).items()}
    try:
        policy = start_policy(str(scenario.get("policy", "best-effort")), numa, options,
                              maturity=option_maturity("topology", version)).policy
    except StartupError as e:
        return startup_failure(e)
    raw_providers = _require(scenario, "providers", list)
    providers: list[ProviderHints] = [
        provider_hints_from_json(p, f"providers[{i}]") for i, p in enumerate(raw_providers)
    ]
    result = policy.merge(providers)
    mask = result.hint.mask
    return {
        "mask": None if mask is None else bits_of(mask),
        "preferred": result.hint.preferred,
        "admit": result.admit,
        "deterministic": True,
    }


def startup_failure(error: StartupError) -> dict[str, Any]:
    """A scenario's result when the kubelet would not start: its error text, and numalign's fix."""
    return {"startup_error": error.kubelet_message, "fix": error.fix}
