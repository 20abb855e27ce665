"""numalign.core."""
