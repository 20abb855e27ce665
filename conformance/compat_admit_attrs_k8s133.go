//go:build k8s133 || k8s134 || k8s135

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// 1.33 to 1.35: the admit attributes carry no operation (every admission is an addition).

func admitAttributes(pod *v1.Pod, others []*v1.Pod) *lifecycle.PodAdmitAttributes {
	return &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others}
}
