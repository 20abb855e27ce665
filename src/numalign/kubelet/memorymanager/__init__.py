"""numalign.kubelet.memorymanager."""
