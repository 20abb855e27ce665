"""The kubelet's DRA manager (upstream pkg/kubelet/cm/dra): the ResourceClaims prepared for this node's
pods, which pods reserve each, and the life cycle around admission (allocate before, commit after,
release on removal). What it holds is part of the node's state (kubelet.state.NodeState.claims), so one
commit writes a pod's record and its claims together."""
