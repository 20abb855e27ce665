package main

// The pool orders the dra-alloc area tries where the allocator ranges over a Go map of pools (1.33-1.35),
// for every release's object types: `pool` names the (driver, pool) a slice publishes to.

import (
	"math/rand"
	"sort"
	"time"
)

// draMapOrderTries: how often a 1.33-1.35 case with more than one pool is allocated, each time with the
// slices in another pool order. In the scheduler the slices come from the informer's cache in no fixed
// order and GatherPools ranges over a map of pools, so any pool order can be searched; a small map
// iterates as a rotation of its insertion order from a random slot (of 8), so one insertion order gives
// the same iteration order in at least 3 of 8 runs with up to 6 pools. Every other try inserts the pools
// sorted by driver and name (the order numalign searches: seen with a probability above 1 - (5/8)^64),
// a quarter in the case's order, a quarter in random orders. A case whose allocations are slow
// (long searches) stops trying after draMapOrderBudget, so that it stays inside the hang guard (-hang-after).
const draMapOrderTries = 128

const draMapOrderBudget = 8 * time.Second

// draPools: the (driver, pool) pairs the slices publish, sorted.
func draPools[S any](slices []S, pool func(S) string) []string {
	set := map[string]bool{}
	for _, s := range slices {
		set[pool(s)] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// draPoolOrder: the slices with their pools in the order of try i (see draMapOrderTries); a pool's
// slices keep the case's order among themselves.
func draPoolOrder[S any](slices []S, pool func(S) string, i int) []S {
	if i%4 == 1 {
		return slices
	}
	pools := draPools(slices, pool)
	if i%4 == 3 {
		rand.Shuffle(len(pools), func(a, b int) { pools[a], pools[b] = pools[b], pools[a] })
	}
	rank := map[string]int{}
	for r, p := range pools {
		rank[p] = r
	}
	out := append([]S{}, slices...)
	sort.SliceStable(out, func(a, b int) bool { return rank[pool(out[a])] < rank[pool(out[b])] })
	return out
}

func draVerdict(outcome, message string) map[string]any {
	return map[string]any{"outcome": outcome, "message": message}
}
