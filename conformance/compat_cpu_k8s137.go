//go:build !(k8s133 || k8s134 || k8s135 || k8s136)

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"
)

// 1.37 (the module's go.mod, built without a tag): Allocate takes the lifecycle operation, and the
// Store's GetAffinity a logger.

var logger = klog.Background()

func (a *affinityStore) GetAffinity(_ klog.Logger, podUID, container string) topologymanager.TopologyHint {
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
	return p.Allocate(logger, s, pod, c, lifecycle.AddOperation)
}
func reservedOf(p cpumanager.Policy, t *topology.CPUTopology, _ int, _ cpuset.CPUSet) cpuset.CPUSet {
	return t.CPUDetails.CPUs().Difference(p.GetAllocatableCPUs(state.NewMemoryState(logger)))
}
