package main

// The admit area's merge budget: a bound on the real Topology Manager's work that counts what the work
// is, not how long a loaded machine takes to do it.
//
// The best-effort, restricted and single-numa-node policies merge by walking every permutation of the
// providers' hint lists (policy.go's iterateAllProviderTopologyHints over filterProvidersHints' lists;
// single-numa-node first keeps the preferred single-node and preferred nil hints of each). On a machine of
// 8 NUMA nodes the CPU manager, the memory manager per memory resource and the device manager per device
// resource may each list up to 255 masks, so one merge can be 255^4 permutations (hours). Each provider
// is wrapped (budgetedProvider, transparent to the Topology Manager: Allocate and the rest are the
// manager's own) so that, when the last provider has answered and before the merge starts, the number of
// permutations that merge will walk is known exactly. A case may spend mergeBudget permutations over
// all its merges; the merge that would go beyond it is not run: the case's answer ends with
// {"merge_over_budget": N} (N: that merge's permutations) at that admission, and numalign, counting the
// same lists, ends there too (tests/conformance/merge_budget.py). The answer does not depend on the
// machine's speed or load; the hang guard (main.go, CPU time) is left for k/k #140730.

import (
	"context"

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// mergeBudget: permutations per case. The real merge walks about 2.6 million permutations a second on
// one core of this machine (16.6 million took 6.3 s at load 3), so a case within budget spends well under
// a second of CPU merging, far below the hang guard's 20 s of CPU.
const mergeBudget = 1_000_000

// overBudget is what the last provider's wrapper panics with; admitArea recovers it and ends the case.
type overBudget struct{ permutations uint64 }

type mergeCounter struct {
	singleNUMA bool
	spent      uint64
	pending    uint64 // the product of the lists seen since the last merge
}

func newMergeCounter(policy string) *mergeCounter {
	return &mergeCounter{singleNUMA: policy == "single-numa-node", pending: 1}
}

// budgetedProvider is a hint provider as the Topology Manager sees it, counting its hint lists. The
// Topology Manager asks its providers in the order they were added, then merges: `last` marks the
// provider added last (the memory manager, as container_manager_linux.go adds them).
type budgetedProvider struct {
	topologymanager.HintProvider
	counter *mergeCounter
	last    bool
}

func (c *mergeCounter) wrap(p topologymanager.HintProvider, last bool) topologymanager.HintProvider {
	return &budgetedProvider{HintProvider: p, counter: c, last: last}
}

// saturatingMul multiplies without wrapping (a product beyond uint64 is beyond any budget anyway).
func saturatingMul(a, b uint64) uint64 {
	if a != 0 && b > ^uint64(0)/a {
		return ^uint64(0)
	}
	return a * b
}

// listLength is how long one resource's list is in the merge: filterProvidersHints' list for it, then
// filterSingleNumaHints' under single-numa-node. A provider without hints adds one list of one hint.
func (c *mergeCounter) listLength(hints []topologymanager.TopologyHint) uint64 {
	if hints == nil {
		return 1 // {nil, preferred}: kept by every policy
	}
	if len(hints) == 0 {
		if c.singleNUMA {
			return 0 // {nil, not preferred}: single-numa-node drops it, and the merge walks nothing
		}
		return 1
	}
	if !c.singleNUMA {
		return uint64(len(hints))
	}
	n := uint64(0)
	for _, h := range hints {
		if h.Preferred && (h.NUMANodeAffinity == nil || h.NUMANodeAffinity.Count() == 1) {
			n++
		}
	}
	return n
}

// seen records one provider's answer; after the last provider's it checks the budget for the merge
// that follows, before the merge starts.
func (p *budgetedProvider) seen(hints map[string][]topologymanager.TopologyHint) {
	c := p.counter
	for _, list := range hints {
		c.pending = saturatingMul(c.pending, c.listLength(list))
	}
	if !p.last {
		return
	}
	n := c.pending
	c.pending = 1
	// One permutation (or none) is free: such a merge has nothing to walk, and the probe admission of a
	// pod without resources (area_admit.go's heldAnswer) spends nothing.
	if n <= 1 {
		return
	}
	if n > mergeBudget-c.spent {
		panic(overBudget{permutations: n})
	}
	c.spent += n
}

// admitWithin is one admit handler's verdict, or the merge that would go beyond the case's budget.
func admitWithin(ctx context.Context, h lifecycle.PodAdmitHandler, attrs *lifecycle.PodAdmitAttributes) (
	res lifecycle.PodAdmitResult, over *overBudget) {
	defer func() {
		if r := recover(); r != nil {
			o, ok := r.(overBudget)
			if !ok {
				panic(r) // upstream's own panic: main's recover answers it
			}
			over = &o
		}
	}()
	return handlerAdmit(ctx, h, attrs), nil
}
