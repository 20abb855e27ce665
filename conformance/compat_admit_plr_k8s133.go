//go:build k8s133 || k8s134 || k8s135 || k8s136

package main

import v1 "k8s.io/api/core/v1"

// Before 1.37 the kubelet does not count admissions by how pod-level resources are set.
func startPodLevelAdmissionMetrics() bool { return false }

func recordPodLevelAdmission(*v1.Pod) {}
