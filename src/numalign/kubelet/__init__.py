"""numalign.kubelet."""
