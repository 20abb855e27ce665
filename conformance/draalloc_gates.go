//go:build !k8s133

package main

import "time"

// The DynamicResources plugin's default filter timeout (DynamicResourcesFilterTimeoutDefault; 1.33 has none).
const draFilterTimeout = 10 * time.Second
