"""numalign.kubelet.topologymanager."""
