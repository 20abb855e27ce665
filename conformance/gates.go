package main

import (
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	_ "k8s.io/kubernetes/pkg/features" // registers the release's gates and their defaults
)

// withGates sets feature gates for one case, as --feature-gates would, and returns how to put the
// release's defaults back. An error is what the kubelet says when it refuses the setting at start-up.
func withGates(gates map[string]bool) (func(), error) {
	if len(gates) == 0 {
		return func() {}, nil
	}
	before := map[string]bool{}
	for name := range gates {
		before[name] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(name))
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		_ = utilfeature.DefaultMutableFeatureGate.SetFromMap(before)
		return nil, err
	}
	return func() { _ = utilfeature.DefaultMutableFeatureGate.SetFromMap(before) }, nil
}

// gate: whether the named gate is on now (the release's default or the case's override).
func gate(name string) bool { return utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(name)) }
