//go:build k8s136

package main

import (
	"errors"

	"fmt"

	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// 1.36: the scheduler gives DRAListTypeAttributes to CEL only, not to the allocator (AllocatorFeatures).

const draAllocMapOrder = false

func draAllocFeatures() structured.Features {
	return structured.Features{
		AdminAccess:            gate("DRAAdminAccess"),
		PrioritizedList:        gate("DRAPrioritizedList"),
		PartitionableDevices:   gate("DRAPartitionableDevices"),
		DeviceTaints:           gate("DRADeviceTaints"),
		DeviceBindingAndStatus: gate("DRADeviceBindingConditions") && gate("DRAResourceClaimDeviceStatus"),
		ConsumableCapacity:     gate("DRAConsumableCapacity"),
	}
}

func draAllocCelFeatures() dracel.Features {
	return dracel.Features{EnableConsumableCapacity: gate("DRAConsumableCapacity"),
		EnableListTypeAttributes: gate("DRAListTypeAttributes")}
}

func draTimeout(node string) (string, string) {
	return "error", fmt.Sprintf("node %s: timed out trying to allocate devices", node)
}

func draNodeFailure(err error) bool { return errors.Is(err, structured.ErrFailedAllocationOnNode) }
