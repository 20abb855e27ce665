"""numalign.core.policies."""
