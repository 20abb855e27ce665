//go:build !(k8s133 || k8s134 || k8s135 || k8s136)

package main

import (
	"errors"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/metrics/legacyregistry"
	resourcehelper "k8s.io/component-helpers/resource"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/features"
	kubeletmetrics "k8s.io/kubernetes/pkg/kubelet/metrics"
)

// 1.37 on: HandlePodAdditions (kubelet.go) counts each pod it admits in
// kubelet_pod_level_resources_admission_total, by how its resources are set and its QoS class; Register
// registers the family only while PodLevelResources is on (beta, on by default since 1.34). The harness
// runs the admit handlers itself, not kubelet.go, so it counts each admitted pod the same way
// (recordPodLevelResourcesAdmission in kubelet_pods.go is not exported; the two helpers it reads are),
// registers the family itself and answers it for the cases whose gate is on.
var registerPodLevelAdmissions sync.Once

// startPodLevelAdmissionMetrics resets the family for a case and says whether the case's kubelet exposes it.
func startPodLevelAdmissionMetrics() bool {
	registerPodLevelAdmissions.Do(func() {
		err := legacyregistry.Register(kubeletmetrics.PodLevelResourcesAdmissionTotal)
		if err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
			panic("harness: registering kubelet_pod_level_resources_admission_total: " + err.Error())
		}
	})
	kubeletmetrics.PodLevelResourcesAdmissionTotal.Reset()
	return utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources)
}

// recordPodLevelAdmission counts one admitted pod as kubelet.go does.
func recordPodLevelAdmission(pod *v1.Pod) {
	set := func(containers []v1.Container) bool {
		for _, c := range containers {
			if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
				return true
			}
		}
		return false
	}
	podLevel := resourcehelper.IsPodLevelResourcesSet(pod)
	containerLevel := set(pod.Spec.Containers) || set(pod.Spec.InitContainers)
	mode := ""
	switch {
	case podLevel && containerLevel:
		mode = "pod_and_container_level"
	case podLevel:
		mode = "pod_level"
	case containerLevel:
		mode = "container_level"
	}
	qos := strings.ToLower(string(v1qos.GetPodQOS(pod)))
	kubeletmetrics.PodLevelResourcesAdmissionTotal.WithLabelValues(mode, qos).Inc()
}
