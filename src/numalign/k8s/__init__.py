"""numalign.k8s."""
