//go:build k8s133

package main

// The "dra-alloc" area at 1.33: the structured allocator of k8s.io/dynamic-resource-allocation v0.33
// as kube-scheduler 1.33's DynamicResources plugin drives it. 1.33 has no resource.k8s.io/v1: the
// scheduler reads v1beta1 objects, which the API server converts from what users send. The cases are in
// v1's shape, which for every field they use is v1beta2's (1.33's newest version), so each object is
// read as v1beta2, defaulted as the API server defaults a v1beta2 create, and converted through the
// internal types to v1beta1 with the API server's own conversion functions. The plugin's flow is 1.33's:
// PreFilter refuses a request with subrequests when DRAPrioritizedList is off and a missing device class,
// the allocator gets its claims at NewAllocator, there is no filter timeout (the search runs to its end;
// a search past the CPU-time guard is answered {"hang": true}), and GatherPools ranges over a Go map of
// pools (so a case with more pools is run in many pool orders, "map_order", draalloc_order.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/apis/resource"
	resourcev1beta1conv "k8s.io/kubernetes/pkg/apis/resource/v1beta1"
	resourcev1beta2conv "k8s.io/kubernetes/pkg/apis/resource/v1beta2"
	"k8s.io/utils/ptr"
)

type draAllocNode struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// draAllocCase133: a case as the user wrote it (v1's shape, read as v1beta2).
type draAllocCase133 struct {
	GateOverrides map[string]bool                  `json:"gate_overrides"`
	Node          draAllocNode                     `json:"node"`
	Slices        []*resourcev1beta2.ResourceSlice `json:"slices"`
	Classes       []*resourcev1beta2.DeviceClass   `json:"classes"`
	Claims        []*resourcev1beta2.ResourceClaim `json:"claims"`
	Allocated     []*resourcev1beta2.ResourceClaim `json:"allocated"`
}

type draClassLister133 map[string]*resourcev1beta1.DeviceClass

func (l draClassLister133) List() ([]*resourcev1beta1.DeviceClass, error) {
	out := make([]*resourcev1beta1.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l draClassLister133) Get(name string) (*resourcev1beta1.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("deviceclass.resource.k8s.io %q not found", name)
}

func init() { register("dra-alloc", draAlloc133) }

// The objects as the 1.33 scheduler's informers see them: defaulted as a v1beta2 create is, then
// v1beta2 -> internal -> v1beta1 (the API server's conversion).

func draClaim133(in *resourcev1beta2.ResourceClaim) (*resourcev1beta1.ResourceClaim, error) {
	resourcev1beta2conv.SetObjectDefaults_ResourceClaim(in)
	var internal resource.ResourceClaim
	if err := resourcev1beta2conv.Convert_v1beta2_ResourceClaim_To_resource_ResourceClaim(in, &internal, nil); err != nil {
		return nil, fmt.Errorf("claim %s: %w", in.Name, err)
	}
	out := &resourcev1beta1.ResourceClaim{}
	if err := resourcev1beta1conv.Convert_resource_ResourceClaim_To_v1beta1_ResourceClaim(&internal, out, nil); err != nil {
		return nil, fmt.Errorf("claim %s: %w", in.Name, err)
	}
	return out, nil
}

func draSlice133(in *resourcev1beta2.ResourceSlice) (*resourcev1beta1.ResourceSlice, error) {
	resourcev1beta2conv.SetObjectDefaults_ResourceSlice(in)
	var internal resource.ResourceSlice
	if err := resourcev1beta2conv.Convert_v1beta2_ResourceSlice_To_resource_ResourceSlice(in, &internal, nil); err != nil {
		return nil, fmt.Errorf("slice %s: %w", in.Name, err)
	}
	out := &resourcev1beta1.ResourceSlice{}
	if err := resourcev1beta1conv.Convert_resource_ResourceSlice_To_v1beta1_ResourceSlice(&internal, out, nil); err != nil {
		return nil, fmt.Errorf("slice %s: %w", in.Name, err)
	}
	return out, nil
}

func draClass133(in *resourcev1beta2.DeviceClass) (*resourcev1beta1.DeviceClass, error) {
	var internal resource.DeviceClass
	if err := resourcev1beta2conv.Convert_v1beta2_DeviceClass_To_resource_DeviceClass(in, &internal, nil); err != nil {
		return nil, fmt.Errorf("class %s: %w", in.Name, err)
	}
	out := &resourcev1beta1.DeviceClass{}
	if err := resourcev1beta1conv.Convert_resource_DeviceClass_To_v1beta1_DeviceClass(&internal, out, nil); err != nil {
		return nil, fmt.Errorf("class %s: %w", in.Name, err)
	}
	return out, nil
}

func draAlloc133(raw json.RawMessage) (any, error) {
	var c draAllocCase133
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	restore, err := withGates(c.GateOverrides)
	if err != nil {
		return map[string]any{"outcome": "gates", "message": err.Error()}, nil
	}
	defer restore()
	var claims, held []*resourcev1beta1.ResourceClaim
	for _, in := range c.Claims {
		claim, err := draClaim133(in)
		if err != nil {
			return nil, err
		}
		claims = append(claims, claim)
	}
	for _, in := range c.Allocated {
		claim, err := draClaim133(in)
		if err != nil {
			return nil, err
		}
		held = append(held, claim)
	}
	var slices []*resourcev1beta1.ResourceSlice
	for _, in := range c.Slices {
		slice, err := draSlice133(in)
		if err != nil {
			return nil, err
		}
		slices = append(slices, slice)
	}
	classes := draClassLister133{}
	for _, in := range c.Classes {
		class, err := draClass133(in)
		if err != nil {
			return nil, err
		}
		classes[class.Name] = class
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.Node.Name, Labels: c.Node.Labels}}
	if !gate("DynamicResourceAllocation") {
		// The plugin is not enabled (PreFilter skips the pod): the generated cases turn the gate on.
		return draVerdict("disabled", "the DynamicResources plugin is disabled"), nil
	}
	// PreFilter, request by request of each pending claim in order (1.33's dynamicresources.go).
	var pending []*resourcev1beta1.ResourceClaim
	for _, claim := range claims {
		if claim.Status.Allocation != nil {
			held = append(held, claim)
			continue
		}
		for _, request := range claim.Spec.Devices.Requests {
			if len(request.FirstAvailable) == 0 {
				if verdict := draClassCheck133(classes, request.DeviceClassName, request.Name); verdict != nil {
					return verdict, nil
				}
				continue
			}
			if !gate("DRAPrioritizedList") {
				return draVerdict("unschedulable", fmt.Sprintf("resource claim %s, request %s: has subrequests, but the DRAPrioritizedList feature is disabled", klog.KObj(claim), request.Name)), nil
			}
			for _, sub := range request.FirstAvailable {
				if verdict := draClassCheck133(classes, sub.DeviceClassName, request.Name+"/"+sub.Name); verdict != nil {
					return verdict, nil
				}
			}
		}
		pending = append(pending, claim)
	}
	// The allocated state: every device of an allocation but those with admin access (allocateddevices.go).
	allocated := sets.New[structured.DeviceID]()
	for _, claim := range held {
		for _, r := range claim.Status.Allocation.Devices.Results {
			if !ptr.Deref(r.AdminAccess, false) {
				allocated.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	if len(pending) == 0 {
		return map[string]any{"outcome": "ok", "claims": draResults133(claims, nil, pending)}, nil
	}
	pool := func(s *resourcev1beta1.ResourceSlice) string { return s.Spec.Driver + "\x00" + s.Spec.Pool.Name }
	tries := 1
	if len(draPools(slices, pool)) > 1 {
		tries = draMapOrderTries
	}
	start := time.Now()
	answers := everyMapOrder(tries, func(i int) (map[string]any, bool) {
		if i > 0 && time.Since(start) > draMapOrderBudget {
			return nil, false
		}
		return draAllocOnce133(claims, pending, allocated, classes, draPoolOrder(slices, pool, i), node), true
	})
	if len(answers) == 1 {
		return answers[0], nil
	}
	return map[string]any{"map_order": answers}, nil
}

// draClassCheck133: validateDeviceClass (an empty class name is an error; a missing class unschedulable).
func draClassCheck133(classes draClassLister133, class, request string) map[string]any {
	if class == "" {
		return draVerdict("error", fmt.Sprintf("request %s: unsupported request type", request))
	}
	if _, ok := classes[class]; !ok {
		return draVerdict("unschedulable", fmt.Sprintf("request %s: device class %s does not exist", request, class))
	}
	return nil
}

func draAllocOnce133(claims, pending []*resourcev1beta1.ResourceClaim, allocated sets.Set[structured.DeviceID],
	classes draClassLister133, slices []*resourcev1beta1.ResourceSlice, node *v1.Node) map[string]any {
	features := structured.Features{
		AdminAccess:          gate("DRAAdminAccess"),
		PrioritizedList:      gate("DRAPrioritizedList"),
		PartitionableDevices: gate("DRAPartitionableDevices"),
		DeviceTaints:         gate("DRADeviceTaints"),
	}
	ctx := context.Background()
	// The plugin makes one allocator in PreFilter and calls it per node in Filter, with no timeout.
	allocator, err := structured.NewAllocator(ctx, features, pending, allocated.Clone(), classes, slices, dracel.NewCache(10))
	if err != nil {
		return draVerdict("error", err.Error())
	}
	results, err := allocator.Allocate(ctx, node)
	switch {
	case err != nil:
		return draVerdict("error", err.Error())
	case len(results) != len(pending):
		return draVerdict("unschedulable", "cannot allocate all claims")
	}
	return map[string]any{"outcome": "ok", "claims": draResults133(claims, results, pending)}
}

// draResults133: per claim in order, its allocation results (an already allocated claim keeps its own).
func draResults133(claims []*resourcev1beta1.ResourceClaim, results []resourcev1beta1.AllocationResult, pending []*resourcev1beta1.ResourceClaim) [][]map[string]any {
	byClaim := map[*resourcev1beta1.ResourceClaim]*resourcev1beta1.AllocationResult{}
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
				if ptr.Deref(r.AdminAccess, false) {
					e["adminAccess"] = true
				}
				entries = append(entries, e)
			}
		}
		out = append(out, entries)
	}
	return out
}
