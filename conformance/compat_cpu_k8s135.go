//go:build k8s135 || k8s136

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/utils/cpuset"
)

// 1.35 and 1.36: contextual logging; the Store gains Name() in 1.36 (affinityStore has it always).

var logger = klog.Background()

func (a *affinityStore) GetAffinity(podUID, container string) topologymanager.TopologyHint {
	return a.affinity(podUID, container)
}

func newStaticPolicy(t *topology.CPUTopology, n int, r cpuset.CPUSet, s topologymanager.Store, o map[string]string) (cpumanager.Policy, error) {
	return cpumanager.NewStaticPolicy(logger, t, n, r, s, o)
}
func newMemoryState() state.State                          { return state.NewMemoryState(logger) }
func startPolicy(p cpumanager.Policy, s state.State) error { return p.Start(logger, s) }
func removeContainer(p cpumanager.Policy, s state.State, pod, c string) error {
	return p.RemoveContainer(logger, s, pod, c)
}
func allocate(p cpumanager.Policy, s state.State, pod *v1.Pod, c *v1.Container) error {
	return p.Allocate(logger, s, pod, c)
}
func reservedOf(p cpumanager.Policy, t *topology.CPUTopology, _ int, _ cpuset.CPUSet) cpuset.CPUSet {
	return t.CPUDetails.CPUs().Difference(p.GetAllocatableCPUs(state.NewMemoryState(logger)))
}
