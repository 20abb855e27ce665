"""numalign.providers.memory."""
