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

import (
	"sort"
	"strings"
	"sync"

	"k8s.io/component-base/metrics/legacyregistry"
	kubeletmetrics "k8s.io/kubernetes/pkg/kubelet/metrics"
)

// comparedMetrics are the families the Topology Manager, the CPU manager's static policy and the memory
// manager's Static policy count at admission, as the legacy registry names them (the kubelet subsystem
// prefixed): the same names at 1.33-1.37. A histogram is compared by its sample count (its sum is
// time). The gauges the CPU manager sets, the device manager's registration and Allocate duration
// (per plugin, the harness's own registrations) and kubelet.go's admission rejections (not run here)
// are not.
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
}

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
			if f.GetType().String() == "HISTOGRAM" {
				v = float64(m.GetHistogram().GetSampleCount())
			}
			series[strings.Join(labels, ",")] = v
		}
		out[f.GetName()] = series
	}
	return out
}

// caseMetrics is one case's share of the registry's values.
type caseMetrics struct {
	start    metricValues
	excluded metricValues    // what the harness's own admissions added
	probed   map[string]bool // series ("family\x00labels") that only the harness's admissions created
}

// startCaseMetrics resets the labelled counters and notes where the others stand.
func startCaseMetrics() *caseMetrics {
	registerMetrics.Do(func() { kubeletmetrics.Register() })
	kubeletmetrics.ContainerAlignedComputeResources.Reset()
	kubeletmetrics.ContainerAlignedComputeResourcesFailure.Reset()
	return &caseMetrics{start: gatherMetrics(), excluded: metricValues{}, probed: map[string]bool{}}
}

// notCounted runs one of the harness's own admissions: what it adds is not the case's.
func (c *caseMetrics) notCounted(f func()) {
	before := gatherMetrics()
	f()
	for fam, series := range gatherMetrics() {
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

// answer is what the case's admissions added, per family and series.
func (c *caseMetrics) answer() map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for fam, series := range gatherMetrics() {
		got := map[string]float64{}
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
