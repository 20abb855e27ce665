//go:build tools

// The topology-updater's command is built from its module (interop/build); this keeps its packages,
// and so the command's dependencies, in go.mod and go.sum.
package tools

import (
	_ "sigs.k8s.io/node-feature-discovery/pkg/nfd-topology-updater"
)
