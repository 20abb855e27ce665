//go:build k8s134

package main

import "k8s.io/kubernetes/pkg/kubelet/lifecycle"

// 1.34 adds pod-level resources refused and the volume attachment limit.
var releaseRejectionReasons = []string{
	lifecycle.PodLevelResourcesNotAdmittedReason,
	"VolumeAttachmentLimitExceeded", // volumemanager.VolumeAttachmentLimitExceededReason
}
