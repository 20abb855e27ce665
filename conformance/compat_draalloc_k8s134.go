//go:build k8s134

package main

import (
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// 1.34: DeviceBinding and DeviceStatus are separate allocator features; pools come from a Go map.

const draAllocMapOrder = true

func draAllocFeatures() structured.Features {
	return structured.Features{
		AdminAccess:          gate("DRAAdminAccess"),
		PrioritizedList:      gate("DRAPrioritizedList"),
		PartitionableDevices: gate("DRAPartitionableDevices"),
		DeviceTaints:         gate("DRADeviceTaints"),
		DeviceBinding:        gate("DRADeviceBindingConditions"),
		DeviceStatus:         gate("DRAResourceClaimDeviceStatus"),
		ConsumableCapacity:   gate("DRAConsumableCapacity"),
	}
}

func draAllocCelFeatures() dracel.Features {
	return dracel.Features{EnableConsumableCapacity: gate("DRAConsumableCapacity")}
}

func draTimeout(string) (string, string) {
	return "unschedulable", "timed out trying to allocate devices"
}

// 1.34 has no ErrFailedAllocationOnNode: an invalid pool fails the allocation as an error.
func draNodeFailure(error) bool { return false }
