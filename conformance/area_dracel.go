package main

// The "dra-cel" area: a DRA device selector as the API server and the scheduler see it
// (k8s.io/dynamic-resource-allocation/cel on k8s.io/apiserver's CEL environment). For one expression and
// one device it answers what the API server says when an object with the selector is created (the
// NewExpressions environment: a compile error, or "too complex, exceeds cost limit" over the estimated
// cost limit), the compile error of a stored object (StoredExpressions), the checked output type, the
// estimated cost, and what DeviceMatches gives for the device (the scheduler's evaluation, with its
// runtime cost limit): a bool or the error text.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
)

type draCelFeatures struct {
	ConsumableCapacity bool `json:"consumable_capacity"`
	ListTypeAttributes bool `json:"list_type_attributes"`
}

type draCelDevice struct {
	Driver                   string                     `json:"driver"`
	AllowMultipleAllocations *bool                      `json:"allow_multiple_allocations"`
	Attributes               map[string]json.RawMessage `json:"attributes"` // {"int": 1} | {"strings": [...]} ...
	Capacity                 map[string]string          `json:"capacity"`
}

type draCelCase struct {
	Expr     string         `json:"expr"`
	Features draCelFeatures `json:"features"`
	Device   draCelDevice   `json:"device"`
	// WithCost asks for the evaluated cost too (the Python side asks only where it does not depend on
	// the order Go walks a map in)
	WithCost bool `json:"with_cost"`
}

func init() { register("dra-cel", draCel) }

func draCel(raw json.RawMessage) (any, error) {
	var c draCelCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	answer := map[string]any{}
	created := draCelCompile(c.Expr, c.Features, environment.NewExpressions)
	switch {
	case created.Error != nil:
		answer["create"] = created.Error.Detail
	case created.MaxCost > draCelMaxCost:
		answer["create"] = "too complex, exceeds cost limit"
	default:
		answer["create"] = nil
	}
	stored := draCelCompile(c.Expr, c.Features, environment.StoredExpressions)
	if stored.Error != nil {
		answer["stored"] = stored.Error.Detail
		return answer, nil
	}
	answer["stored"] = nil
	answer["output_type"] = stored.OutputType.String()
	answer["max_cost"] = strconv.FormatUint(stored.MaxCost, 10) // beyond float64's exact integers
	device, err := draCelInput(c.Device)
	if err != nil {
		return nil, err
	}
	matched, details, err := stored.DeviceMatches(context.Background(), device)
	// The cost of an evaluation that failed is not compared: which calls cel-go still charges after an
	// argument failed is not modelled exactly (docs/dra.md).
	if c.WithCost && err == nil && details != nil && details.ActualCost() != nil {
		answer["actual_cost"] = *details.ActualCost()
	}
	if err != nil {
		answer["value"] = map[string]any{"runtime_error": err.Error()}
	} else {
		answer["value"] = map[string]any{"result": matched}
	}
	return answer, nil
}

func draCelCompile(expr string, f draCelFeatures, env environment.Type) dracel.CompilationResult {
	return draCelCompiler(f).CompileCELExpression(expr, dracel.Options{EnvType: ptr.To(env)})
}

func draCelInput(d draCelDevice) (dracel.Device, error) {
	attributes := map[draQualifiedName]draDeviceAttribute{}
	capacity := map[draQualifiedName]draDeviceCapacity{}
	for name, raw := range d.Attributes {
		var one map[string]json.RawMessage
		if err := json.Unmarshal(raw, &one); err != nil || len(one) != 1 {
			return dracel.Device{}, fmt.Errorf("attribute %s: want one {kind: value}", name)
		}
		var attr draDeviceAttribute
		for kind, value := range one {
			var err error
			switch kind {
			case "int":
				var v int64
				err = json.Unmarshal(value, &v)
				attr.IntValue = &v
			case "bool":
				var v bool
				err = json.Unmarshal(value, &v)
				attr.BoolValue = &v
			case "string":
				var v string
				err = json.Unmarshal(value, &v)
				attr.StringValue = &v
			case "version":
				var v string
				err = json.Unmarshal(value, &v)
				attr.VersionValue = &v
			default:
				err = draCelListAttribute(&attr, kind, value)
			}
			if err != nil {
				return dracel.Device{}, fmt.Errorf("attribute %s: %w", name, err)
			}
		}
		attributes[draQualifiedName(name)] = attr
	}
	for name, value := range d.Capacity {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return dracel.Device{}, fmt.Errorf("capacity %s: %w", name, err)
		}
		capacity[draQualifiedName(name)] = draDeviceCapacity{Value: q}
	}
	return draCelDeviceOf(d.Driver, d.AllowMultipleAllocations, attributes, capacity)
}
