//go:build k8s135

package main

import (
	"errors"

	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// 1.35: pools come from a Go map; the filter timeout is an unschedulable node.

const draAllocMapOrder = true

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
	return dracel.Features{EnableConsumableCapacity: gate("DRAConsumableCapacity")}
}

func draTimeout(string) (string, string) {
	return "unschedulable", "timed out trying to allocate devices"
}

func draNodeFailure(err error) bool { return errors.Is(err, structured.ErrFailedAllocationOnNode) }
