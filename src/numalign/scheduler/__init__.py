"""The scheduler's side of one node: what kube-scheduler decides before the kubelet sees a pod.

Today that is Dynamic Resource Allocation's structured allocator (`scheduler/dra/`, upstream's
k8s.io/dynamic-resource-allocation/structured as the DynamicResources plugin drives it). It is a sibling
of kubelet/: both build on k8s/ (objects, versions) and neither imports the other."""
