"""numalign.state."""
