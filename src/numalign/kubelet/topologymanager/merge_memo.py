"""The merges a Topology Manager has already made, kept by what was merged (issue 29).

A policy's merge and the explanation of its outcome are pure functions of the policy (its name, NUMA
nodes and options) and of the providers' explicit hint lists. Admissions ask the same merge again and
again: every BestEffort and Burstable container gets no hint from any provider, and Guaranteed
containers of one size on a node in one free state get the same lists. So the merged hint, the verdict,
the explanation and the considered hints are kept per (policy, answers) and shared by every node of
the process whose policy is the same; the decision record is still built per container.

Not kept: implicit hint lists (5 NUMA nodes and more; their merge is a search, and they are not plain
values), and policies other than upstream's four (the NUMA allocation preview scores the node's free
state, which the answers do not hold).

Refusals are kept apart: a merge that stopped at numalign's work bound (core/implicit/merge.py) spent
seconds to learn it, and the same lists stop the same way. So its line is kept per (policy, provider
names, answers), the implicit lists by what their provider built them from (ImplicitHints.describe):
the same pod shape on the same node state is refused at once. Nothing is computed for it per merge
until some merge has stopped at the bound.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.core.policies import Policy
from numalign.core.policies.best_effort import BestEffortPolicy, RestrictedPolicy
from numalign.core.policies.none import NonePolicy
from numalign.core.policies.single_numa_node import SingleNUMANodePolicy

# (merged hint, admit, explanation, considered): a ContainerDecision without its container and records.
Merged = tuple[TopologyHint, bool, tuple[str, ...], tuple[TopologyHint, ...]]

_PURE: frozenset[type] = frozenset({SingleNUMANodePolicy, BestEffortPolicy, RestrictedPolicy, NonePolicy})
MAX_ENTRIES = 4096  # emptied when full (the next admissions fill it again)
# Answers of more hints than this are merged afresh: a key holds every hint, so this bounds the memo
# (under 8 KB an entry, 30 MB in all). Explicit lists are at most 15 masks a resource below 5 NUMA nodes;
# longer ones (8 NUMA nodes listed explicitly: 255 masks a provider) would make keys of tens of KB.
MAX_HINTS = 96
_memo: dict[Hashable, Merged] = {}
# Each policy key as a small number, the same for equal keys: a memo key holds the number, so a look-up
# hashes and compares no policy options (a dataclass whose __hash__ and __eq__ run as Python).
# Numbers are never given twice (a scope keeps its policy's), so emptying the table when full is safe.
_policy_numbers: dict[Hashable, int] = {}
_next_number = 0


def policy_key(policy: Policy) -> int | None:
    """What a merge depends on besides the answers, as a number equal for equal policies; None for a
    policy whose merge reads more."""
    global _next_number
    key = _policy_description(policy)
    if key is None:
        return None
    number = _policy_numbers.get(key)
    if number is None:
        if len(_policy_numbers) >= MAX_ENTRIES:
            _policy_numbers.clear()
        number = _policy_numbers[key] = _next_number
        _next_number += 1
    return number


def _policy_description(policy: Policy) -> Hashable | None:
    if type(policy) not in _PURE:
        return None
    numa = getattr(policy, "numa", None)
    opts = getattr(policy, "opts", None)
    nodes = None if numa is None else numa.nodes
    # Distances decide only under prefer-closest-numa-nodes; then they are part of the key.
    closest = bool(getattr(opts, "prefer_closest_numa", False))
    distances = (tuple(sorted(numa.distances.items())) if closest and numa is not None and numa.distances
                 else None)
    return (type(policy), nodes, distances, opts)


def answers_key(answers: Sequence[ProviderAnswer]) -> tuple[object, ...] | None:
    """The providers' answers as a plain value, keeping every distinction the merge and the explanation
    make (no map, an empty map, a resource with no preference, an empty list, each hint in order); None
    when some list is implicit or they hold more than MAX_HINTS hints."""
    out: list[object] = []
    count = 0
    for answer in answers:
        if answer is None:
            out.append(None)
            continue
        items: list[object] = []
        for resource, hints in answer.items():
            if hints is None:
                items.append((resource, None))
            elif type(hints) is list or type(hints) is tuple:
                count += len(hints)
                if count > MAX_HINTS:
                    return None
                items.append((resource, tuple([_hint_code(h) for h in hints])))
            else:
                return None
        out.append(tuple(items))
    return tuple(out)


def _hint_code(h: TopologyHint) -> int:
    """A hint as one int, distinct for distinct hints: a mask's bits shifted left by one, the low bit
    preferred; -1 / -2 for no mask (not) preferred. A key of ints hashes and compares faster than one of
    (mask, preferred) pairs."""
    if h.mask is None:
        return -2 if h.preferred else -1
    return (h.mask << 1) | (1 if h.preferred else 0)


def lookup(key: Hashable) -> Merged | None:
    return _memo.get(key)


def keep(key: Hashable, merged: Merged) -> None:
    if len(_memo) >= MAX_ENTRIES:
        _memo.clear()
    _memo[key] = merged


def clear() -> None:
    _memo.clear()
    refusals.clear()


# Merges stopped at the work bound: key -> the bound's line. Few: each cost the whole bound to find.
MAX_REFUSALS = 256
refusals: dict[Hashable, str] = {}


def refusal_answers(answers: Sequence[ProviderAnswer]) -> tuple[object, ...] | None:
    """The providers' answers as a value, implicit lists by their describe(); None when some implicit list
    cannot describe itself (such a merge is not remembered: it costs its time again, with the same answer)."""
    out: list[object] = []
    for answer in answers:
        if answer is None:
            out.append(None)
            continue
        items: list[object] = []
        for resource, hints in answer.items():
            if hints is None:
                items.append((resource, None))
            elif isinstance(hints, ImplicitHints):
                described = hints.describe() if hints.describe is not None else None
                if described is None:
                    return None
                items.append((resource, "implicit", described))  # (three items: never an explicit list's pair)
            else:
                items.append((resource, tuple([_hint_code(h) for h in hints])))
        out.append(tuple(items))
    return tuple(out)


def refuse(key: Hashable, line: str) -> None:
    if len(refusals) >= MAX_REFUSALS:
        refusals.clear()
    refusals[key] = line
