"""Implicit hint lists: a provider's hints described instead of listed, and exact searches over them.

Vocabulary (one word per idea across core/implicit and providers/implicit): upstream's hint lists
are *explicit* (every mask listed); an `ImplicitHints` is the same list *implicit* (described by a
predicate). `HintList` is either; `ProviderAnswer` is a provider's resource -> HintList map, the
shape Policy.merge accepts.

Upstream providers list every NUMA mask that can hold a request (2^N masks). Each of our providers
can instead hand the merge an `ImplicitHints`: the same set of hints, given as

- an *upward part*: every non-empty mask S within `top` for which `up_pass(S)` holds, where
  `up_pass` is monotone (S passes => every superset of S within `top` passes). CPU and device hints
  are exactly such a set with top = all nodes (a mask passes iff the free capacity inside it covers
  the request and every reusable item lies inside it; adding nodes never hurts). Memory hints are an
  upward part over the *unused* nodes plus a few listed masks (groups, reusable-keyed masks, single
  used nodes).
- `extras`: hints listed explicitly, each with its own preferred flag;
- `is_preferred(S)` for members of the upward part (upstream: count == minAffinitySize, or the
  socket-aligned rule of the CPU align-by-socket option), `pref_sizes` the counts at which a
  preferred member of the upward part can exist (None: any count);
- `min_count`: the narrowest member's node count (upstream's per-list input to
  BestNonPreferredAffinityCount);
- `up_bound(inc, allowed, size)`: an optimistic test used for pruning only: False must mean that no
  member S of the upward part with inc <= S <= allowed and |S| == size exists;
- `describe()`: optional, the list as a value (what the provider built it from), for the memory of
  merges stopped at the work bound.

The searches here never enumerate 2^N masks when bounds prune: they walk the nodes from the highest
id down, trying "leave the node out" before "take it", so masks of one count come out in increasing
numeric order (the first found is upstream's narrowest; see search_masks). With
prefer-closest-numa-nodes the fittest mask of a count is the one with the smallest sum of pairwise
distances (search_closest): found through twin classes of nodes (nodes the distance matrix cannot
tell apart, e.g. the NUMA nodes of one socket) by a best-first walk over per-class counts, or by
branch and bound node by node when the matrix has many classes. NodeSums makes the capacity sums
and top-k bounds the providers use cheap at 64 nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from numalign.core.hint import TopologyHint

UpPass = Callable[[int], bool]
UpBound = Callable[[int, int, int], bool]


@dataclass(frozen=True, eq=False)
class ImplicitHints:
    """One (provider, resource) hint list, described implicitly (see the module docstring).

    `materialize` returns the exact explicit list upstream's generator would return (same masks,
    flags and order); it is only called as a fallback on machines whose NUMAInfo does not cover `top`
    and by tests.
    """

    top: int
    up_pass: UpPass | None
    is_preferred: UpPass
    min_count: int
    pref_sizes: frozenset[int] | None = None
    up_bound: UpBound | None = None
    extras: tuple[TopologyHint, ...] = ()
    materialize: Callable[[], list[TopologyHint]] | None = None
    label: str = ""
    # A value equal for equal lists (what the provider built the list from), asked only while the provider's
    # state is the one the list was built on; None (or no describe) where the builder cannot say. Read only
    # to remember merges that stopped at the work bound (topologymanager/merge_memo.py), never per merge.
    describe: Callable[[], Hashable | None] | None = None
    _cache: dict[int, bool] = field(default_factory=dict, compare=False, repr=False)

    # --- membership --------------------------------------------------------------------------
    def in_up(self, mask: int) -> bool:
        """Is `mask` a member of the upward part (memoised; predicates are pure)."""
        if self.up_pass is None or mask == 0 or mask & ~self.top:
            return False
        hit = self._cache.get(mask)
        if hit is None:
            hit = self.up_pass(mask)
            self._cache[mask] = hit
        return hit

    def has_up(self) -> bool:
        return self.in_up(self.top)

    def is_member(self, mask: int) -> bool:
        return self.in_up(mask) or any(h.mask == mask for h in self.extras)

    def is_preferred_member(self, mask: int) -> bool:
        """Does the list hold a *preferred* hint with exactly this raw mask."""
        if self.in_up(mask) and self.is_preferred(mask):
            return True
        return any(h.preferred and h.mask == mask for h in self.extras)

    def bound(self, inc: int, allowed: int, size: int) -> bool:
        """Optimistic: may the upward part hold a member S, inc <= S <= allowed, |S| == size."""
        if self.up_pass is None or inc & ~self.top:
            return False
        allowed &= self.top
        if inc.bit_count() > size or allowed.bit_count() < size:
            return False
        if not self.in_up(allowed):
            return False
        return self.up_bound is None or self.up_bound(inc, allowed, size)

    def single_node_preferred(self, nodes: Sequence[int]) -> list[TopologyHint]:
        """The hints single-numa-node keeps: preferred, one node (at most N of them)."""
        out = [TopologyHint(1 << n, True) for n in nodes if self.is_preferred_member(1 << n)]
        seen = {h.mask for h in out}
        out += [h for h in self.extras if h.preferred and h.mask is not None and h.mask.bit_count() == 1
                and h.mask not in seen]
        return out


# One (provider, resource) hint list after filtering: upstream's explicit list or an implicit one.
ExplicitHints = tuple[TopologyHint, ...]
HintList = ExplicitHints | ImplicitHints
# A provider's answer when its lists may be implicit (upstream's map[string][]TopologyHint otherwise):
# None/{} = no preference; resource -> None = don't care; -> [] (or an empty implicit list) = cannot.
ProviderAnswer = Mapping[str, Sequence[TopologyHint] | ImplicitHints | None] | None


def search_masks(
    nodes: Sequence[int], size: int, leaf_ok: Callable[[int], bool], prune_ok: Callable[[int, int], bool]
) -> Iterator[int]:
    """Masks over `nodes` with exactly `size` bits, in increasing numeric order, for which leaf_ok holds.

    Depth-first over the nodes from the highest id down, "leave out" before "take": every mask in the
    leave-out branch has a 0 where the take branch has a 1 and the same higher bits, so it is
    numerically smaller. prune_ok(inc, allowed) must be True whenever some wanted mask M with
    inc <= M <= allowed exists (a necessary condition; it is only used to cut branches).
    """
    order = sorted(set(nodes), reverse=True)
    n = len(order)
    if size < 0 or size > n:
        return
    # suffix[i] = mask of order[i:]
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] | (1 << order[i])

    def walk(i: int, inc: int, k: int) -> Iterator[int]:
        # k = bits still to choose among order[i:]
        if k == 0:
            if leaf_ok(inc):
                yield inc
            return
        if n - i < k or not prune_ok(inc, inc | suffix[i]):
            return
        if k == 1:
            # one node left to choose: the candidates in increasing order, no further pruning
            for x in reversed(order[i:]):
                if leaf_ok(inc | 1 << x):
                    yield inc | 1 << x
            return
        bit = 1 << order[i]
        if n - i - 1 >= k and prune_ok(inc, inc | suffix[i + 1]):
            yield from walk(i + 1, inc, k)
        yield from walk(i + 1, inc | bit, k - 1)

    yield from walk(0, 0, size)


def min_member_count(nodes: Sequence[int], up_pass: UpPass, bound: Callable[[int, int, int], bool]) -> int | None:
    """The smallest count of a mask over `nodes` passing the monotone `up_pass` (None: none passes).

    Monotone predicates make the existence test per count exact at the top; the search per count
    uses `bound` (optimistic, with size) to prune.
    """
    full = 0
    for x in nodes:
        full |= 1 << x
    if full == 0 or not up_pass(full):
        return None
    for c in range(1, len(set(nodes)) + 1):

        def prune(inc: int, allowed: int, c: int = c) -> bool:
            return bound(inc, allowed, c)

        for _ in search_masks(nodes, c, up_pass, prune):
            return c
    return None  # unreachable: the full mask passes


class NodeSums:
    """Per-node non-negative integers with fast sums over masks and top-k bounds.

    Sums use 8-node lookup tables built on first use (a 64-node mask costs 8 lookups instead of a
    walk over its bits); `order` lists nodes by value, largest first, for the top-k bound.
    """

    __slots__ = ("_tables", "_values", "order")

    def __init__(self, values: Mapping[int, int]) -> None:
        self._values = {n: v for n, v in values.items() if v}
        width = (max(self._values, default=-1) >> 3) + 1
        self._tables: list[list[int] | None] = [None] * width
        self.order = sorted(self._values, key=lambda n: -self._values[n])

    def _table(self, chunk: int) -> list[int]:
        # table[i] = sum of the values of the bits set in i, built by doubling (8 list operations)
        table = [0]
        for b in range(8):
            v = self._values.get(chunk * 8 + b, 0)
            table += [t + v for t in table]
        self._tables[chunk] = table
        return table

    def sum(self, mask: int) -> int:
        total = 0
        chunk = 0
        tables = self._tables
        width = len(tables)
        while mask and chunk < width:
            byte = mask & 255
            if byte:
                table = tables[chunk]
                total += (table if table is not None else self._table(chunk))[byte]
            mask >>= 8
            chunk += 1
        return total

    def topk(self, allowed: int, k: int) -> int:
        """The sum of the k largest values over nodes in `allowed`."""
        if k <= 0:
            return 0
        total = 0
        for n in self.order:
            if allowed >> n & 1:
                total += self._values[n]
                k -= 1
                if k == 0:
                    break
        return total

