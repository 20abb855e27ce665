//go:build k8s133 || k8s134 || k8s135

package main

// Before 1.36 the kubelet has no resource_manager_* families.
func startResourceManagerMetrics() bool { return false }
