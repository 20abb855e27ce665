//go:build !(k8s133 || k8s134 || k8s135 || k8s136)

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// 1.37: a logger and the lifecycle operation on every provider call.

func (p *budgetedProvider) GetTopologyHints(l klog.Logger, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	hints := p.HintProvider.GetTopologyHints(l, pod, c, op)
	p.seen(hints)
	return hints
}
func (p *budgetedProvider) GetPodTopologyHints(l klog.Logger, pod *v1.Pod, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	hints := p.HintProvider.GetPodTopologyHints(l, pod, op)
	p.seen(hints)
	return hints
}
