//go:build !(k8s133 || k8s134 || k8s135)

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// 1.36 on: the admit attributes name the operation (an addition here).

func admitAttributes(pod *v1.Pod, others []*v1.Pod) *lifecycle.PodAdmitAttributes {
	return &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others, Operation: lifecycle.AddOperation}
}
