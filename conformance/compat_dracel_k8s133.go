//go:build k8s133

package main

import (
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1beta1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// 1.33: the package has one compiler (no CEL features), its device is made of resource.k8s.io/v1beta1
// values and has no allowMultipleAllocations, and attributes are scalars.

type (
	draQualifiedName   = resourceapi.QualifiedName
	draDeviceAttribute = resourceapi.DeviceAttribute
	draDeviceCapacity  = resourceapi.DeviceCapacity
)

const draCelMaxCost = resourceapi.CELSelectorExpressionMaxCost

func draCelCompiler(draCelFeatures) interface {
	CompileCELExpression(string, dracel.Options) dracel.CompilationResult
} {
	return dracel.GetCompiler()
}

func draCelDeviceOf(driver string, allowMultiple *bool, attributes map[draQualifiedName]draDeviceAttribute,
	capacity map[draQualifiedName]draDeviceCapacity) (dracel.Device, error) {
	if allowMultiple != nil {
		return dracel.Device{}, fmt.Errorf("allowMultipleAllocations does not exist before 1.34")
	}
	return dracel.Device{Driver: driver, Attributes: attributes, Capacity: capacity}, nil
}

func draCelListAttribute(_ *resourceapi.DeviceAttribute, kind string, _ json.RawMessage) error {
	return fmt.Errorf("attribute kind %q does not exist before 1.36", kind)
}
