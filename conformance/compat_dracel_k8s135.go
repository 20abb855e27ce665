//go:build k8s134 || k8s135

package main

import (
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// 1.34 and 1.35: the CEL features have DRAConsumableCapacity only, attributes are scalars.

func draCelCompiler(f draCelFeatures) interface {
	CompileCELExpression(string, dracel.Options) dracel.CompilationResult
} {
	return dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: f.ConsumableCapacity})
}

func draCelListAttribute(_ *resourceapi.DeviceAttribute, kind string, _ json.RawMessage) error {
	return fmt.Errorf("attribute kind %q does not exist before 1.36", kind)
}
