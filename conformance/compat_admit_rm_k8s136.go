//go:build !(k8s133 || k8s134 || k8s135)

package main

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/pkg/features"
	kubeletmetrics "k8s.io/kubernetes/pkg/kubelet/metrics"
)

// 1.36 on: the CPU and memory managers count their exclusive allocations, allocation errors and container
// assignments in the resource_manager_* families, which Register registers only while the alpha gate
// PodLevelResourceManagers is on. The harness registers them itself (Register ran once, under the first
// case's gates) and answers them for the cases whose gate is on, as a kubelet started with it exposes them.
var registerResourceManagers sync.Once

// startResourceManagerMetrics resets the families for a case and says whether it exposes them.
func startResourceManagerMetrics() bool {
	registerResourceManagers.Do(func() {
		for _, m := range []metrics.Registerable{kubeletmetrics.ResourceManagerAllocationsTotal,
			kubeletmetrics.ResourceManagerAllocationErrorsTotal, kubeletmetrics.ResourceManagerContainerAssignments} {
			err := legacyregistry.Register(m)
			if err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
				panic("harness: registering the resource_manager metrics: " + err.Error())
			}
		}
	})
	kubeletmetrics.ResourceManagerAllocationsTotal.Reset()
	kubeletmetrics.ResourceManagerAllocationErrorsTotal.Reset()
	kubeletmetrics.ResourceManagerContainerAssignments.Reset()
	return utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResourceManagers)
}
