"""Prefer-closest-numa-nodes searches over implicit hint sets: the mask of a given count that
upstream's NUMAInfo.Closest ranks first, without listing every mask of that count.

For a fixed count the average distance is S / count^2, S being the sum of d[i][j] over ordered pairs
of the mask (self pairs included), an integer; float division by the same count^2 keeps the order of
S strictly while distances stay far below 2^40, so S orders candidates exactly like the averages
upstream compares, and ties in S are ties in average (then the numerically smaller mask wins).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

from numalign.core.implicit.hints import search_masks


def search_closest(
    nodes: Sequence[int],
    size: int,
    leaf_ok: Callable[[int], bool],
    prune_ok: Callable[[int, int], bool],
    distances: Mapping[int, Sequence[int]],
    closest: Callable[[int, int], int],
) -> int | None:
    """The count-`size` mask over `nodes` with leaf_ok that upstream's Closest picks: smallest average
    distance, then numerically smallest. Branch and bound over the same walk as search_masks.

    For a fixed count the average is S / count^2 with S = the sum of d[i][j] over ordered pairs of
    the mask (self pairs included), an integer; float division by the same count^2 keeps the order
    of S strictly as long as distances stay far below 2^40, so S orders candidates exactly like the
    averages upstream compares (leaves are still compared with `closest` itself). A branch is cut
    when a lower bound on S reaches the best S found: its leaves come later in numeric order, so a
    tie loses too. Bound: S(inc) + the `rest` smallest per-node costs, where a node's cost is its
    self distance, its pairs with `inc`, and half of its rest-1 cheapest pairs among the candidates.
    """
    order = sorted(set(nodes), reverse=True)
    n = len(order)
    if size < 0 or size > n:
        return None
    if size == 1:  # single nodes: compare them all (the average is the self distance)
        single: int | None = None
        for x in reversed(order):
            if prune_ok(1 << x, 1 << x) and leaf_ok(1 << x):
                single = 1 << x if single is None else closest(single, 1 << x)
        return single
    dd, pair, near = _distance_tables(order, distances)
    use_bound = all(0 <= v < 1 << 32 for row in dd for v in row)
    if use_bound:
        classes = _twin_classes(order, dd)
        if len(classes) <= _MAX_CLASSES:
            found, settled = _search_closest_by_class(order, dd, classes, size, leaf_ok, prune_ok)
            if settled:
                return found
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] | (1 << order[i])
    add = [0] * n  # add[x] = sum over chosen i of pair[i][x]
    state = {"s": 0}
    best: list[int] = []  # [mask, S]

    def lower_bound2(i: int, rest: int) -> int:
        """2 * (a lower bound on S of any completion choosing `rest` of order[i:])."""
        costs = []
        for x in range(i, n):
            need, half = rest - 1, 0
            for y in near[x]:
                if need == 0:
                    break
                if y >= i:
                    half += pair[x][y]
                    need -= 1
            costs.append(2 * (dd[x][x] + add[x]) + half)
        costs.sort()
        return 2 * state["s"] + sum(costs[:rest])

    def walk(i: int, inc: int, k: int) -> None:
        if k == 0:
            if leaf_ok(inc) and (not best or closest(best[0], inc) == inc):
                best[:] = [inc, state["s"]]
            return
        if n - i < k or not prune_ok(inc, inc | suffix[i]):
            return
        if best and use_bound and lower_bound2(i, k) >= 2 * best[1]:
            return
        walk(i + 1, inc, k)
        x = i
        state["s"] += dd[x][x] + add[x]
        row = pair[x]
        for y in range(n):
            add[y] += row[y]
        walk(i + 1, inc | 1 << order[x], k - 1)
        for y in range(n):
            add[y] -= row[y]
        state["s"] -= dd[x][x] + add[x]

    walk(0, 0, size)
    return best[0] if best else None


_TABLES: dict[tuple[int, tuple[int, ...]], tuple[object, list[list[int]], list[list[int]], list[list[int]]]] = {}


def _distance_tables(
    order: list[int], distances: Mapping[int, Sequence[int]]
) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """Distances by position in `order`, pair sums, and each position's others by pair sum.
    Cached per distance matrix object (kept alive by the cache, so its id cannot be reused)."""
    key = (id(distances), tuple(order))
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is distances:
        return hit[1], hit[2], hit[3]
    n = len(order)
    dd = [[int(distances[a][b]) for b in order] for a in order]
    pair = [[dd[a][b] + dd[b][a] for b in range(n)] for a in range(n)]
    near = [sorted((b for b in range(n) if b != a), key=pair[a].__getitem__) for a in range(n)]
    if len(_TABLES) >= 16:
        _TABLES.pop(next(iter(_TABLES)))
    _TABLES[key] = (distances, dd, pair, near)
    return dd, pair, near


# Class-level search pays off when the distance matrix has few distinct node roles (sockets, SNC
# domains, GPU-memory nodes); with many it is the node-level branch and bound.
_MAX_CLASSES = 12
# Distinct count vectors the class-level search tries before handing over to the node level.
_MAX_VECTORS = 400


def _twin_classes(order: list[int], dd: list[list[int]]) -> list[list[int]]:
    """Positions grouped into twin classes: swapping two twins maps the distance matrix onto itself
    (same self distance, same distances to and from every other node, symmetric between them). Being
    twins is an equivalence, so comparing with one representative per class is enough."""
    n = len(order)
    classes: list[list[int]] = []
    for x in range(n):
        for cls in classes:
            y = cls[0]
            if (
                dd[x][x] == dd[y][y]
                and dd[x][y] == dd[y][x]
                and all(dd[x][z] == dd[y][z] and dd[z][x] == dd[z][y] for z in range(n) if z != x and z != y)
            ):
                cls.append(x)
                break
        else:
            classes.append([x])
    return classes


def _search_closest_by_class(
    order: list[int],
    dd: list[list[int]],
    classes: list[list[int]],
    size: int,
    leaf_ok: Callable[[int], bool],
    prune_ok: Callable[[int, int], bool],
) -> tuple[int | None, bool]:
    """search_closest through twin classes. S (the ordered-pair distance sum) depends only on how
    many nodes a mask takes from each class, so count vectors are generated in increasing S (best
    first, with a lower bound on the unassigned rest), and for each run of equal S the numerically
    smallest mask with leaf_ok and one of those vectors is searched. The first run that has one holds
    the answer. Returns (mask, True), or (None, False) after _MAX_VECTORS vectors (the caller then
    searches node by node)."""
    k = len(classes)
    sizes = [len(c) for c in classes]
    cmask = [0] * k
    for a, cls in enumerate(classes):
        for pos in cls:
            cmask[a] |= 1 << order[pos]
    rep = [c[0] for c in classes]
    self_d = [dd[r][r] for r in rep]
    intra = [dd[c[0]][c[1]] if len(c) > 1 else 0 for c in classes]
    cross = [[dd[rep[a]][rep[b]] + dd[rep[b]][rep[a]] for b in range(k)] for a in range(k)]
    tail_cap = [sum(sizes[j:]) for j in range(k + 1)]

    # partners[j][b]: (pair cost, how many) of the nodes a node of class b can pair with among
    # classes j.. (its own class minus itself included), cheapest first
    partners = [
        [
            sorted([(2 * intra[b], sizes[b] - 1)] + [(cross[b][c], sizes[c]) for c in range(j, k) if c != b])
            for b in range(k)
        ]
        for j in range(k + 1)
    ]

    def rest_bound(vec: tuple[int, ...], j: int, r: int) -> int:
        """Lower bound on what r more nodes from classes j.. add to S: per node its self distance,
        its pairs with the nodes already taken, and half of its r-1 cheapest pairs among the rest
        (each pair is counted from both ends); the r cheapest such nodes within class sizes."""
        if r == 0:
            return 0
        unit = []
        for b in range(j, k):
            twice = 2 * (self_d[b] + sum(v * cross[a][b] for a, v in enumerate(vec)))
            left = r - 1
            for cost, cap in partners[j][b]:
                if left == 0:
                    break
                take = min(cap, left)
                twice += take * cost
                left -= take
            unit.append((twice, sizes[b]))
        unit.sort()
        total, left = 0, r
        for twice, cap in unit:
            take = min(cap, left)
            total += take * twice
            left -= take
            if left == 0:
                break
        return (total + 1) // 2  # S is an integer >= total / 2

    # Heap of (key, tie, vector so far, exact S so far). A key is a lower bound on S of every
    # completion, raised to the parent's key so keys never drop along a path; a complete vector's key
    # is its exact S, so complete vectors leave the heap in increasing S.
    heap: list[tuple[int, int, tuple[int, ...], int]] = [(rest_bound((), 0, size), 0, (), 0)]
    counter = [1]

    def expand(key: int, vec: tuple[int, ...], s_part: int) -> None:
        j, have = len(vec), sum(vec)
        for v in range(min(sizes[j], size - have) + 1):
            if have + v + tail_cap[j + 1] < size:
                continue
            add = v * self_d[j] + v * (v - 1) * intra[j] + sum(u * v * cross[a][j] for a, u in enumerate(vec))
            nvec = (*vec, v)
            child = s_part + add + rest_bound(nvec, j + 1, size - have - v)
            heapq.heappush(heap, (max(key, child), counter[0], nvec, s_part + add))
            counter[0] += 1

    tried = 0
    while heap:
        key, _, vec, s_part = heapq.heappop(heap)
        if len(vec) < k:
            expand(key, vec, s_part)
            continue
        # every vector with S == key: complete ones in the heap and those partial ones still make
        run = [vec]
        while heap and heap[0][0] == key:
            key2, _, vec2, s2 = heapq.heappop(heap)
            if len(vec2) == k:
                run.append(vec2)
            else:
                expand(key2, vec2, s2)
        tried += len(run)
        found = _smallest_with_counts(order, size, cmask, run, leaf_ok, prune_ok)
        if found is not None:
            return found, True
        if tried >= _MAX_VECTORS:
            return None, False
    return None, True


def _smallest_with_counts(
    order: list[int],
    size: int,
    cmask: list[int],
    vectors: list[tuple[int, ...]],
    leaf_ok: Callable[[int], bool],
    prune_ok: Callable[[int, int], bool],
) -> int | None:
    """The numerically smallest mask with leaf_ok taking exactly vec[a] nodes of class a, for one of
    the vectors."""
    wanted = set(vectors)

    def counts(m: int) -> tuple[int, ...]:
        return tuple((m & c).bit_count() for c in cmask)

    def leaf(m: int) -> bool:
        return counts(m) in wanted and leaf_ok(m)

    def prune(inc: int, allowed: int) -> bool:
        lo, hi = counts(inc), counts(allowed)
        if not any(all(lo[a] <= v[a] <= hi[a] for a in range(len(cmask))) for v in wanted):
            return False
        return prune_ok(inc, allowed)

    return next(search_masks(order, size, leaf, prune), None)
