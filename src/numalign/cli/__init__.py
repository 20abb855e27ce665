"""numalign.cli."""
