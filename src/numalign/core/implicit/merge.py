"""The hint merge over explicit and implicit hint lists: upstream's decision without the product.

Theory of operation (the ranking is the closed form of upstream's HintMerger, see core/merge.py):

1. Preferred. A merged hint is preferred iff every chosen hint is preferred and all chosen non-nil
   raw masks are equal, so the preferred candidates are the raw masks m that every list offers
   preferred (or accepts through a preferred nil hint). If some explicit list has no preferred nil
   hint, its preferred masks are a complete candidate list. Otherwise the candidates are the
   preferred extras of the implicit lists plus masks in the upward part of every implicit list and
   preferred there; those are found by `search_masks` count by count (fewest nodes first), pruned
   by each list's optimistic bound. The first mask found is upstream's narrowest (masks of a count
   come out in increasing numeric order); with prefer-closest every mask of the winning count is
   compared by average distance.
2. Non-preferred (only if no preferred candidate). The candidates are the reachable intersections
   R = { D & h1 & ... & hL }. The winner is the best of R by rule 3: count == B, then counts below B
   (larger first), then above B (smaller first). We try counts in that order and, per count, walk
   masks in fitness order, testing membership in R exactly (`_member`).
   Membership of m: pick per list an option containing m: a rigid mask (an explicit hint, an
   implicit list's extra; nil means D) or the list's upward part, from which any member h with
   h >= m may be chosen. With rigid choices intersected to s (a DP keeping only subset-minimal
   states: a smaller state reaches m whenever a larger one does), m is reachable iff the nodes
   s - m can be split among the lists using their upward part so that each list's top minus its
   share still passes (`_cover`; shares can be taken disjoint because the parts are upward closed).
   When every list is upward closed over D (CPU and device hints, nil/[] lists), R is upward closed
   (h_i | x stays in list i and (/\\ h_i) | x = /\\ (h_i | x)), so a branch can be cut as soon as
   the largest mask it still allows is not in R; and a count-B mask is always reachable (the
   narrowest hint of the list defining B, with D from every other list), so the search ends at B.
3. Nothing non-empty: {D, non-preferred}, as upstream.

The work bound (MERGE_WORK_BOUND). Step 2 is exact but not polynomial: when two or more lists
constrain the merge, membership asks whether the nodes outside m can be shared among the lists so
that each keeps enough (a partition problem: with CPUs and memory free only on the same 40 of 64
nodes, proving that a mask without capacity is no intersection tries ~C(40, 20) shares), and no
per-list bound is sound for an intersection. So step 2 counts its own work (search steps, membership
tests, cover steps) and past the bound stops with one line naming the lists, the node count and the
fix (MergeWorkBoundError), as the DRA search stops at its own bound; the Topology Manager's scopes
turn it into that pod's rejection (reason MERGE_WORK_BOUND) and remember it (merge_memo). It is a deliberate difference
(docs/fidelity.md): the kubelet's merge would answer after walking the product of its hint lists of
up to 2^N masks each; at 8 NUMA nodes or fewer (upstream's default max-allowable-numa-nodes) the
whole search stays far below the bound (at most 2^8 membership tests of at most L^8 cover steps for
a handful of lists L in practice; none of the conformance cases comes near it).

single-numa-node only ever sees preferred single-node hints, at most N per list, so its policy turns
implicit lists into those explicit lists and merges them as listed (core/policies/single_numa_node.py).
core.merge.merge_filtered is the one caller of this merger for best-effort and restricted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import product

from numalign.core.bitmask import bits_of
from numalign.core.hint import TopologyHint
from numalign.core.implicit.closest import search_closest
from numalign.core.implicit.hints import HintList, ImplicitHints, search_masks
from numalign.core.numa import NUMAInfo
from numalign.errors import InvalidInputError

# numalign's bound on its own work in one non-preferred merge (search steps, membership tests and cover
# steps). Pure Python spends about 3-5 us a unit (a few seconds) and, with the masks each step keeps,
# about 80 MB at the bound. See the module docstring. Read when a merger is made (not Final, so not inlined
# by the compiled core): tests lower it to meet the bound in milliseconds.
MERGE_WORK_BOUND = 1_000_000


class MergeWorkBoundError(InvalidInputError):
    """A merge stopped at numalign's work bound: an answer about this merge's lists alone (the scopes reject
    the pod with it), not about the input as a whole. An InvalidInputError for callers of the merge itself."""


def max_of_min_affinity_counts(lists: Iterable[HintList | Sequence[TopologyHint]]) -> int:
    """Upstream maxOfMinAffinityCounts (B): per list the narrowest non-nil mask's count, maximised
    (an implicit list knows its narrowest count). A plain loop: this runs on every merge."""
    best = 0
    for hints in lists:
        if isinstance(hints, ImplicitHints):
            best = max(best, hints.min_count)
            continue
        counts = [h.mask.bit_count() for h in hints if h.mask is not None]
        if counts:
            best = max(best, min(counts))
    return best


class ImplicitMerger:
    """Upstream HintMerger.Merge for best-effort/restricted over listed and implicit lists.

    `considered` collects the candidates that were actually evaluated and won a comparison (bounded),
    for the decision record.
    """

    MAX_CONSIDERED = 16

    def __init__(
        self, sources: Sequence[HintList], numa: NUMAInfo, use_closest: bool, work_bound: int | None = None
    ) -> None:
        self.sources = list(sources)
        self.work_bound = MERGE_WORK_BOUND if work_bound is None else work_bound
        self.work = 0  # units of the non-preferred search spent so far (see MERGE_WORK_BOUND)
        self.numa = numa
        self.use_closest = use_closest
        self.default = numa.default_affinity_mask
        self.fitter = numa.fitter(use_closest)
        self.explicit = [s for s in self.sources if not isinstance(s, ImplicitHints)]
        self.implicit = [s for s in self.sources if isinstance(s, ImplicitHints)]
        self.considered: list[TopologyHint] = []
        self._member_cache: dict[int, bool] = {}
        # each list's options as masks ANDed with D (nil hints and implicit tops give D)
        d = self.default
        self._options: list[frozenset[int]] = [
            frozenset(h.mask & d for h in s.extras if h.mask is not None) | ({s.top & d} if s.has_up() else set())
            if isinstance(s, ImplicitHints)
            else frozenset(d if h.mask is None else h.mask & d for h in s)
            for s in self.sources
        ]
        # lists holding D itself can contain any mask
        self._constraining = [opts for opts in self._options if d not in opts]

    # --- bookkeeping ---------------------------------------------------------------------------
    def _fold(self, best: int | None, cand: int, preferred: bool) -> int:
        if best is None or (cand != best and self.fitter(best, cand) == cand):
            if len(self.considered) < self.MAX_CONSIDERED:
                self.considered.append(TopologyHint(cand, preferred))
            return cand
        return best

    # --- 1. preferred --------------------------------------------------------------------------
    def _pref_in(self, src: HintList, m: int) -> bool:
        if isinstance(src, ImplicitHints):
            return src.is_preferred_member(m)
        return any(h.preferred and (h.mask is None or h.mask == m) for h in src)

    def best_preferred(self) -> int | None:
        d = self.default
        constraining = [s for s in self.explicit if not any(h.preferred and h.mask is None for h in s)]
        best: int | None = None
        if constraining:
            base = min(constraining, key=len)
            for m in sorted({h.mask for h in base if h.preferred and h.mask is not None}):
                if m & d and all(self._pref_in(s, m) for s in self.sources):
                    best = self._fold(best, m & d, True)
            return best
        if not self.implicit:
            # every list accepts anything through a preferred nil hint: D, or any preferred raw mask
            best = d if d else None
            for m in sorted({h.mask for s in self.explicit for h in s if h.preferred and h.mask is not None}):
                if m & d:
                    best = self._fold(best, m & d, True)
            return best
        for src in self.implicit:
            for h in src.extras:
                if h.preferred and h.mask is not None and h.mask & d and all(
                    self._pref_in(s, h.mask) for s in self.sources
                ):
                    best = self._fold(best, h.mask & d, True)
        universe = d
        sizes: set[int] | None = None
        for src in self.implicit:
            universe &= src.top
            if src.pref_sizes is not None:
                sizes = set(src.pref_sizes) if sizes is None else sizes & src.pref_sizes
        nodes = bits_of(universe)
        counts = sorted(sizes) if sizes is not None else range(1, len(nodes) + 1)
        implicit = self.implicit

        def leaf(m: int) -> bool:
            return all(s.in_up(m) and s.is_preferred(m) for s in implicit)

        for c in counts:
            if c < 1 or c > len(nodes) or (best is not None and c > best.bit_count()):
                continue

            def prune(inc: int, allowed: int, c: int = c) -> bool:
                return all(s.bound(inc, allowed, c) for s in implicit)

            found = self._search(nodes, c, leaf, prune)
            if found is not None:
                best = self._fold(best, found, True)
                break  # fewer nodes always win; later counts are wider
        return best

    # --- 2. non-preferred ----------------------------------------------------------------------
    def _up_closed(self, src: HintList) -> bool:
        """Is the list, ANDed with D, upward closed within D (and so contains D)."""
        d = self.default
        if isinstance(src, ImplicitHints):
            return src.top == d and not src.extras and src.has_up()
        masks = frozenset(d if h.mask is None else h.mask & d for h in src)
        if len(masks - {0}) == (1 << d.bit_count()) - 1:
            return True  # every non-empty mask (upstream's exhaustive generators at full capacity)
        for m in masks:
            rest = d & ~m
            while rest:
                low = rest & -rest
                if m | low not in masks:
                    return False
                rest ^= low
        return True

    def _can_contain(self, inc: int) -> bool:
        """Does every list offer an option containing `inc` (an implicit list: its top or an extra)."""
        return all(any(t & inc == inc for t in opts) for opts in self._constraining)

    def member(self, m: int) -> bool:
        """Is m (a subset of D) the merged mask of some permutation (memoised)."""
        hit = self._member_cache.get(m)
        if hit is None:
            hit = self._member_cache[m] = self._member(m)
        return hit

    def _charge(self, units: int) -> None:
        """Count the non-preferred search's work; past the bound stop the merge with one line."""
        self.work += units
        if self.work > self.work_bound:
            raise MergeWorkBoundError(self._bound_text())

    def _bound_text(self) -> str:
        constraining = [
            (s.label or "implicit") if isinstance(s, ImplicitHints) else f"{len(s)} listed hints"
            for s, opts in zip(self.sources, self._options, strict=True)
            if isinstance(s, ImplicitHints) or opts != {self.default}
        ]
        n = self.default.bit_count()
        return (
            f"Topology Manager merge over {n} NUMA nodes: no preferred placement, and ranking the "
            f"intersections of {len(constraining)} constraining hint lists ({', '.join(constraining)}) "
            f"stopped at numalign's work bound ({self.work_bound:,} steps; the kubelet would walk every "
            f"permutation of lists of up to 2^{n} masks); fix: topologyManagerPolicy single-numa-node (or none), "
            f"or a pod whose requests fit fewer NUMA nodes"
        )

    def _member(self, m: int) -> bool:
        self._charge(1)
        d = self.default
        rigid: list[list[int]] = []  # per list: rigid option masks containing m (ANDed with D)
        opts: set[int]
        flex: list[ImplicitHints | None] = []
        for src in self.sources:
            if isinstance(src, ImplicitHints):
                opts = {h.mask & d for h in src.extras if h.mask is not None and (h.mask & d) & m == m}
                up = src if (src.has_up() and m & ~src.top == 0) else None
                if not opts and up is None:
                    return False
                rigid.append(_minimal(opts))
                flex.append(up)
            else:
                opts = {t for t in self._options[len(rigid)] if t & m == m}
                if not opts:
                    return False
                # m itself is the smallest possible choice: it alone dominates every other option
                rigid.append([m] if m in opts else _minimal(opts))
                flex.append(None)
        both = [i for i, f in enumerate(flex) if f is not None and rigid[i]]
        # choose, per list that has both, its upward part (True) or its rigid masks (False)
        for choice in product((True, False), repeat=len(both)):
            use_flex = {i for i, f in enumerate(flex) if f is not None and not rigid[i]}
            use_flex |= {i for i, c in zip(both, choice, strict=True) if c}
            base = d
            for i in use_flex:
                f = flex[i]
                assert f is not None
                base &= f.top
            states = [base]
            for i, choices in enumerate(rigid):
                if i not in use_flex:
                    states = _minimal({s & t for s in states for t in choices})
            absorbers = [f for i, f in enumerate(flex) if i in use_flex and f is not None]
            self._charge(len(states))
            for s in sorted(states, key=int.bit_count):
                if _cover(s & ~m, absorbers, self._charge):
                    return True
        return False

    def best_non_preferred(self, b: int) -> int | None:
        d = self.default
        nodes = bits_of(d)
        n = len(nodes)
        up_closed = all(self._up_closed(s) for s in self.sources)
        sole = self._sole_constraint() if up_closed else None
        order = [c for c in range(b, 0, -1) if c <= n] + list(range(max(b, 0) + 1, n + 1))
        for c in order:

            def prune(inc: int, allowed: int, c: int = c) -> bool:
                self._charge(1)
                if not self._can_contain(inc):
                    return False
                if sole is not None and not sole.bound(inc, allowed, c):
                    return False  # R is sole's upward part: its own bound says no count-c member is here
                # R is upward closed: a member below `allowed` puts `allowed` itself in R
                return not up_closed or self.member(allowed)

            def leaf(m: int) -> bool:
                self._charge(1)
                return self.member(m)

            best = self._search(nodes, c, leaf, prune)
            if best is not None:
                return self._fold(None, best, False)
        return None

    def _sole_constraint(self) -> ImplicitHints | None:
        """The one implicit list whose upward part over D is R, when every other list offers D alone
        (nil hints: no preference): then m is in R iff m is in that part, so the list's own bound
        (ImplicitHints.bound, optimistic) may cut the search. Without it a nearly full 64-node machine
        walked every count-B mask below the few that can hold the request (C(64, 4) = 635,376 of them,
        a membership test each: minutes for one pod)."""
        d = self.default
        sole: ImplicitHints | None = None
        for src, opts in zip(self.sources, self._options, strict=True):
            if opts == {d}:
                if isinstance(src, ImplicitHints):
                    if sole is not None or src.top != d or src.extras or src.up_pass is None:
                        return None
                    sole = src
                continue
            return None
        return sole

    def _search(
        self, nodes: Sequence[int], c: int, leaf: Callable[[int], bool], prune: Callable[[int, int], bool]
    ) -> int | None:
        """The fittest count-c mask with `leaf`: the numerically first, or by average distance."""
        if self.use_closest and self.numa.distances is not None:
            return search_closest(nodes, c, leaf, prune, self.numa.distances, self.numa.closest)
        return next(search_masks(nodes, c, leaf, prune), None)

    # --- the merge -----------------------------------------------------------------------------
    def merge(self, b: int | None = None) -> TopologyHint:
        """The best hint; `b` is max_of_min_affinity_counts over the same lists when the caller has it."""
        if any(not isinstance(s, ImplicitHints) and len(s) == 0 for s in self.sources):
            return TopologyHint(self.default, False)
        pref = self.best_preferred()
        if pref is not None:
            return TopologyHint(pref, True)
        best = self.best_non_preferred(max_of_min_affinity_counts(self.sources) if b is None else b)
        return TopologyHint(self.default if best is None else best, False)


def _minimal(masks: Iterable[int]) -> list[int]:
    """The subset-minimal masks (an antichain); a smaller intersection state dominates a larger one."""
    out: list[int] = []
    for m in sorted(set(masks), key=int.bit_count):
        if not any(o & m == o for o in out):
            out.append(m)
    return out


def _cover(rest: int, absorbers: Sequence[ImplicitHints], charge: Callable[[int], None]) -> bool:
    """Can the nodes of `rest` be shared among the lists' upward parts so that each list's top minus
    its share still passes? (Shares may be disjoint: the parts are upward closed.) `charge` counts
    each step against the merge's work bound (this search is exponential in the worst case)."""
    if rest == 0:
        return True
    if not absorbers:
        return False
    for a in absorbers:
        if a.in_up(a.top & ~rest):
            return True
    nodes = bits_of(rest)
    # nodes that fewer lists can take alone go first; a node no list can take ends the search
    takers = {x: [i for i, a in enumerate(absorbers) if a.in_up(a.top & ~(1 << x))] for x in nodes}
    if any(not t for t in takers.values()):
        return False
    nodes.sort(key=lambda x: len(takers[x]))
    shares = [0] * len(absorbers)
    # Memory per step is what bounds this search's memory: a failed state is one int (the shares side
    # by side; the nodes placed so far are their union, so the index j needs no room), and the tests
    # below call the lists' predicates without their memo (every step would add a mask to it).
    width = rest.bit_length()
    failed: set[int] = set()
    tops = [a.top for a in absorbers]
    passes = [_predicate(a) for a in absorbers]

    def place(j: int) -> bool:
        if j == len(nodes):
            return True
        charge(1)
        key = 0
        for sh in shares:
            key = key << width | sh
        if key in failed:
            return False
        bit = 1 << nodes[j]
        for i in takers[nodes[j]]:
            kept = tops[i] & ~(shares[i] | bit)
            if kept and passes[i](kept):
                shares[i] |= bit
                if place(j + 1):
                    return True
                shares[i] &= ~bit
        failed.add(key)
        return False

    return place(0)


def _predicate(a: ImplicitHints) -> Callable[[int], bool]:
    """The upward part's own test (an absorber has one: its top passes)."""
    assert a.up_pass is not None
    return a.up_pass
