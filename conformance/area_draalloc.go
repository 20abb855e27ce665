//go:build !k8s133

package main

// The "dra-alloc" area: a pod's ResourceClaims allocated on one node by the real structured allocator
// (k8s.io/dynamic-resource-allocation/structured) as kube-scheduler's DynamicResources plugin drives it:
// the objects defaulted as the API server defaults them, PreFilter's device class check, the allocator
// features from the release's gates (with the case's overrides), the allocated state of the claims other
// pods hold, the CEL cache, and the plugin's 10 s filter timeout. The answer: the devices per claim, or
// the plugin's verdict (unschedulable, error, timeout) with its text. In releases whose allocator ranges
// over a Go map of pools (1.34, 1.35) the answer can change from run to run: a case with more than one
// pool is run in many pool orders and every distinct answer is given ("map_order"; draMapOrderTries).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	resourcev1defaults "k8s.io/kubernetes/pkg/apis/resource/v1"
)

type draAllocNode struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type draAllocCase struct {
	GateOverrides map[string]bool              `json:"gate_overrides"`
	Node          draAllocNode                 `json:"node"`
	Slices        []*resourceapi.ResourceSlice `json:"slices"`
	Classes       []*resourceapi.DeviceClass   `json:"classes"`
	Claims        []*resourceapi.ResourceClaim `json:"claims"`
	Allocated     []*resourceapi.ResourceClaim `json:"allocated"`
}

type draClassLister map[string]*resourceapi.DeviceClass

func (l draClassLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l draClassLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("deviceclass.resource.k8s.io %q not found", name)
}

func init() { register("dra-alloc", draAlloc) }

func draAlloc(raw json.RawMessage) (any, error) {
	var c draAllocCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	restore, err := withGates(c.GateOverrides)
	if err != nil {
		return map[string]any{"outcome": "gates", "message": err.Error()}, nil
	}
	defer restore()
	for _, claim := range append(append([]*resourceapi.ResourceClaim{}, c.Claims...), c.Allocated...) {
		resourcev1defaults.SetObjectDefaults_ResourceClaim(claim)
	}
	classes := draClassLister{}
	for _, class := range c.Classes {
		classes[class.Name] = class
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.Node.Name, Labels: c.Node.Labels}}
	// PreFilter, request by request: every class a pending claim names must exist (validateDeviceClass),
	// and a request with subrequests needs DRAPrioritizedList.
	var pending []*resourceapi.ResourceClaim
	for _, claim := range c.Claims {
		if claim.Status.Allocation != nil {
			continue
		}
		for _, request := range claim.Spec.Devices.Requests {
			if request.Exactly != nil {
				if _, ok := classes[request.Exactly.DeviceClassName]; !ok {
					return draVerdict("unschedulable", fmt.Sprintf("request %s: device class %s does not exist", request.Name, request.Exactly.DeviceClassName)), nil
				}
				continue
			}
			if len(request.FirstAvailable) > 0 && !gate("DRAPrioritizedList") {
				return draVerdict("unschedulable", fmt.Sprintf("resource claim %s, request %s: has subrequests, but the DRAPrioritizedList feature is disabled", klog.KObj(claim), request.Name)), nil
			}
			for _, sub := range request.FirstAvailable {
				if _, ok := classes[sub.DeviceClassName]; !ok {
					return draVerdict("unschedulable", fmt.Sprintf("request %s/%s: device class %s does not exist", request.Name, sub.Name, sub.DeviceClassName)), nil
				}
			}
		}
		pending = append(pending, claim)
	}
	tries := 1
	if draAllocMapOrder && len(draPools(c.Slices, draSlicePool)) > 1 {
		tries = draMapOrderTries
	}
	start := time.Now()
	answers := everyMapOrder(tries, func(i int) (map[string]any, bool) {
		if i > 0 && time.Since(start) > draMapOrderBudget {
			return nil, false
		}
		return draAllocOnce(c, draPoolOrder(c.Slices, draSlicePool, i), pending, classes, node), true
	})
	if len(answers) == 1 {
		return answers[0], nil
	}
	return map[string]any{"map_order": answers}, nil
}

// draSlicePool: the (driver, pool) a slice publishes to.
func draSlicePool(s *resourceapi.ResourceSlice) string {
	return s.Spec.Driver + "\x00" + s.Spec.Pool.Name
}

func draAllocOnce(c draAllocCase, slices []*resourceapi.ResourceSlice, pending []*resourceapi.ResourceClaim, classes draClassLister, node *v1.Node) map[string]any {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	held := append([]*resourceapi.ResourceClaim{}, c.Allocated...)
	for _, claim := range c.Claims {
		if claim.Status.Allocation != nil {
			held = append(held, claim)
		}
	}
	for _, claim := range held {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	if len(pending) == 0 {
		return map[string]any{"outcome": "ok", "claims": draResults(c.Claims, nil, pending)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), draFilterTimeout)
	defer cancel()
	features := draAllocFeatures()
	allocator, err := structured.NewAllocator(ctx, features, state, classes, slices, dracel.NewCache(10, draAllocCelFeatures()))
	if err != nil {
		return draVerdict("error", err.Error())
	}
	results, err := allocator.Allocate(ctx, node, pending)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		outcome, message := draTimeout(node.Name)
		_ = outcome // the plugin reports it as this kind; numalign's AllocationFailure.kind
		return draVerdict("timeout", message)
	case draNodeFailure(err):
		return draVerdict("unschedulable", err.Error())
	case err != nil:
		return draVerdict("error", err.Error())
	case len(results) != len(pending):
		return draVerdict("unschedulable", "cannot allocate all claims")
	}
	return map[string]any{"outcome": "ok", "claims": draResults(c.Claims, results, pending)}
}

// draResults: per claim in order, its allocation results (an already allocated claim keeps its own).
func draResults(claims []*resourceapi.ResourceClaim, results []resourceapi.AllocationResult, pending []*resourceapi.ResourceClaim) [][]map[string]any {
	byClaim := map[*resourceapi.ResourceClaim]*resourceapi.AllocationResult{}
	for i := range results {
		byClaim[pending[i]] = &results[i]
	}
	out := [][]map[string]any{}
	for _, claim := range claims {
		allocation := claim.Status.Allocation
		if r, ok := byClaim[claim]; ok {
			allocation = r
		}
		entries := []map[string]any{}
		if allocation != nil {
			for _, r := range allocation.Devices.Results {
				e := map[string]any{"request": r.Request, "driver": r.Driver, "pool": r.Pool, "device": r.Device}
				if r.AdminAccess != nil && *r.AdminAccess {
					e["adminAccess"] = true
				}
				if r.ShareID != nil {
					e["shared"] = true
				}
				if len(r.ConsumedCapacity) > 0 {
					cc := map[string]string{}
					for k, q := range r.ConsumedCapacity {
						cc[string(k)] = q.String()
					}
					e["consumedCapacity"] = cc
				}
				entries = append(entries, e)
			}
		}
		out = append(out, entries)
	}
	return out
}
