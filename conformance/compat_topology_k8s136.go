//go:build k8s136

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// 1.36: as 1.35, and providers have AllocatePod (pod-level resource managers; these pods set no spec.resources).

func (p *scriptedProvider) GetTopologyHints(_ *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	return p.containerHints(c.Name)
}
func (p *scriptedProvider) GetPodTopologyHints(_ *v1.Pod) map[string][]topologymanager.TopologyHint {
	return p.podHints()
}
func (p *scriptedProvider) Allocate(_ *v1.Pod, c *v1.Container) error { return p.allocate(c.Name) }

type newManagerFunc[T any] func(T, string, string, map[string]string) (topologymanager.Manager, error)

func callNewManager[T any](f newManagerFunc[T], nodes []byte, policy, scope string, opts map[string]string) (topologymanager.Manager, error) {
	topo, err := decodeJSON[T](nodes)
	if err != nil {
		return nil, err
	}
	return f(topo, policy, scope, opts)
}

func newTopologyManager(nodes []byte, policy, scope string, opts map[string]string) (topologymanager.Manager, error) {
	return callNewManager(topologymanager.NewManager, nodes, policy, scope, opts)
}
func addHintProvider(m topologymanager.Manager, p topologymanager.HintProvider) {
	m.AddHintProvider(logger, p)
}
func admitPod(m topologymanager.Manager, pod *v1.Pod) lifecycle.PodAdmitResult {
	return m.Admit(&lifecycle.PodAdmitAttributes{Pod: pod})
}
func addContainer(m topologymanager.Manager, pod *v1.Pod, c *v1.Container, id string) {
	m.AddContainer(pod, c, id)
}
func removeTMContainer(m topologymanager.Manager, id string) error { return m.RemoveContainer(id) }
func getAffinity(m topologymanager.Manager, uid, name string) topologymanager.TopologyHint {
	return m.GetAffinity(uid, name)
}
func (p *scriptedProvider) AllocatePod(_ *v1.Pod) error { return nil }
