"""numalign.providers."""
