//go:build k8s133

package main

// 1.33 labels no reason beyond rejectionReasons.
var releaseRejectionReasons = []string{}
