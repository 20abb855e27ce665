//go:build !(k8s133 || k8s134)

package main

import "k8s.io/kubernetes/pkg/kubelet/lifecycle"

// 1.35 on adds a pod feature the node does not support to 1.34's.
var releaseRejectionReasons = []string{
	lifecycle.PodLevelResourcesNotAdmittedReason,
	lifecycle.PodFeatureUnsupported,
	"VolumeAttachmentLimitExceeded", // volumemanager.VolumeAttachmentLimitExceededReason
}
