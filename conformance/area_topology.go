package main

// The "topology" area: the real Topology Manager (NewManager with its policy, scope and options, the
// NUMA distances of a described machine) over a sequence of pod admissions and removals. Its hint
// providers are scripted: each returns the hints the case gives for a container (container scope) or
// for the pod (pod scope), and may fail Allocate for a container with a given text. The answers are
// the admit handler's verdict (admit, reason, message) and the affinity the Store keeps for every
// container of the pod, after admission and after removal.

import (
	"encoding/json"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
)

type tmHint struct {
	Mask      []int `json:"mask"` // null: no NUMA affinity (the hint's NUMANodeAffinity is nil)
	Preferred bool  `json:"preferred"`
}

// tmHints is one provider's answer: null (no preference: a nil map), or resource -> hints, where a
// resource's null is "don't care" and [] is "cannot be satisfied".
type tmHints map[string][]tmHint

type tmPod struct {
	UID            string   `json:"uid"`
	InitContainers []string `json:"init_containers"`
	Containers     []string `json:"containers"`
	// per provider (in registration order): container name -> hints, and the pod's hints
	Hints    []map[string]*tmHints `json:"hints"`
	PodHints []*tmHints            `json:"pod_hints"`
	// per provider: container name -> the error text its Allocate returns
	AllocateErrors []map[string]string `json:"allocate_errors"`
}

type tmStep struct {
	Op  string `json:"op"` // "admit" or "remove"
	Pod tmPod  `json:"pod"`
}

type topologyCase struct {
	NUMANodes []int             `json:"numa_nodes"`
	Distances map[string][]int  `json:"distances"` // node id -> its row; null: cadvisor has none
	Policy    string            `json:"policy"`
	Scope     string            `json:"scope"`
	Options   map[string]string `json:"options"`
	Gates     map[string]bool   `json:"gates"`
	Providers int               `json:"providers"`
	Steps     []tmStep          `json:"steps"`
}

// scriptedProvider answers with the hints of the pod being admitted (set before each step).
type scriptedProvider struct {
	index int
	pod   *tmPod
}

func toHints(h *tmHints) (map[string][]topologymanager.TopologyHint, error) {
	if h == nil {
		return nil, nil
	}
	out := map[string][]topologymanager.TopologyHint{}
	for res, hints := range *h {
		if hints == nil {
			out[res] = nil
			continue
		}
		list := make([]topologymanager.TopologyHint, 0, len(hints))
		for _, x := range hints {
			th := topologymanager.TopologyHint{Preferred: x.Preferred}
			if x.Mask != nil {
				m, err := bitmask.NewBitMask(x.Mask...)
				if err != nil {
					return nil, err
				}
				th.NUMANodeAffinity = m
			}
			list = append(list, th)
		}
		out[res] = list
	}
	return out, nil
}

func (p *scriptedProvider) containerHints(container string) map[string][]topologymanager.TopologyHint {
	if p.index >= len(p.pod.Hints) {
		return nil
	}
	h, _ := toHints(p.pod.Hints[p.index][container])
	return h
}

func (p *scriptedProvider) podHints() map[string][]topologymanager.TopologyHint {
	if p.index >= len(p.pod.PodHints) {
		return nil
	}
	h, _ := toHints(p.pod.PodHints[p.index])
	return h
}

func (p *scriptedProvider) allocate(container string) error {
	if p.index < len(p.pod.AllocateErrors) {
		if text, ok := p.pod.AllocateErrors[p.index][container]; ok {
			return fmt.Errorf("%s", text)
		}
	}
	return nil
}

func tmPodObject(p *tmPod) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.UID, Namespace: "default", UID: types.UID(p.UID)}}
	for _, n := range p.InitContainers {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n})
	}
	for _, n := range p.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n})
	}
	return pod
}

func hintAnswer(h topologymanager.TopologyHint) map[string]any {
	var mask []int
	if h.NUMANodeAffinity != nil {
		mask = h.NUMANodeAffinity.GetBits()
		sort.Ints(mask)
	}
	return map[string]any{"mask": mask, "preferred": h.Preferred}
}

func topologyArea(raw json.RawMessage) (any, error) {
	var c topologyCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("topology case: %w", err)
	}
	restore, err := withGates(c.Gates)
	if err != nil {
		return map[string]any{"start_error": err.Error()}, nil
	}
	defer restore()
	nodes, err := machineNUMANodes(c.NUMANodes, c.Distances)
	if err != nil {
		return nil, err
	}
	mgr, err := newTopologyManager(nodes, c.Policy, c.Scope, c.Options)
	if err != nil {
		// NewPolicyOptions walks the options map: with several bad options, which one the error names
		// depends on Go's map order. Every text seen over mapOrderTries tries is the answer.
		texts := everyMapOrder(mapOrderTries, func(int) (string, bool) {
			_, again := newTopologyManager(nodes, c.Policy, c.Scope, c.Options)
			return errorText(again)
		}, err.Error())
		return startErrorAnswer(texts), nil
	}
	current := &tmPod{}
	for i := 0; i < c.Providers; i++ {
		addHintProvider(mgr, &scriptedProvider{index: i, pod: current})
	}
	steps := make([]map[string]any, 0, len(c.Steps))
	for _, s := range c.Steps {
		*current = s.Pod
		pod := tmPodObject(current)
		names := append(append([]string{}, s.Pod.InitContainers...), s.Pod.Containers...)
		out := map[string]any{}
		switch s.Op {
		case "admit":
			res := admitPod(mgr, pod)
			out["admit"], out["reason"], out["message"] = res.Admit, res.Reason, res.Message
			if res.Admit {
				// The admitted pod's containers start: the kubelet adds each to the manager.
				for i := range pod.Spec.InitContainers {
					addContainer(mgr, pod, &pod.Spec.InitContainers[i], s.Pod.UID+"/"+pod.Spec.InitContainers[i].Name)
				}
				for i := range pod.Spec.Containers {
					addContainer(mgr, pod, &pod.Spec.Containers[i], s.Pod.UID+"/"+pod.Spec.Containers[i].Name)
				}
			}
		case "remove":
			for _, n := range names {
				if err := removeTMContainer(mgr, s.Pod.UID+"/"+n); err != nil {
					out["remove_error"] = err.Error()
				}
			}
		default:
			return nil, fmt.Errorf("topology case: unknown step op %q", s.Op)
		}
		aff := map[string]any{}
		for _, n := range names {
			aff[n] = hintAnswer(getAffinity(mgr, s.Pod.UID, n))
		}
		out["affinity"] = aff
		steps = append(steps, out)
	}
	return map[string]any{"steps": steps}, nil
}

func init() { register("topology", topologyArea) }
