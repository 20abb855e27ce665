"""numalign.providers.cpu."""
