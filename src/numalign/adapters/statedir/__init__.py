"""numalign.adapters.statedir."""
