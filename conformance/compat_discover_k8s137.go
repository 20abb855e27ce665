//go:build !(k8s133 || k8s134 || k8s135 || k8s136)

package main

import (
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
)

// 1.37: cadvisor's library module (github.com/google/cadvisor/lib).
func discoverTopology(mi *cMachineInfo) (*topology.CPUTopology, error) {
	return topology.Discover(klog.Background(), mi)
}
