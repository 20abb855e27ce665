"""numalign.machine."""
