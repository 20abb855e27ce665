//go:build k8s133

package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

// 1.33: the memory manager takes no logger and no context.

func newMemoryManager(policy string, m *cMachineInfo, reservation v1.ResourceList,
	reserved []kubeletconfig.MemoryReservation, dir string, tm topologymanager.Manager) (memorymanager.Manager, error) {
	return memorymanager.NewManager(policy, m, reservation, reserved, dir, tm)
}
func startMemoryManager(_ context.Context, m memorymanager.Manager, active func() []*v1.Pod) error {
	return m.Start(active, sourcesReady{}, noStatus{}, noRuntime{}, containermap.NewContainerMap())
}
func memAddContainer(m memorymanager.Manager, pod *v1.Pod, c *v1.Container, id string) {
	m.AddContainer(pod, c, id)
}
