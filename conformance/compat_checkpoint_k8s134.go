//go:build k8s134

package main

import (
	"k8s.io/klog/v2"
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
)

// 1.34: the memory state takes a logger, the CPU state not yet.
func openCPUState(dir, name, policy string) (cpustate.State, error) {
	return cpustate.NewCheckpointState(dir, name, policy, nil)
}

func openMemoryState(dir, name, policy string) (memstate.State, error) {
	return memstate.NewCheckpointState(klog.Background(), dir, name, policy)
}
