"""Properties of the merge: independent of resource order, equal to the exhaustive product."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.reference_merge import ref_policy_merge
from support.strategies import merge_scenarios

from numalign.core.hint import ProviderHints
from numalign.core.numa import NUMAInfo
from numalign.core.policies import PolicyOptions, make_policy


@settings(max_examples=200)
@given(merge_scenarios())
def test_fast_merge_equals_exhaustive_product(s: tuple[str, NUMAInfo, list[ProviderHints], bool]) -> None:
    policy, numa, providers, closest = s
    got = make_policy(policy, numa, PolicyOptions(prefer_closest_numa=closest)).merge(providers)
    assert (got.hint, got.admit) == ref_policy_merge(policy, providers, numa, closest)


@settings(max_examples=150)
@given(merge_scenarios(), st.randoms(use_true_random=False))
def test_result_does_not_depend_on_resource_order(
    s: tuple[str, NUMAInfo, list[ProviderHints], bool], rnd: object
) -> None:
    import random

    assert isinstance(rnd, random.Random)
    policy, numa, providers, closest = s
    shuffled: list[ProviderHints] = []
    for p in providers:
        if p is None:
            shuffled.append(None)
            continue
        items = list(p.items())
        rnd.shuffle(items)
        shuffled.append(dict(items))
    pol = make_policy(policy, numa, PolicyOptions(prefer_closest_numa=closest))
    assert pol.merge(providers).hint == pol.merge(shuffled).hint
    # and the exhaustive reference, which walks resources in the given order, agrees too
    assert ref_policy_merge(policy, shuffled, numa, closest) == ref_policy_merge(policy, providers, numa, closest)
