//go:build k8s133 || k8s134

package main

import (
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
)

// 1.33 and 1.34: cadvisor's packages under github.com/google/cadvisor; Discover takes no logger.
func discoverTopology(mi *cMachineInfo) (*topology.CPUTopology, error) {
	return topology.Discover(mi)
}
