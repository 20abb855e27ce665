//go:build !k8s133

package main

import (
	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// 1.34 and later: the selector's device is made of resource.k8s.io/v1 values.

type (
	draQualifiedName   = resourceapi.QualifiedName
	draDeviceAttribute = resourceapi.DeviceAttribute
	draDeviceCapacity  = resourceapi.DeviceCapacity
)

const draCelMaxCost = resourceapi.CELSelectorExpressionMaxCost

func draCelDeviceOf(driver string, allowMultiple *bool, attributes map[draQualifiedName]draDeviceAttribute,
	capacity map[draQualifiedName]draDeviceCapacity) (dracel.Device, error) {
	return dracel.Device{Driver: driver, AllowMultipleAllocations: allowMultiple, Attributes: attributes,
		Capacity: capacity}, nil
}
