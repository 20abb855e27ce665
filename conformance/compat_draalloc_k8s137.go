//go:build !(k8s133 || k8s134 || k8s135 || k8s136)

package main

import (
	"errors"

	"fmt"

	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// 1.37: AllocatorFeatures passes DRAListTypeAttributes and the new DRA gates to the allocator.

const draAllocMapOrder = false

func draAllocFeatures() structured.Features {
	return structured.Features{
		AdminAccess:             gate("DRAAdminAccess"),
		PrioritizedList:         gate("DRAPrioritizedList"),
		PartitionableDevices:    gate("DRAPartitionableDevices"),
		DeviceTaints:            gate("DRADeviceTaints"),
		DeviceBindingAndStatus:  gate("DRADeviceBindingConditions") && gate("DRAResourceClaimDeviceStatus"),
		ConsumableCapacity:      gate("DRAConsumableCapacity"),
		FractionalCapacityRange: gate("DRAFractionalCapacityRange"),
		ListTypeAttributes:      gate("DRAListTypeAttributes"),
		OptionalNodeOperations:  gate("DRAOptionalNodeOperations"),
		DerivedAttributes:       gate("DRADerivedAttributes"),
		CompatibilityGroups:     gate("DRADeviceCompatibilityGroups"),
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
