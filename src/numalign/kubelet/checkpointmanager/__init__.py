"""numalign.kubelet.checkpointmanager."""
