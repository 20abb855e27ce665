//go:build !k8s133

package main

import (
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

// 1.34 on: the stub hands its callbacks pointers to the devices.

func setStubFuncs(s *plugin.Stub, alloc func(*pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error),
	prefer func(*pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error)) {
	s.SetAllocFunc(func(r *pluginapi.AllocateRequest, _ map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
		return alloc(r)
	})
	s.SetGetPreferredAllocFunc(func(r *pluginapi.PreferredAllocationRequest, _ map[string]*pluginapi.Device) (*pluginapi.PreferredAllocationResponse, error) {
		return prefer(r)
	})
}

// requestDevices is a container request's device ids (protoc-gen-go from 1.34: DevicesIds).
func requestDevices(r *pluginapi.ContainerAllocateRequest) []string { return r.DevicesIds }
