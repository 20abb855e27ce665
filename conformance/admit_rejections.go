package main

// kubelet.go's admission rejections: HandlePodAdditions counts each pod it rejects in
// kubelet_admission_rejections_total, labelled by the rejection's reason when the reason is one of a
// fixed list of the release (admissionRejectionReasons in kubelet.go), as OutOfExtendedResources for
// any other reason naming a resource the node is short of, and as Other for the rest. The harness
// runs the admit handlers itself, not kubelet.go, so it counts the same way into the kubelet's own
// counter. The reasons come from the real packages' constants where the harness imports them already;
// the others (admit handlers this area does not run) are written out with the constant they stand for.

import (
	"strings"

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	kubeletmetrics "k8s.io/kubernetes/pkg/kubelet/metrics"
)

// rejectionReasons are the reasons every release 1.33-1.37 labels by name; releaseRejectionReasons
// (compat_admit_rejections_*.go) adds those of later releases.
var rejectionReasons = []string{
	lifecycle.AppArmorNotAdmittedReason,
	lifecycle.PodOSSelectorNodeLabelDoesNotMatch,
	lifecycle.PodOSNotSupported,
	lifecycle.InvalidNodeInfo,
	lifecycle.InitContainerRestartPolicyForbidden,
	lifecycle.SupplementalGroupsPolicyNotSupported,
	lifecycle.UnexpectedAdmissionError,
	lifecycle.UnknownReason,
	lifecycle.UnexpectedPredicateFailureType,
	lifecycle.OutOfCPU,
	lifecycle.OutOfMemory,
	lifecycle.OutOfEphemeralStorage,
	lifecycle.OutOfPods,
	"node(s) had taints that the pod didn't tolerate", // tainttoleration.ErrReasonNotMatch
	eviction.Reason,
	"SysctlForbidden", // sysctl.ForbiddenReason
	topologymanager.ErrorTopologyAffinity,
	"NodeShutdown", // nodeshutdown.NodeShutdownNotAdmittedReason
}

// recordAdmissionRejection counts one rejected pod as kubelet.go does.
func recordAdmissionRejection(reason string) {
	label := "Other"
	switch {
	case contains(rejectionReasons, reason) || contains(releaseRejectionReasons, reason):
		label = reason
	case strings.HasPrefix(reason, lifecycle.InsufficientResourcePrefix):
		label = "OutOfExtendedResources"
	}
	kubeletmetrics.AdmissionRejectionsTotal.WithLabelValues(label).Inc()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
