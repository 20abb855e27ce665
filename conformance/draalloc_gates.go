//go:build !k8s133

package main

import (
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
)

// The DynamicResources plugin's default filter timeout (DynamicResourcesFilterTimeoutDefault).
const draFilterTimeout = 10 * time.Second

func gate(name string) bool { return utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(name)) }
