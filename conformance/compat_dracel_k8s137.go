//go:build !(k8s133 || k8s134 || k8s135)

package main

import (
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// 1.36 and later: DRAListTypeAttributes adds list-valued attributes and `includes`.

func draCelCompiler(f draCelFeatures) interface {
	CompileCELExpression(string, dracel.Options) dracel.CompilationResult
} {
	return dracel.GetCompiler(dracel.Features{
		EnableConsumableCapacity: f.ConsumableCapacity,
		EnableListTypeAttributes: f.ListTypeAttributes,
	})
}

func draCelListAttribute(attr *resourceapi.DeviceAttribute, kind string, value json.RawMessage) error {
	switch kind {
	case "ints":
		return json.Unmarshal(value, &attr.IntValues)
	case "bools":
		return json.Unmarshal(value, &attr.BoolValues)
	case "strings":
		return json.Unmarshal(value, &attr.StringValues)
	case "versions":
		return json.Unmarshal(value, &attr.VersionValues)
	}
	return fmt.Errorf("unknown attribute kind %q", kind)
}
