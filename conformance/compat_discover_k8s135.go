//go:build k8s135 || k8s136

package main

import (
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
)

// 1.35 and 1.36: Discover takes a logger.
func discoverTopology(mi *cMachineInfo) (*topology.CPUTopology, error) {
	return topology.Discover(klog.Background(), mi)
}
