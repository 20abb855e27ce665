"""numalign.adapters."""
