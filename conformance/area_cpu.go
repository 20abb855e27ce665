package main

// The "cpu" area: the CPU manager's static policy (pkg/kubelet/cm/cpumanager), as the kubelet builds it,
// over a sequence of container additions and removals on a described CPU topology. Each addition gets
// the NUMA affinity the Topology Manager would have stored for it (or none), so this area checks
// takeByTopology in every mode (packed, distributed, uncore cache, spread), the options' checks
// (full-pcpus-only's SMT alignment error), reserved CPUs and CPU reuse, at each release's default gates.

import (
	"encoding/json"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
	"k8s.io/utils/cpuset"
)

type cpuStep struct {
	Op        string `json:"op"` // "add" or "remove"
	Pod       string `json:"pod"`
	Container string `json:"container"`
	CPUs      int    `json:"cpus"`     // add: the container's CPU request (= limit, Guaranteed)
	Affinity  []int  `json:"affinity"` // add: the stored NUMA affinity; null: none stored
	Preferred bool   `json:"preferred"`
}

type cpuCase struct {
	// rows [cpu, numa, socket, core, uncore]; core ids as topology.Discover makes them
	CPUs         [][5]int          `json:"cpus"`
	ReservedCPUs []int             `json:"reserved_cpus"` // reservedSystemCPUs; null: NumReserved picked by the policy
	NumReserved  int               `json:"num_reserved"`
	Options      map[string]string `json:"options"`
	// the Topology Manager's policy, which the static policy's option checks read (align-by-socket)
	TopologyManagerPolicy string          `json:"topology_manager_policy"`
	Gates                 map[string]bool `json:"gates"`
	Steps                 []cpuStep       `json:"steps"`
}

// affinityStore is the Topology Manager's Store as the static policy reads it: the affinity of each
// container, as the case gives it.
type affinityStore struct {
	hints  map[string]topologymanager.TopologyHint
	policy topologymanager.Policy
}

func (a *affinityStore) affinity(podUID, container string) topologymanager.TopologyHint {
	return a.hints[podUID+"/"+container]
}
func (a *affinityStore) GetPolicy() topologymanager.Policy { return a.policy }

// topologyPolicy is the named Topology Manager policy; the static policy only asks its name.
func topologyPolicy(name string) (topologymanager.Policy, error) {
	info, opts := &topologymanager.NUMAInfo{}, topologymanager.PolicyOptions{}
	switch name {
	case "", topologymanager.PolicyNone:
		return topologymanager.NewNonePolicy(), nil
	case topologymanager.PolicyBestEffort:
		return topologymanager.NewBestEffortPolicy(info, opts), nil
	case topologymanager.PolicyRestricted:
		return topologymanager.NewRestrictedPolicy(info, opts), nil
	case topologymanager.PolicySingleNumaNode:
		return topologymanager.NewSingleNumaNodePolicy(info, opts), nil
	}
	return nil, fmt.Errorf("cpu case: unknown topology manager policy %q", name)
}
func (a *affinityStore) Name() string { return "conformance" }

func cpuTopology(rows [][5]int) *topology.CPUTopology {
	details := topology.CPUDetails{}
	cores, sockets, numas, uncores := map[[2]int]bool{}, map[int]bool{}, map[int]bool{}, map[int]bool{}
	for _, r := range rows {
		details[r[0]] = topology.CPUInfo{NUMANodeID: r[1], SocketID: r[2], CoreID: r[3], UncoreCacheID: r[4]}
		cores[[2]int{r[2], r[3]}] = true
		sockets[r[2]] = true
		numas[r[1]] = true
		uncores[r[4]] = true
	}
	return &topology.CPUTopology{
		NumCPUs: len(rows), NumCores: len(cores), NumSockets: len(sockets),
		NumNUMANodes: len(numas), NumUncoreCache: len(uncores), CPUDetails: details,
	}
}

func guaranteedPod(uid, container string, cpus int) (*v1.Pod, *v1.Container) {
	rl := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse("1Gi"),
	}
	c := v1.Container{Name: container, Resources: v1.ResourceRequirements{Requests: rl, Limits: rl}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}},
	}
	pod.Status.QOSClass = v1.PodQOSGuaranteed
	return pod, &pod.Spec.Containers[0]
}

func sorted(s cpuset.CPUSet) []int {
	l := s.List()
	sort.Ints(l)
	return l
}

func cpuArea(raw json.RawMessage) (any, error) {
	var c cpuCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("cpu case: %w", err)
	}
	restore, err := withGates(c.Gates)
	if err != nil {
		return map[string]any{"start_error": err.Error()}, nil
	}
	defer restore()
	topo := cpuTopology(c.CPUs)
	tmPolicy, err := topologyPolicy(c.TopologyManagerPolicy)
	if err != nil {
		return nil, err
	}
	store := &affinityStore{hints: map[string]topologymanager.TopologyHint{}, policy: tmPolicy}
	reserved := cpuset.New(c.ReservedCPUs...)
	num := c.NumReserved
	if c.ReservedCPUs != nil {
		num = reserved.Size()
	}
	pol, err := newStaticPolicy(topo, num, reserved, store, c.Options)
	if err != nil {
		// NewStaticPolicyOptions walks the options map: with several bad options, which one the error
		// names depends on Go's map order. Every text seen over mapOrderTries tries is the answer.
		texts := everyMapOrder(mapOrderTries, func(int) (string, bool) {
			_, again := newStaticPolicy(topo, num, reserved, store, c.Options)
			return errorText(again)
		}, err.Error())
		return startErrorAnswer(texts), nil
	}
	st := newMemoryState()
	if err := startPolicy(pol, st); err != nil {
		return map[string]any{"start_error": err.Error()}, nil
	}
	steps := make([]map[string]any, 0, len(c.Steps))
	for _, s := range c.Steps {
		switch s.Op {
		case "add":
			pod, ctr := guaranteedPod(s.Pod, s.Container, s.CPUs)
			hint := topologymanager.TopologyHint{Preferred: s.Preferred}
			if s.Affinity != nil {
				mask, err := bitmask.NewBitMask(s.Affinity...)
				if err != nil {
					return nil, err
				}
				hint.NUMANodeAffinity = mask
			}
			store.hints[s.Pod+"/"+s.Container] = hint
			if err := allocate(pol, st, pod, ctr); err != nil {
				steps = append(steps, map[string]any{"error": err.Error()})
				continue
			}
			got, _ := st.GetCPUSet(s.Pod, s.Container)
			steps = append(steps, map[string]any{"cpus": sorted(got)})
		case "remove":
			if err := removeContainer(pol, st, s.Pod, s.Container); err != nil {
				steps = append(steps, map[string]any{"error": err.Error()})
				continue
			}
			steps = append(steps, map[string]any{"removed": true})
		default:
			return nil, fmt.Errorf("cpu case: unknown step op %q", s.Op)
		}
	}
	return map[string]any{
		"reserved": sorted(reservedOf(pol, topo, num, reserved)),
		"steps":    steps,
		"default":  sorted(st.GetDefaultCPUSet()),
	}, nil
}

func init() { register("cpu", cpuArea) }
