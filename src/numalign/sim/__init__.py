"""numalign.sim."""
