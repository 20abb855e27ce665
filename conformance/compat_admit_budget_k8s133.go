//go:build k8s133 || k8s134 || k8s135 || k8s136

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

// 1.33 to 1.36: the providers' hint calls take the pod (and container) only.

func (p *budgetedProvider) GetTopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	hints := p.HintProvider.GetTopologyHints(pod, c)
	p.seen(hints)
	return hints
}
func (p *budgetedProvider) GetPodTopologyHints(pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	hints := p.HintProvider.GetPodTopologyHints(pod)
	p.seen(hints)
	return hints
}
