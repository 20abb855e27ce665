"""Every upstream merge vector (tests/golden/data/merge_vectors.jsonl) through the implicit merge:
with the explicit lists as given, and with each list (that has no nil hint) re-described as an
ImplicitHints made only of listed extras, which drives the implicit code paths (preferred
candidates from extras, rigid options in the membership test) on all 3000 vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.reference_merge import policy_merge

from numalign.core.bitmask import bits_of
from numalign.core.hint import ProviderHints, TopologyHint, provider_hints_from_json
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.core.implicit.merge import ImplicitMerger
from numalign.core.merge import filter_providers_hints
from numalign.core.policies import PolicyOptions
from numalign.replay.merge import numa_info_from_scenario

DATA = Path(__file__).parent.parent / "golden" / "data" / "merge_vectors.jsonl"


def _vectors() -> list[dict[str, Any]]:
    with DATA.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _as_extras(hints: list[TopologyHint]) -> ImplicitHints:
    return ImplicitHints(
        top=0,
        up_pass=None,
        is_preferred=lambda m: False,
        min_count=min(h.mask.bit_count() for h in hints if h.mask is not None),
        extras=tuple(hints),
        materialize=lambda: list(hints),
        label="listed",
    )


def _result(hint: TopologyHint, admit: bool) -> tuple[list[int] | None, bool, bool]:
    return (None if hint.mask is None else bits_of(hint.mask), hint.preferred, admit)


def test_every_vector_through_the_implicit_merge() -> None:
    bad: list[str] = []
    for v in _vectors():
        s, exp = v["scenario"], v["result"]
        numa = numa_info_from_scenario(s)
        opts = PolicyOptions.parse({str(k): str(x) for k, x in (s.get("options") or {}).items()})
        policy = str(s.get("policy", "best-effort"))
        providers: list[ProviderHints] = [provider_hints_from_json(p, "p") for p in s["providers"]]
        want = (exp["mask"], exp["preferred"], exp["admit"])
        as_given = policy_merge(list(providers), numa, policy, opts.prefer_closest_numa)
        described: list[ProviderAnswer] = [
            None if p is None else {
                r: _as_extras(list(h)) if h and all(x.mask is not None for x in h) else h for r, h in p.items()
            }
            for p in providers
        ]
        implicit = policy_merge(described, numa, policy, opts.prefer_closest_numa)
        checks = [_result(as_given.hint, as_given.admit), _result(implicit.hint, implicit.admit)]
        if policy in ("best-effort", "restricted"):
            # the rank search alone, without the intersection DP core.merge uses on short lists
            sources = [f.hints for f in filter_providers_hints(providers)]
            best = ImplicitMerger(sources, numa, opts.prefer_closest_numa).merge()
            checks.append(_result(best, True if policy == "best-effort" else best.preferred))
        if any(c != want for c in checks):
            bad.append(s["id"])
    assert bad == []
