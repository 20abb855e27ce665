package main

// The admit area's kubelet metrics: what the real managers count while a case runs. The kubelet's
// metrics package registers them in the legacy registry (Register, as the kubelet does at start-up:
// before that an ALPHA metric is not instantiated and counts nothing); the harness answers many cases in
// one process, so each case's answer is what its own admissions added: the counters and histogram
// counts less their value when the case started, and the labelled counters reset at its start, so that
// the series the managers create at start-up (Add(0)) are the case's own (a fresh kubelet's).
//
// heldAnswer's stale-state pass is the harness's, not the case's: its Topology Manager admission counts
// too (a request, its duration, an aligned container), so what it adds is taken off, and a series it
// alone created is left out.
//
// The CPU manager's gauges are values, not counts: they are set to where a fresh kubelet has them (zero,
// no per-NUMA series) when a case starts, and answered as they stand at its end, after the kubelet's
// next stale-state pass (finalPass in area_admit.go): upstream releases a deleted or rejected pod's
// CPUs there, numalign at once. A per-NUMA series whose node holds no exclusive CPU now keeps the count
// it was last set to, which depends on the order removeStaleState walks a Go map when several
// containers go at once, so such a series is answered as keptAtZero (it exists; its value is not
// compared). The device plugins' Allocate duration is time: compared by its sample count per resource.
// kubelet.go's admission rejections are counted by the harness as HandlePodAdditions counts them
// (admit_rejections.go), into the kubelet's own counter.

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/component-base/metrics/legacyregistry"
	kubeletmetrics "k8s.io/kubernetes/pkg/kubelet/metrics"
)

// comparedMetrics are the families the Topology Manager, the CPU manager's static policy, the memory
// manager's Static policy and the device manager count at admission, and kubelet.go's admission
// rejections, as the legacy registry names them (the kubelet subsystem prefixed): the same names at
// 1.33-1.37. A histogram is compared by its sample count (its sum is time).
var comparedMetrics = map[string]bool{
	"kubelet_topology_manager_admission_requests_total":         true,
	"kubelet_topology_manager_admission_errors_total":           true,
	"kubelet_topology_manager_admission_duration_ms":            true,
	"kubelet_container_aligned_compute_resources_count":         true,
	"kubelet_container_aligned_compute_resources_failure_count": true,
	"kubelet_cpu_manager_pinning_requests_total":                true,
	"kubelet_cpu_manager_pinning_errors_total":                  true,
	"kubelet_memory_manager_pinning_requests_total":             true,
	"kubelet_memory_manager_pinning_errors_total":               true,
	"kubelet_device_plugin_registration_total":                  true,
	"kubelet_device_plugin_alloc_duration_seconds":              true,
	"kubelet_admission_rejections_total":                        true,
	// 1.36 on, with the gate PodLevelResourceManagers (compat_admit_rm_k8s136.go): 1.36 without the
	// kubelet subsystem (and the assignments without _total), 1.37 with it
	"resource_manager_allocations_total":                   true,
	"resource_manager_allocation_errors_total":             true,
	"resource_manager_container_assignments":               true,
	"kubelet_resource_manager_allocations_total":           true,
	"kubelet_resource_manager_allocation_errors_total":     true,
	"kubelet_resource_manager_container_assignments_total": true,
	// 1.37 on, while PodLevelResources is on (compat_admit_plr_k8s137.go)
	podLevelAdmissions: true,
	gaugeSharedPool:    true,
	gaugeExclusive:     true,
	gaugePerNUMA:       true,
}

// kubelet.go's count of admitted pods by how their resources are set (1.37 on).
const podLevelAdmissions = "kubelet_pod_level_resources_admission_total"

// The CPU manager's gauges (the static policy sets them; see the file's comment).
const (
	gaugeSharedPool = "kubelet_cpu_manager_shared_pool_size_millicores"
	gaugeExclusive  = "kubelet_cpu_manager_exclusive_cpu_allocation_count"
	gaugePerNUMA    = "kubelet_cpu_manager_allocation_per_numa"
)

var gauges = map[string]bool{gaugeSharedPool: true, gaugeExclusive: true, gaugePerNUMA: true}

// keptAtZero answers a per-NUMA series whose node holds no exclusive CPU now (see the file's comment).
const keptAtZero = -1

// metricValues: family -> series (its labels as "name=value" joined by ",", sorted; "" for none) -> value.
type metricValues map[string]map[string]float64

var registerMetrics sync.Once

// gatherMetrics reads the compared families from the legacy registry.
func gatherMetrics() metricValues {
	registerMetrics.Do(func() { kubeletmetrics.Register() })
	out := metricValues{}
	fams, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		panic("harness: gathering the kubelet metrics: " + err.Error())
	}
	for _, f := range fams {
		if !comparedMetrics[f.GetName()] {
			continue
		}
		series := map[string]float64{}
		for _, m := range f.GetMetric() {
			labels := []string{}
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			v := m.GetCounter().GetValue()
			switch f.GetType().String() {
			case "HISTOGRAM":
				v = float64(m.GetHistogram().GetSampleCount())
			case "GAUGE":
				v = m.GetGauge().GetValue()
			}
			series[strings.Join(labels, ",")] = v
		}
		out[f.GetName()] = series
	}
	return out
}

// caseMetrics is one case's share of the registry's values.
type caseMetrics struct {
	resourceManagers bool // the case's kubelet exposes the resource_manager_* families
	podLevel         bool // the case's kubelet exposes kubelet_pod_level_resources_admission_total
	start            metricValues
	excluded         metricValues    // what the harness's own admissions added
	probed           map[string]bool // series ("family\x00labels") that only the harness's admissions created
}

// startCaseMetrics resets the labelled counters and notes where the others stand.
func startCaseMetrics() *caseMetrics {
	registerMetrics.Do(func() { kubeletmetrics.Register() })
	kubeletmetrics.ContainerAlignedComputeResources.Reset()
	kubeletmetrics.ContainerAlignedComputeResourcesFailure.Reset()
	kubeletmetrics.DevicePluginRegistrationCount.Reset()
	kubeletmetrics.DevicePluginAllocationDuration.Reset()
	kubeletmetrics.AdmissionRejectionsTotal.Reset()
	kubeletmetrics.CPUManagerAllocationPerNUMA.Reset()
	kubeletmetrics.CPUManagerSharedPoolSizeMilliCores.Set(0)
	kubeletmetrics.CPUManagerExclusiveCPUsAllocationCount.Set(0)
	rm := startResourceManagerMetrics()
	podLevel := startPodLevelAdmissionMetrics()
	return &caseMetrics{resourceManagers: rm, podLevel: podLevel, start: gatherMetrics(), excluded: metricValues{}, probed: map[string]bool{}}
}

// notCounted runs one of the harness's own admissions: what it adds is not the case's.
func (c *caseMetrics) notCounted(f func()) {
	before := gatherMetrics()
	f()
	for fam, series := range gatherMetrics() {
		if gauges[fam] {
			continue // a value: where the harness's pass leaves it is the kubelet's (finalPass)
		}
		for labels, v := range series {
			was, ok := before[fam][labels]
			if !ok {
				c.probed[fam+"\x00"+labels] = true
			}
			if v != was {
				if c.excluded[fam] == nil {
					c.excluded[fam] = map[string]float64{}
				}
				c.excluded[fam][labels] += v - was
			}
		}
	}
}

// answer is what the case's admissions added, per family and series, and the gauges as they stand;
// exclusive is the number of exclusive CPUs each NUMA node holds now.
func (c *caseMetrics) answer(exclusive map[int]int) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for fam, series := range gatherMetrics() {
		if strings.Contains(fam, "resource_manager_") && !c.resourceManagers {
			continue // registered by the harness for every case; a kubelet without the gate has none
		}
		if fam == podLevelAdmissions && !c.podLevel {
			continue // the same, for PodLevelResources
		}
		got := map[string]float64{}
		if gauges[fam] {
			for labels, v := range series {
				if fam == gaugePerNUMA {
					node, _ := strconv.Atoi(strings.TrimPrefix(labels, "numa_node="))
					if exclusive[node] == 0 {
						v = keptAtZero
					}
				}
				got[labels] = v
			}
			if len(got) > 0 {
				out[fam] = got
			}
			continue
		}
		for labels, v := range series {
			v -= c.start[fam][labels] + c.excluded[fam][labels]
			if v == 0 && c.probed[fam+"\x00"+labels] {
				continue
			}
			got[labels] = v
		}
		if len(got) > 0 { // a labelled family with no series is not exposed (a reset one, say)
			out[fam] = got
		}
	}
	return out
}
