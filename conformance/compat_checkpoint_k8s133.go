//go:build k8s133

package main

import (
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
)

// 1.33: the state constructors take no logger.
func openCPUState(dir, name, policy string) (cpustate.State, error) {
	return cpustate.NewCheckpointState(dir, name, policy, nil)
}

func openMemoryState(dir, name, policy string) (memstate.State, error) {
	return memstate.NewCheckpointState(dir, name, policy)
}
