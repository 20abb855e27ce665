package main

// The "admit" area: a kubelet's pod admission, in-process, with the real managers wired as
// pkg/kubelet/cm/container_manager_linux.go wires them: topologymanager.NewManager (policy, scope,
// options), then the device manager (devicemanager.NewManagerImpl), the CPU manager and the memory
// manager, each AddHintProvider'd in that order; the admit handlers as kubelet.go registers them (the
// Topology Manager's, then the predicate handler with the device manager's UpdatePluginResources and
// a node whose status the real nodestatus.MachineInfo setter fills). Devices come from the kubelet's
// own device-plugin stub (devicemanager/plugin/v1beta1), one per resource, registering through the
// device manager's real registration socket (area_admit_ns.go gives the harness a private
// /var/lib/kubelet/device-plugins).
//
// A case is a cadvisor MachineInfo, the kubelet configuration's fields these managers read, the
// devices per resource with their NUMA nodes, and a sequence of admissions and pod deletions. The
// kubelet's own steps around them are done here as the kubelet does them:
//   - cmd/kubelet/app/server.go: reservedSystemCPUs replaces the cpu of kubeReserved and
//     systemReserved; the hard eviction thresholds parsed with eviction.ParseThresholdConfig;
//   - the node allocatable reservation (cm.GetNodeAllocatableReservation): kube + system reserved +
//     the hard eviction thresholds of memory.available (a quantity, or a percentage of capacity);
//   - active pods: the admitted pods not deleted, and the pod being admitted (the pod manager holds it
//     during admission); a rejected pod is terminal, so whatever its admission allocated stays until a
//     manager's next removeStaleState / UpdateAllocatedDevices, as in the kubelet;
//   - an admitted pod's containers start: PreStartContainer's AddContainer to the CPU, memory and
//     Topology managers; a deleted pod's containers stop: PostStopContainer's Topology Manager
//     RemoveContainer (the CPU, memory and device managers release it when it is no longer active).
//
// The answer per admission: the verdict (admit, reason, message) and per container the Topology
// Manager's affinity, the exclusive CPUs (none: the shared pool), the memory blocks and the devices.
// A case may name devices whose plugin refuses an Allocate that includes them (allocateEach), and ask
// for what the managers hold after every step (heldAnswer: their state and the device checkpoint).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
)

type (
	cpuManager    = cpumanager.Manager
	memoryManager = memorymanager.Manager
)

// noRuntime is the container runtime the CPU manager's reconcile loop would update; it is never
// reached (no pod has a status, see noStatus).
type noRuntime struct{}

func (noRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

// The CPU manager's reconcile loop starts at once and then waits this long: no case lasts that long.
const reconcilePeriod = 24 * time.Hour

// machineCapacity is the container manager's capacity from cadvisor (cpu, memory, hugepages).
func machineCapacity(m *cMachineInfo) v1.ResourceList { return cadvisor.CapacityFromMachineInfo(m) }

func topologyManagerPolicyOptionsEnabled() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.TopologyManagerPolicyOptions)
}

type admitConfig struct {
	CPUManagerPolicy             string             `json:"cpuManagerPolicy"`
	CPUManagerPolicyOptions      map[string]string  `json:"cpuManagerPolicyOptions"`
	ReservedSystemCPUs           string             `json:"reservedSystemCPUs"`
	KubeReserved                 map[string]string  `json:"kubeReserved"`
	SystemReserved               map[string]string  `json:"systemReserved"`
	EvictionHard                 map[string]string  `json:"evictionHard"`
	MemoryManagerPolicy          string             `json:"memoryManagerPolicy"`
	ReservedMemory               []admitReservation `json:"reservedMemory"`
	TopologyManagerPolicy        string             `json:"topologyManagerPolicy"`
	TopologyManagerScope         string             `json:"topologyManagerScope"`
	TopologyManagerPolicyOptions map[string]string  `json:"topologyManagerPolicyOptions"`
	FeatureGates                 map[string]bool    `json:"featureGates"`
	MaxPods                      int                `json:"maxPods"`
}

type admitReservation struct {
	NumaNode int32           `json:"numaNode"`
	Limits   v1.ResourceList `json:"limits"`
}

type admitDevice struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	NUMA     []int  `json:"numa"` // null: the device reports no topology
	// Unhealthy: the plugin lists the device as Unhealthy
	Unhealthy bool `json:"unhealthy"`
	// FailAllocate: the plugin's Allocate fails for a request that includes the device
	FailAllocate bool `json:"failAllocate"`
	// EmptyAllocate: the plugin answers an Allocate that includes the device with no container response
	EmptyAllocate bool `json:"emptyAllocate"`
}

// pluginCalls is what the device plugins were asked, per resource, since the last step's answer: each
// GetPreferredAllocation (the ids sorted: the kubelet sends Go set order) and Allocate.
type pluginCalls struct {
	mu    sync.Mutex
	calls map[string][]map[string]any
}

func (p *pluginCalls) add(resource string, call map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[string][]map[string]any{}
	}
	p.calls[resource] = append(p.calls[resource], call)
}

func (p *pluginCalls) take() map[string][]map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = nil
	return out
}

func sortedIDs(ids []string) []string {
	out := append([]string{}, ids...)
	sort.Strings(out)
	return out
}

type admitStep struct {
	Op  string  `json:"op"` // "admit" (Pod) or "delete" (UID)
	Pod *v1.Pod `json:"pod"`
	UID string  `json:"uid"`
}

type admitCase struct {
	Machine json.RawMessage `json:"machine"` // cadvisor MachineInfo
	Config  admitConfig     `json:"config"`
	Devices []admitDevice   `json:"devices"`
	Steps   []admitStep     `json:"steps"`
	// Held: each step's answer also says what the managers hold after it (heldAnswer)
	Held bool `json:"held"`
}

// pods is the kubelet's view of its pods that the managers' ActivePodsFunc reads (the CPU manager's
// reconcile loop reads it from its own goroutine).
type pods struct {
	mu        sync.Mutex
	live      []*v1.Pod
	admitting *v1.Pod
}

func (p *pods) active() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]*v1.Pod{}, p.live...)
	if p.admitting != nil {
		out = append(out, p.admitting)
	}
	return out
}

func (p *pods) others(uid types.UID) []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []*v1.Pod{}
	for _, x := range p.live {
		if x.UID != uid {
			out = append(out, x)
		}
	}
	return out
}

type sourcesReady struct{}

func (sourcesReady) AddSource(string) {}
func (sourcesReady) AllReady() bool   { return true }

// noStatus is the status manager with no pod status cached: the CPU manager's reconcile loop skips
// every container, as it does for containers not started yet.
type noStatus struct{}

func (noStatus) GetPodStatus(types.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }

// parseReserved is server.go's parseResourceList for the resources a case reserves (cpu rounded to
// millicores as there).
func parseReserved(m map[string]string) (v1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	rl := v1.ResourceList{}
	for k, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("failed to parse quantity %q for %q resource: %w", v, k, err)
		}
		if v1.ResourceName(k) == v1.ResourceCPU {
			q.SetMilli((q.ScaledValue(resource.Micro) + 500) / 1000)
		}
		rl[v1.ResourceName(k)] = q
	}
	return rl, nil
}

// reservation is the container manager's GetNodeAllocatableReservation for this capacity.
func reservation(capacity, kube, system v1.ResourceList, thresholds []evictionapi.Threshold) v1.ResourceList {
	evict := v1.ResourceList{}
	for _, t := range thresholds {
		if t.Operator != evictionapi.OpLessThan {
			continue
		}
		if t.Signal == evictionapi.SignalMemoryAvailable {
			c := capacity[v1.ResourceMemory]
			evict[v1.ResourceMemory] = *evictionapi.GetThresholdQuantity(t.Value, &c)
		}
	}
	out := v1.ResourceList{}
	for k := range capacity {
		v := resource.NewQuantity(0, resource.DecimalSI)
		v.Add(system[k])
		v.Add(kube[k])
		v.Add(evict[k])
		if !v.IsZero() {
			out[k] = *v
		}
	}
	return out
}

func deviceStubs(ctx context.Context, devices []admitDevice, log *pluginCalls) ([]*plugin.Stub, map[string]int, error) {
	byResource := map[string][]*pluginapi.Device{}
	failing := map[string]map[string]bool{}
	empty := map[string]bool{}
	order := []string{}
	for _, d := range devices {
		if d.EmptyAllocate {
			empty[d.ID] = true
		}
		if d.FailAllocate {
			if failing[d.Resource] == nil {
				failing[d.Resource] = map[string]bool{}
			}
			failing[d.Resource][d.ID] = true
		}
		dev := &pluginapi.Device{ID: d.ID, Health: pluginapi.Healthy}
		if d.Unhealthy {
			dev.Health = pluginapi.Unhealthy
		}
		if d.NUMA != nil {
			dev.Topology = &pluginapi.TopologyInfo{}
			for _, n := range d.NUMA {
				dev.Topology.Nodes = append(dev.Topology.Nodes, &pluginapi.NUMANode{ID: int64(n)})
			}
		}
		if _, ok := byResource[d.Resource]; !ok {
			order = append(order, d.Resource)
		}
		byResource[d.Resource] = append(byResource[d.Resource], dev)
	}
	stubs := []*plugin.Stub{}
	counts := map[string]int{}
	for i, res := range order {
		sock := filepath.Join(pluginapi.DevicePluginPath, "conformance-"+strconv.Itoa(i)+".sock")
		stub := newStub(byResource[res], sock, res)
		alloc, resource := allocateEach(failing[res], empty), res
		setStubFuncs(stub, func(r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			for _, req := range r.ContainerRequests {
				log.add(resource, map[string]any{"call": "Allocate", "devices": sortedIDs(requestDevices(req))})
			}
			return alloc(r)
		}, func(r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
			for _, req := range r.ContainerRequests {
				log.add(resource, map[string]any{"call": "GetPreferredAllocation", "available": sortedIDs(req.AvailableDeviceIDs),
					"mustInclude": sortedIDs(req.MustIncludeDeviceIDs), "size": req.AllocationSize})
			}
			return preferNatural(r)
		})
		if err := startStub(ctx, stub); err != nil {
			return stubs, nil, fmt.Errorf("device plugin stub %s: %w", res, err)
		}
		stubs = append(stubs, stub)
		if err := registerStub(ctx, stub, res); err != nil {
			return stubs, nil, fmt.Errorf("device plugin stub %s: register: %w", res, err)
		}
		if err := waitForCheckpoint(res); err != nil {
			return stubs, nil, err
		}
		counts[res] = len(byResource[res])
	}
	return stubs, counts, nil
}

// allocateEach answers Allocate as a device plugin does: one container response per container
// request (the stub's default answers none, which the kubelet rejects as unexpected); a request that
// includes a failing device is refused, naming the failing devices it includes in natural order (the
// kubelet sends the ids in Go set order). The error reaches the kubelet as a gRPC status of code
// Unknown, as any plugin's error does. A request that includes an "empty" device (and no failing one) is
// answered with no container response at all.
func allocateEach(failing, empty map[string]bool) func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	return func(r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
		resp := &pluginapi.AllocateResponse{}
		for _, req := range r.ContainerRequests {
			bad, blank := []string{}, false
			for _, id := range requestDevices(req) {
				if failing[id] {
					bad = append(bad, id)
				}
				blank = blank || empty[id]
			}
			if len(bad) > 0 {
				sort.Slice(bad, func(i, j int) bool { return naturalLess(bad[i], bad[j]) })
				return nil, fmt.Errorf("device %s failed to reset", strings.Join(bad, ","))
			}
			if blank {
				return &pluginapi.AllocateResponse{}, nil
			}
			resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
				Envs: map[string]string{"CONFORMANCE": "1"},
			})
		}
		return resp, nil
	}
}

// preferNatural is the plugins' GetPreferredAllocation: the devices that must be included, then the
// others in natural id order (gpu2 before gpu10). Where the device manager picks from a Go set on
// its own (map order: random), it asks the plugin first when the plugin offers a preference, so
// with this one every pick but a reuse of more devices than needed is determined; numalign's
// plugins are given the same preference (tests/conformance/areas/admit.py).
func preferNatural(r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, req := range r.ContainerRequests {
		ids := append([]string{}, req.MustIncludeDeviceIDs...)
		must := map[string]bool{}
		for _, id := range ids {
			must[id] = true
		}
		rest := []string{}
		for _, id := range req.AvailableDeviceIDs {
			if !must[id] {
				rest = append(rest, id)
			}
		}
		sort.Slice(rest, func(i, j int) bool { return naturalLess(rest[i], rest[j]) })
		ids = append(ids, rest...)
		if len(ids) > int(req.AllocationSize) {
			ids = ids[:req.AllocationSize]
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// naturalLess orders ids by their runs of digits as numbers and the rest as text.
func naturalLess(a, b string) bool {
	pa, pb := naturalParts(a), naturalParts(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, y := pa[i], pb[i]
		if x.isNum != y.isNum {
			return x.isNum
		}
		if x.isNum && x.num != y.num {
			return x.num < y.num
		}
		if !x.isNum && x.text != y.text {
			return x.text < y.text
		}
	}
	return len(pa) < len(pb)
}

type naturalPart struct {
	isNum bool
	num   int
	text  string
}

func naturalParts(s string) []naturalPart {
	out := []naturalPart{}
	for i := 0; i < len(s); {
		j := i
		digits := s[i] >= '0' && s[i] <= '9'
		for j < len(s) && (s[j] >= '0' && s[j] <= '9') == digits {
			j++
		}
		p := naturalPart{isNum: digits, text: s[i:j]}
		if digits {
			p.num, _ = strconv.Atoi(s[i:j])
		}
		out = append(out, p)
		i = j
	}
	return out
}

// waitForCheckpoint waits until the device manager's checkpoint file names the resource among its
// registered devices: the plugin's first ListAndWatch update has been written. Each update writes a
// snapshot taken under the manager's lock outside it, so plugins registering together could leave the
// file holding an older snapshot than the newest; one plugin at a time, no write is left in flight.
func waitForCheckpoint(resource string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var file struct {
			Data struct{ RegisteredDevices map[string]json.RawMessage }
		}
		raw, err := os.ReadFile(filepath.Join(pluginapi.DevicePluginPath, "kubelet_internal_checkpoint"))
		if err == nil && json.Unmarshal(raw, &file) == nil {
			if _, ok := file.Data.RegisteredDevices[resource]; ok {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the device manager did not write %s's devices to its checkpoint within 10 s", resource)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// waitForDevices waits until ListAndWatch has delivered every plugin's devices to the manager.
func waitForDevices(dm *devicemanager.ManagerImpl, counts map[string]int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		capacity, _, _ := dmCapacity(dm)
		ready := true
		for res, n := range counts {
			q, ok := capacity[v1.ResourceName(res)]
			if !ok || q.Value() != int64(n) {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("device plugins did not report their devices within 10 s")
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func admitArea(raw json.RawMessage) (any, error) {
	var c admitCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("admit case: %w", err)
	}
	if !privateDevicePlugins {
		return nil, fmt.Errorf("admit case: the device manager needs a private %s (%s)", pluginapi.DevicePluginPath, privateReason)
	}
	restore, err := withGates(c.Config.FeatureGates)
	if err != nil {
		return map[string]any{"start_error": err.Error()}, nil
	}
	defer restore()
	counted := startCaseMetrics() // admit_metrics.go: before the managers' start-up creates its series
	ctx := context.Background()
	machine, err := decodeJSON[*cMachineInfo](c.Machine)
	if err != nil {
		return nil, fmt.Errorf("admit case: machine: %w", err)
	}
	topo, err := json.Marshal(machine.Topology)
	if err != nil {
		return nil, err
	}
	cfg := c.Config
	// server.go: reservedSystemCPUs overrides the cpu of kubeReserved and systemReserved.
	reservedCPUs, err := cpuset.Parse(cfg.ReservedSystemCPUs)
	if err != nil {
		return map[string]any{"start_error": err.Error()}, nil
	}
	kubeRes, sysRes := map[string]string{}, map[string]string{}
	for k, v := range cfg.KubeReserved {
		kubeRes[k] = v
	}
	for k, v := range cfg.SystemReserved {
		sysRes[k] = v
	}
	if reservedCPUs.Size() > 0 {
		delete(kubeRes, "cpu")
		sysRes["cpu"] = strconv.Itoa(reservedCPUs.Size())
	}
	kube, err := parseReserved(kubeRes)
	if err != nil {
		return map[string]any{"start_error": "--kube-reserved value failed to parse: " + err.Error()}, nil
	}
	system, err := parseReserved(sysRes)
	if err != nil {
		return map[string]any{"start_error": "--system-reserved value failed to parse: " + err.Error()}, nil
	}
	thresholds, err := eviction.ParseThresholdConfig([]string{}, cfg.EvictionHard, nil, nil, nil)
	if err != nil {
		return map[string]any{"start_error": err.Error()}, nil
	}
	capacity := machineCapacity(machine)
	reserved := reservation(capacity, kube, system, thresholds)
	options := cfg.TopologyManagerPolicyOptions
	if !topologyManagerPolicyOptionsEnabled() && options != nil {
		return map[string]any{"start_error": fmt.Sprintf("topology manager policy options %v require feature gates %q enabled",
			options, "TopologyManagerPolicyOptions")}, nil
	}

	tm, err := newTopologyManager(topo, cfg.TopologyManagerPolicy, cfg.TopologyManagerScope, options)
	if err != nil {
		return startErrors(err, func() error {
			_, again := newTopologyManager(topo, cfg.TopologyManagerPolicy, cfg.TopologyManagerScope, options)
			return again
		}), nil
	}
	dm, err := newDeviceManager(topo, tm)
	if err != nil {
		return nil, fmt.Errorf("admit case: device manager: %w", err)
	}
	budget := newMergeCounter(cfg.TopologyManagerPolicy) // admit_merge_budget.go
	addHintProvider(tm, budget.wrap(dm, false))
	// The managers' state files go to the private tmpfs (area_admit_ns.go): no disk syncs.
	dir, err := os.MkdirTemp("/var/lib/kubelet", "state-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cpuM, err := newCPUManager(cfg.CPUManagerPolicy, cfg.CPUManagerPolicyOptions, machine, reservedCPUs, reserved, dir, tm)
	if err != nil {
		return startErrors(err, func() error {
			_, again := newCPUManager(cfg.CPUManagerPolicy, cfg.CPUManagerPolicyOptions, machine, reservedCPUs, reserved, dir, tm)
			return again
		}), nil
	}
	addHintProvider(tm, budget.wrap(cpuM, false))
	reservedMemory := []kubeletconfig.MemoryReservation{}
	for _, r := range cfg.ReservedMemory {
		reservedMemory = append(reservedMemory, kubeletconfig.MemoryReservation{NumaNode: r.NumaNode, Limits: r.Limits})
	}
	memM, err := newMemoryManager(cfg.MemoryManagerPolicy, machine, reserved, reservedMemory, dir, tm)
	if err != nil {
		// validateReservedMemory walks a Go map of memory types: with two types whose reservation differs
		// from the node allocatable one (hugepages-2Mi and hugepages-1Gi), which one it names is random.
		return startErrors(err, func() error {
			_, again := newMemoryManager(cfg.MemoryManagerPolicy, machine, reserved, reservedMemory, dir, tm)
			return again
		}), nil
	}
	addHintProvider(tm, budget.wrap(memM, true))

	state := &pods{}
	// The container manager's Start: the CPU, memory and device managers in its order.
	if err := startCPUManager(ctx, cpuM, state.active); err != nil {
		return map[string]any{"start_error": err.Error()}, nil
	}
	if err := startMemoryManager(ctx, memM, state.active); err != nil {
		return map[string]any{"start_error": err.Error()}, nil
	}
	_ = os.Remove(filepath.Join(pluginapi.DevicePluginPath, "kubelet_internal_checkpoint"))
	if err := startDeviceManager(dm, state.active); err != nil {
		return nil, fmt.Errorf("admit case: device manager start: %w", err)
	}
	defer stopDeviceManager(dm)
	calls := &pluginCalls{}
	stubs, counts, err := deviceStubs(ctx, c.Devices, calls)
	defer func() {
		for _, s := range stubs {
			stopStub(s)
		}
	}()
	if err != nil {
		return nil, err
	}
	if err := waitForDevices(dm, counts); err != nil {
		return nil, err
	}

	maxPods := cfg.MaxPods
	predicate := newPredicateHandler(func() *v1.Node {
		return nodeStatus(machine, maxPods, dm, reserved)
	}, dm)
	handlers := []lifecycle.PodAdmitHandler{tm, predicate}
	steps := make([]map[string]any, 0, len(c.Steps))
	containerID := func(pod *v1.Pod, name string) string { return string(pod.UID) + "/" + name }
	for _, s := range c.Steps {
		switch s.Op {
		case "admit":
			pod := s.Pod
			if pod == nil {
				return nil, fmt.Errorf("admit case: an admit step without a pod")
			}
			state.mu.Lock()
			state.admitting = pod
			state.mu.Unlock()
			attrs := admitAttributes(pod, state.others(pod.UID))
			out := map[string]any{"admit": true, "reason": "", "message": ""}
			for _, h := range handlers {
				res, over := admitWithin(ctx, h, attrs)
				if over != nil { // the merge is not run: the case ends here (admit_merge_budget.go)
					steps = append(steps, map[string]any{"merge_over_budget": over.permutations})
					return map[string]any{"steps": steps, "metrics": finalPass(ctx, tm, cpuM, dm, machine, state, counted)}, nil
				}
				if !res.Admit {
					out["admit"], out["reason"], out["message"] = false, res.Reason, res.Message
					recordAdmissionRejection(res.Reason) // admit_rejections.go
					break
				}
			}
			state.mu.Lock()
			state.admitting = nil
			if out["admit"] == true {
				state.live = append(state.live, pod)
			}
			state.mu.Unlock()
			if out["admit"] == true {
				recordPodLevelAdmission(pod) // compat_admit_plr_*.go: HandlePodAdditions counts the admitted pod
			}
			if out["admit"] == true {
				for _, ctr := range allContainers(pod) {
					id := containerID(pod, ctr.Name)
					cpuAddContainer(cpuM, pod, ctr, id)
					memAddContainer(memM, pod, ctr, id)
					addContainer(tm, pod, ctr, id)
				}
				ctrs := map[string]any{}
				for _, ctr := range allContainers(pod) {
					ctrs[ctr.Name] = containerAnswer(tm, cpuM, memM, dm, pod, ctr)
				}
				out["containers"] = ctrs
			}
			if made := calls.take(); len(made) > 0 {
				out["pluginCalls"] = made
			}
			if c.Held {
				out["held"] = heldAnswer(ctx, tm, cpuM, memM, dm, state, counted)
			}
			steps = append(steps, out)
		case "delete":
			state.mu.Lock()
			var gone *v1.Pod
			kept := state.live[:0]
			for _, p := range state.live {
				if string(p.UID) == s.UID {
					gone = p
				} else {
					kept = append(kept, p)
				}
			}
			state.live = kept
			state.mu.Unlock()
			// A rejected pod is terminal already (not active): its deletion changes nothing here.
			if gone != nil {
				for _, ctr := range allContainers(gone) {
					_ = removeTMContainer(tm, containerID(gone, ctr.Name))
				}
			}
			out := map[string]any{"deleted": s.UID}
			if c.Held {
				out["held"] = heldAnswer(ctx, tm, cpuM, memM, dm, state, counted)
			}
			steps = append(steps, out)
		default:
			return nil, fmt.Errorf("admit case: unknown step op %q", s.Op)
		}
	}
	return map[string]any{"steps": steps, "metrics": finalPass(ctx, tm, cpuM, dm, machine, state, counted)}, nil
}

// finalPass is the case's metrics (admit_metrics.go) once the kubelet's next stale-state pass has run
// (staleStatePass, not counted): the CPU manager's gauges then count what numalign's count at once.
func finalPass(ctx context.Context, tm topologymanager.Manager, cpuM cpuManager, dm *devicemanager.ManagerImpl,
	machine *cMachineInfo, state *pods, counted *caseMetrics) map[string]map[string]float64 {
	staleStatePass(ctx, tm, dm, state, counted)
	numaOf := map[int]int{}
	for _, node := range machine.Topology {
		for _, core := range node.Cores {
			for _, cpu := range core.Threads {
				numaOf[cpu] = node.Id
			}
		}
	}
	held := cpuset.New()
	for _, ctrs := range cpuM.State().GetCPUAssignments() {
		for _, set := range ctrs {
			held = held.Union(set)
		}
	}
	exclusive := map[int]int{}
	for _, cpu := range held.UnsortedList() {
		exclusive[numaOf[cpu]]++
	}
	return counted.answer(exclusive)
}

// startErrors is a manager's refusal to start. The policies walk their options map, so with several
// bad options which one the text names depends on Go's map order: every text seen over mapOrderTries
// tries is the answer (as the cpu and topology areas answer).
func startErrors(first error, again func() error) map[string]any {
	seen := map[string]bool{first.Error(): true}
	for i := 0; i < mapOrderTries; i++ {
		if err := again(); err != nil {
			seen[err.Error()] = true
		}
	}
	texts := make([]string, 0, len(seen))
	for t := range seen {
		texts = append(texts, t)
	}
	sort.Strings(texts)
	if len(texts) == 1 {
		return map[string]any{"start_error": texts[0]}
	}
	return map[string]any{"start_error": texts[0], "start_error_map_order": texts}
}

func allContainers(pod *v1.Pod) []*v1.Container {
	out := []*v1.Container{}
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

func memoryBlocksAnswer(blocks []memstate.Block) []map[string]any {
	out := []map[string]any{}
	for _, b := range blocks {
		nodes := append([]int{}, b.NUMAAffinity...)
		sort.Ints(nodes)
		out = append(out, map[string]any{"numa": nodes, "type": string(b.Type), "size": b.Size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["type"].(string) < out[j]["type"].(string) })
	return out
}

func containerAnswer(tm topologymanager.Manager, cpuM cpuManager, memM memoryManager, dm *devicemanager.ManagerImpl,
	pod *v1.Pod, ctr *v1.Container) map[string]any {
	out := map[string]any{"affinity": hintAnswer(getAffinity(tm, string(pod.UID), ctr.Name))}
	if set, ok := cpuM.State().GetCPUSet(string(pod.UID), ctr.Name); ok {
		out["cpus"] = sorted(set)
	} else {
		out["cpus"] = nil
	}
	out["memory"] = memoryBlocksAnswer(memM.State().GetMemoryBlocks(string(pod.UID), ctr.Name))
	devices := map[string][]string{}
	for res, ids := range dm.GetDevices(string(pod.UID), ctr.Name) {
		list := []string{}
		for id := range ids {
			list = append(list, id)
		}
		sort.Strings(list)
		devices[res] = list
	}
	out["devices"] = devices
	return out
}

// staleStatePass is the pass the kubelet's next admission makes first (see heldAnswer); what it counts
// is the harness's, not the case's.
func staleStatePass(ctx context.Context, tm topologymanager.Manager, dm *devicemanager.ManagerImpl, state *pods,
	counted *caseMetrics) {
	probe := &v1.Pod{}
	probe.Name, probe.Namespace, probe.UID = "stale-state-pass", "default", "stale-state-pass"
	probe.Spec.Containers = []v1.Container{{Name: "pass", Image: "pause"}}
	state.mu.Lock()
	state.admitting = probe
	state.mu.Unlock()
	counted.notCounted(func() { _ = handlerAdmit(ctx, tm, admitAttributes(probe, state.others(probe.UID))) })
	state.mu.Lock()
	state.admitting = nil
	state.mu.Unlock()
	updateAllocatedDevices(dm)
}

// heldAnswer is what the managers hold after a step, as their state and checkpoint files say, once the
// kubelet's own stale-state pass has run: a rejected pod is terminal, and what its admission allocated
// before the rejection (a plugin's Allocate failing for a later container) stays until the next
// removeStaleState (the CPU and memory managers, at the next pod's hints or Allocate, and the CPU
// manager's reconcile loop) and UpdateAllocatedDevices (the device manager); numalign releases it at
// once (docs/fidelity.md). The pass is the one the next admission makes first: the Topology Manager's
// admit handler for a pod of no requests, which no step admits, and UpdateAllocatedDevices, which that
// admission reaches only under a policy other than none.
func heldAnswer(ctx context.Context, tm topologymanager.Manager, cpuM cpuManager, memM memoryManager,
	dm *devicemanager.ManagerImpl, state *pods, counted *caseMetrics) map[string]any {
	staleStatePass(ctx, tm, dm, state, counted)

	cpus := map[string]any{"default": cpuM.State().GetDefaultCPUSet().String()}
	cpuEntries := map[string]map[string]string{}
	for uid, ctrs := range cpuM.State().GetCPUAssignments() {
		cpuEntries[uid] = map[string]string{}
		for name, set := range ctrs {
			cpuEntries[uid][name] = set.String()
		}
	}
	cpus["entries"] = cpuEntries
	machine := map[string]any{}
	for node, st := range memM.State().GetMachineState() {
		tables := map[string]any{}
		for res, t := range st.MemoryMap {
			tables[string(res)] = []uint64{t.TotalMemSize, t.SystemReserved, t.Allocatable, t.Reserved, t.Free}
		}
		cells := append([]int{}, st.Cells...)
		sort.Ints(cells)
		machine[strconv.Itoa(node)] = map[string]any{"assignments": st.NumberOfAssignments, "cells": cells, "memory": tables}
	}
	memEntries := map[string]map[string]any{}
	for uid, ctrs := range memM.State().GetMemoryAssignments() {
		memEntries[uid] = map[string]any{}
		for name, blocks := range ctrs {
			memEntries[uid][name] = memoryBlocksAnswer(blocks)
		}
	}
	return map[string]any{
		"cpus":    cpus,
		"memory":  map[string]any{"machine": machine, "entries": memEntries},
		"devices": deviceCheckpointAnswer(state),
	}
}

// deviceCheckpointAnswer is the device manager's checkpoint file as written: the entries (container,
// resource, the device ids per NUMA node, the plugin's Allocate answer as the file's base64) of the
// active pods, sorted (Go writes them in map order), and apart ("lagging") the pods no longer active
// whose entries the file still holds: UpdateAllocatedDevices forgets them without writing the file,
// which keeps them until the device manager next writes it (a device allocation, a plugin's
// ListAndWatch update), where numalign writes at once (docs/fidelity.md); and the registered devices.
func deviceCheckpointAnswer(state *pods) map[string]any {
	raw, err := os.ReadFile(filepath.Join(pluginapi.DevicePluginPath, "kubelet_internal_checkpoint"))
	if err != nil {
		return map[string]any{"error": "no checkpoint file"}
	}
	var file struct {
		Data struct {
			PodDeviceEntries []struct {
				PodUID, ContainerName, ResourceName string
				DeviceIDs                           map[string][]string
				AllocResp                           string
			}
			RegisteredDevices map[string][]string
		}
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		return map[string]any{"error": err.Error()}
	}
	active := map[string]bool{}
	for _, p := range state.active() {
		active[string(p.UID)] = true
	}
	entries := []map[string]any{}
	lagging := map[string]bool{}
	for _, e := range file.Data.PodDeviceEntries {
		if !active[e.PodUID] {
			lagging[e.PodUID] = true
			continue
		}
		ids := map[string][]string{}
		for n, list := range e.DeviceIDs {
			l := append([]string{}, list...)
			sort.Strings(l)
			ids[n] = l
		}
		entries = append(entries, map[string]any{"pod": e.PodUID, "container": e.ContainerName,
			"resource": e.ResourceName, "ids": ids, "allocResp": e.AllocResp})
	}
	key := func(e map[string]any) string {
		return e["pod"].(string) + "\x00" + e["container"].(string) + "\x00" + e["resource"].(string)
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	registered := map[string][]string{}
	for res, list := range file.Data.RegisteredDevices {
		l := append([]string{}, list...)
		sort.Strings(l)
		registered[res] = l
	}
	out := map[string]any{"entries": entries, "registered": registered}
	if len(lagging) > 0 {
		uids := []string{}
		for uid := range lagging {
			uids = append(uids, uid)
		}
		sort.Strings(uids)
		out["lagging"] = uids
	}
	return out
}

func init() { register("admit", admitArea) }
