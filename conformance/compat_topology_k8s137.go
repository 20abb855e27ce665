//go:build !(k8s133 || k8s134 || k8s135 || k8s136)

package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// 1.37: loggers and contexts everywhere, and the lifecycle operation on every provider call.

func (p *scriptedProvider) GetTopologyHints(_ klog.Logger, _ *v1.Pod, c *v1.Container, _ lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.containerHints(c.Name)
}
func (p *scriptedProvider) GetPodTopologyHints(_ klog.Logger, _ *v1.Pod, _ lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.podHints()
}
func (p *scriptedProvider) AllocatePod(_ klog.Logger, _ *v1.Pod, _ lifecycle.Operation) error {
	return nil
}
func (p *scriptedProvider) Allocate(_ context.Context, _ *v1.Pod, c *v1.Container, _ lifecycle.Operation) error {
	return p.allocate(c.Name)
}

type newManagerFunc[T any] func(klog.Logger, T, string, string, map[string]string) (topologymanager.Manager, error)

func callNewManager[T any](f newManagerFunc[T], nodes []byte, policy, scope string, opts map[string]string) (topologymanager.Manager, error) {
	topo, err := decodeJSON[T](nodes)
	if err != nil {
		return nil, err
	}
	return f(logger, topo, policy, scope, opts)
}

func newTopologyManager(nodes []byte, policy, scope string, opts map[string]string) (topologymanager.Manager, error) {
	return callNewManager(topologymanager.NewManager, nodes, policy, scope, opts)
}
func addHintProvider(m topologymanager.Manager, p topologymanager.HintProvider) {
	m.AddHintProvider(logger, p)
}
func admitPod(m topologymanager.Manager, pod *v1.Pod) lifecycle.PodAdmitResult {
	return m.Admit(context.Background(), &lifecycle.PodAdmitAttributes{Pod: pod, Operation: lifecycle.AddOperation})
}
func addContainer(m topologymanager.Manager, pod *v1.Pod, c *v1.Container, id string) {
	m.AddContainer(logger, pod, c, id)
}
func removeTMContainer(m topologymanager.Manager, id string) error {
	return m.RemoveContainer(logger, id)
}
func getAffinity(m topologymanager.Manager, uid, name string) topologymanager.TopologyHint {
	return m.GetAffinity(logger, uid, name)
}
